"""Pieces every pool shares: its geometry, MHA accessors, layer ids, row stores."""

from __future__ import annotations

from typing import Any, Tuple

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



class PoolGeometry:
    """The constructor arguments every pool takes, checked once."""

    def __init__(
        self,
        *,
        num_slots: int,
        page_size: int,
        layer_num: int,
        dtype: torch.dtype,
        device: "str | torch.device",
        strict: bool,
    ) -> None:
        if page_size < 1 or num_slots % page_size:
            raise ValueError(f"num_slots={num_slots} must be a positive multiple of page_size={page_size}")
        self.num_slots = num_slots
        self.page_size = page_size
        self.layer_num = layer_num
        self.dtype = dtype
        self.device = torch.device(device)
        self.strict = strict


class MHAAccessors:
    """SGLang's MHA pool accessors over per-layer ``k_buffer`` / ``v_buffer`` lists."""

    k_buffer: list[torch.Tensor]
    v_buffer: list[torch.Tensor]
    layer_num: int

    def get_key_buffer(self, layer: Any) -> torch.Tensor:
        return self.k_buffer[layer_index(layer, self.layer_num)]

    def get_value_buffer(self, layer: Any) -> torch.Tensor:
        return self.v_buffer[layer_index(layer, self.layer_num)]

    def get_kv_buffer(self, layer: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        index = layer_index(layer, self.layer_num)
        return self.k_buffer[index], self.v_buffer[index]
