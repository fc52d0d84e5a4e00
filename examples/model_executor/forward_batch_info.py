"""The per-forward batch handed from the scheduler to the model runner.

Importable without torch: tensors are only annotated here, and the two-batch
overlap builder (``batch_overlap/two_batch_overlap.py``) runs on plain lists.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional

if TYPE_CHECKING:
    import torch

    from examples.layers.attention.token_major_backend import TokenMajorAttnBackend
    from examples.speculative.eagle_draft import EagleDraftInput


class ForwardMode(enum.IntEnum):
    EXTEND = enum.auto()
    DECODE = enum.auto()
    MIXED = enum.auto()
    IDLE = enum.auto()
    TARGET_VERIFY = enum.auto()

    def is_extend(self) -> bool:
        return self in (ForwardMode.EXTEND, ForwardMode.MIXED)

    def is_decode(self) -> bool:
        return self == ForwardMode.DECODE

    def is_target_verify(self) -> bool:
        return self == ForwardMode.TARGET_VERIFY


@dataclass
class ForwardBatch:
    """Store all inputs of a forward pass."""

    # The forward mode
    forward_mode: ForwardMode
    # The batch size
    batch_size: int
    # The input ids, one per token
    input_ids: torch.Tensor
    # The indices of requests in the req_to_token_pool
    req_pool_indices: torch.Tensor
    # The sequence length of every request
    seq_lens: torch.Tensor
    # The indices of output tokens in the token_to_kv_pool
    out_cache_loc: torch.Tensor
    # The sum of all sequence lengths
    seq_lens_sum: int

    # Position ids, one per token
    positions: Optional[torch.Tensor] = None
    # CPU mirror of seq_lens, for the attention backends' metadata
    seq_lens_cpu: Optional[List[int]] = None
    # Extend-only: per-request new and cached token counts
    extend_seq_lens: Optional[torch.Tensor] = None
    extend_prefix_lens: Optional[torch.Tensor] = None

    # The same write ids in the virtual space when `out_cache_loc` holds
    # translated ones (None on a pool that indexes virtual ids).
    out_cache_loc_virtual: Optional[torch.Tensor] = None
    # Id space of `out_cache_loc`: "kernel" once a pool's write door may take
    # it, set by KVIndexTranslator.rebind_write_loc; capture-time batches
    # declare it. Not Optional: every batch carries a value.
    out_cache_loc_id_space: str = "virtual"

    # Encoder-decoder: where the encoder tokens' K/V go (never translated)
    encoder_lens: Optional[torch.Tensor] = None
    encoder_out_cache_loc: Optional[torch.Tensor] = None

    # Speculative decoding: the draft worker's per-step input
    spec_info: Optional[EagleDraftInput] = None

    # Tokens that are not padding (DP attention pads every rank to one length)
    num_token_non_padded: Optional[torch.Tensor] = None

    # For logprob
    return_logprob: bool = False
    # Two-batch overlap: where the parent is split, and the children
    tbo_split_seq_index: Optional[int] = None
    tbo_children: Optional[List[ForwardBatch]] = None

    # Pools and the attention backend this forward runs on
    req_to_token_pool: Any = None
    token_to_kv_pool: Any = None
    attn_backend: Optional[TokenMajorAttnBackend] = None
