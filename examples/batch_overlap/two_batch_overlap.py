"""Two-batch overlap (TBO): split one forward into two children so that one
child's communication overlaps the other's compute.

Runs in pure Python: the builder only slices, so lists stand in for tensors.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence, Tuple

from examples.model_executor.forward_batch_info import ForwardBatch, ForwardMode


def compute_split_seq_index(forward_mode: ForwardMode, num_tokens: int, extend_seq_lens: Optional[Sequence[int]]) -> int:
    if forward_mode.is_extend():
        assert extend_seq_lens is not None
        # Balance tokens, not requests: the split lands where the running sum
        # first reaches half the tokens.
        half, running = num_tokens // 2, 0
        for index, n in enumerate(extend_seq_lens):
            running += n
            if running >= half:
                return index + 1
        return len(extend_seq_lens)
    return (num_tokens + 1) // 2


def compute_split_token_index(batch: ForwardBatch, split_seq_index: int) -> int:
    if batch.forward_mode.is_extend():
        return sum(batch.extend_seq_lens[:split_seq_index])
    return split_seq_index


def filter_batch(
    batch: ForwardBatch,
    *,
    start_token_index: int,
    end_token_index: int,
    start_seq_index: int,
    end_seq_index: int,
    output_attn_backend: Any,
    out_num_token_non_padded: Any,
) -> ForwardBatch:
    """One TBO child: the parent's tokens [start_token_index, end_token_index)
    and requests [start_seq_index, end_seq_index)."""
    assert end_token_index >= start_token_index, f"{end_token_index=}, {start_token_index=}"
    num_tokens = len(batch.input_ids)
    num_seqs = batch.batch_size

    output_dict = dict()

    for key in [
        "input_ids",
        "positions",
        "out_cache_loc",
    ]:
        old_value = getattr(batch, key)
        assert len(old_value) == num_tokens, f"{key=} {num_tokens=}"
        output_dict[key] = old_value[start_token_index:end_token_index]

    if batch.out_cache_loc_virtual is not None:
        output_dict["out_cache_loc_virtual"] = batch.out_cache_loc_virtual[start_token_index:end_token_index]

    for key in [
        "req_pool_indices",
        "seq_lens",
        "seq_lens_cpu",
        "extend_seq_lens",
        "extend_prefix_lens",
    ]:
        old_value = getattr(batch, key)
        if old_value is None:
            continue
        assert len(old_value) == num_seqs, f"{key=} {num_seqs=}"
        output_dict[key] = old_value[start_seq_index:end_seq_index]

    output_dict["forward_mode"] = batch.forward_mode
    output_dict["return_logprob"] = batch.return_logprob
    output_dict["req_to_token_pool"] = batch.req_to_token_pool
    output_dict["token_to_kv_pool"] = batch.token_to_kv_pool

    output_dict.update(
        dict(
            batch_size=end_seq_index - start_seq_index,
            seq_lens_sum=sum(output_dict["seq_lens_cpu"]) if "seq_lens_cpu" in output_dict else None,
            num_token_non_padded=out_num_token_non_padded,
            attn_backend=output_attn_backend,
            tbo_split_seq_index=None,
            tbo_children=None,
        )
    )

    # The ratchet: a parent field with a value that the child would silently
    # drop is an error here, not a wrong child later.
    for field in dataclasses.fields(ForwardBatch):
        if getattr(batch, field.name) is not None and field.name not in output_dict:
            raise ValueError(f"Field {field.name} has value, but is not yet supported (value={getattr(batch, field.name)!r})")

    return ForwardBatch(**output_dict)


def split_batch(
    batch: ForwardBatch,
    attn_backends: Tuple[Any, Any] = (None, None),
) -> Tuple[ForwardBatch, ForwardBatch]:
    """Split ``batch`` into its two TBO children and record them on it."""
    num_tokens = len(batch.input_ids)
    split_seq_index = compute_split_seq_index(batch.forward_mode, num_tokens, batch.extend_seq_lens)
    split_token_index = compute_split_token_index(batch, split_seq_index)
    non_padded = num_tokens if batch.num_token_non_padded is None else batch.num_token_non_padded
    child_a = filter_batch(
        batch,
        start_token_index=0,
        end_token_index=split_token_index,
        start_seq_index=0,
        end_seq_index=split_seq_index,
        output_attn_backend=attn_backends[0],
        out_num_token_non_padded=min(split_token_index, non_padded),
    )
    child_b = filter_batch(
        batch,
        start_token_index=split_token_index,
        end_token_index=num_tokens,
        start_seq_index=split_seq_index,
        end_seq_index=batch.batch_size,
        output_attn_backend=attn_backends[1],
        out_num_token_non_padded=max(0, non_padded - split_token_index),
    )
    batch.tbo_split_seq_index = split_seq_index
    batch.tbo_children = [child_a, child_b]
    return child_a, child_b
