"""Pieces every pool's write door shares: layer ids, shape checks, mark checks."""

from __future__ import annotations

from typing import Any

import torch

from runtime_shim.write_loc import KVWriteLoc, LocInfo, unwrap_write_loc


def layer_index(layer: Any, layer_num: int) -> int:
    """``layer`` as an index: an int, or anything with a ``layer_id``."""
    index = layer if isinstance(layer, int) else int(layer.layer_id)
    if not 0 <= index < layer_num:
        raise IndexError(f"layer {index} is outside this pool's {layer_num} layers")
    return index


def describe_loc(loc_info: Any) -> str:
    if isinstance(loc_info, KVWriteLoc):
        return f"KVWriteLoc(id_space={loc_info.id_space!r})"
    if isinstance(loc_info, torch.Tensor):
        return "a bare tensor"
    return type(loc_info).__name__


def target_loc(loc_info: LocInfo) -> torch.Tensor:
    """The physical ids to write: a pre-resolved ``full_loc`` wins over ``loc``."""
    loc, _swa_loc, full_loc = unwrap_write_loc(loc_info)
    return full_loc if full_loc is not None else loc


def store_rows(view: torch.Tensor, loc: torch.Tensor, rows: torch.Tensor, what: str) -> None:
    if tuple(rows.shape[1:]) != tuple(view.shape[1:]) or rows.shape[0] != loc.shape[0]:
        raise ValueError(
            f"{what}: expected {loc.shape[0]} rows of shape {tuple(view.shape[1:])}, "
            f"got {tuple(rows.shape)}"
        )
    view[loc] = rows.to(view.dtype)

