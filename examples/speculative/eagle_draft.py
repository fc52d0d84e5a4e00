"""EAGLE-style draft step: the draft model runs on the target's batch with
the speculative input attached."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

from examples.model_executor.forward_batch_info import ForwardBatch, ForwardMode


@dataclass
class EagleDraftInput:
    # Hidden states of the target's last verified token, one row per request
    hidden_states: Any
    # Tokens the target accepted in the previous verify step
    verified_id: List[int]
    topk: int = 1
    # Draft tokens proposed so far, filled step by step
    draft_token_ids: Optional[List[List[int]]] = None


class EagleDraftWorker:
    def __init__(self, draft_model_runner: Any, topk: int, num_steps: int) -> None:
        self.draft_model_runner = draft_model_runner
        self.topk = topk
        self.num_steps = num_steps

    def draft(self, forward_batch: ForwardBatch, hidden_states: Any, verified_id: List[int]) -> List[List[int]]:
        assert forward_batch.forward_mode == ForwardMode.DECODE
        # The draft forward reads its inputs from the batch, so the spec input
        # rides on the batch itself; TBO therefore sees a non-None spec_info.
        forward_batch.spec_info = EagleDraftInput(
            hidden_states=hidden_states,
            verified_id=verified_id,
            topk=self.topk,
        )
        proposals: List[List[int]] = [[] for _ in range(forward_batch.batch_size)]
        for _ in range(self.num_steps):
            logits = self.draft_model_runner.forward(forward_batch)
            for row, token in enumerate(logits.argmax(-1).tolist()):
                proposals[row].append(token)
        forward_batch.spec_info.draft_token_ids = proposals
        return proposals
