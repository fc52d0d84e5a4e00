"""Runs one forward: rebind the write loc, plan attention, run the model,
optionally split into two overlapped children."""

from __future__ import annotations

from typing import Any, Optional

from examples.batch_overlap.two_batch_overlap import split_batch
from examples.model_executor.forward_batch_info import ForwardBatch

_GLOBAL_MODEL_RUNNER: Optional["ModelRunner"] = None


def get_global_model_runner() -> "ModelRunner":
    assert _GLOBAL_MODEL_RUNNER is not None, "no model runner has been created"
    return _GLOBAL_MODEL_RUNNER


class ModelRunner:
    def __init__(
        self,
        model: Any,
        *,
        page_size: int,
        token_to_kv_pool: Any,
        req_to_token_pool: Any,
        kv_index_translator: Any,
        attn_backend: Any,
        enable_two_batch_overlap: bool = False,
    ) -> None:
        global _GLOBAL_MODEL_RUNNER
        self.model = model
        self.page_size = page_size
        self.token_to_kv_pool = token_to_kv_pool
        self.req_to_token_pool = req_to_token_pool
        self.kv_index_translator = kv_index_translator
        self.attn_backend = attn_backend
        self.enable_two_batch_overlap = enable_two_batch_overlap
        _GLOBAL_MODEL_RUNNER = self

    def forward(self, forward_batch: ForwardBatch) -> Any:
        # From here on out_cache_loc holds kernel ids and the batch says so
        # (out_cache_loc_id_space = "kernel"); every child must keep saying it.
        self.kv_index_translator.rebind_write_loc(forward_batch)
        if self.enable_two_batch_overlap and forward_batch.batch_size > 1:
            children = split_batch(forward_batch, (self.attn_backend, self.attn_backend))
            return [self._forward_one(child) for child in children]
        return self._forward_one(forward_batch)

    def _forward_one(self, forward_batch: ForwardBatch) -> Any:
        self.attn_backend.init_forward_metadata(forward_batch)
        return self.model.forward(forward_batch.input_ids, forward_batch.positions, forward_batch)
