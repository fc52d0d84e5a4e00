"""Run-time twin of kvlint's KV2xx rules, plus a log of unmarked writes.

`kv_layout_guard` is a `TorchFunctionMode`. It knows the storages of the
token-major pools created inside it (or registered with it) and, when code in
its scope calls one of the layout-sensitive ops on a tensor aliasing such a
storage, it raises `KVLayoutError` with the static rule's code:

* KV201: a ``.view`` / ``.reshape`` that splits the slot dim into pages. It
  would succeed, silently putting ``entry_elems`` (or, at page size 1, the
  row size) where a shape-derived kernel expects ``heads * dim``.
* KV202: ``.reshape`` / ``.contiguous`` / ``.flatten`` that would copy: the
  copy is packed, so the entry stride is gone and writes to it are lost
  (and ``.contiguous()`` on a sub-pool view copies the whole sub-pool).
* KV203: a ``.view`` that regroups heads into pseudo-pages; torch already
  raises for it on a strided view, the guard only names the rule.

Every other op is passed straight through after one set lookup, so the cost
outside flagged ops stays small (`bench/guard_overhead.py` measures it). The
shim's own helpers (`paged_view` and friends) and pool internals run in a
trusted scope and are never flagged. Write-door calls with an unmarked loc on
a non-strict pool are recorded in `unmarked_writes` instead of raised.

32-bit offsets: a kernel that multiplies a loaded index by the slot stride
computes in the index's width, and under token-major the slot stride is the
whole entry, so an int32 index overflows once the pool spans 2^31 elements
(32,768 slots of a 32-layer, 8-head, head-dim-128 entry) and reads or writes
out of bounds (an illegal memory access on CUDA) with no error from the
caller. The guard records every write-door call, and every call of a kernel
wrapped with `kv_layout_guard.kernel`, that passes an int32 index tensor
while a pool it watches and the call addresses spans 2^31 elements or more,
in `index_width_hazards` (`runtime_shim.parity.check_index_width` shows the
crash itself).
"""

from __future__ import annotations

import math
import sys
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch.overrides import TorchFunctionMode

from runtime_shim import _hooks
from runtime_shim._doors import describe_loc


class KVLayoutError(RuntimeError):
    """A layout-sensitive op on a token-major KV tensor; the message starts with the rule code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code} {message}")
        self.code = code


@dataclass(frozen=True)
class UnmarkedWrite:
    """One write-door call whose loc was not marked kernel-facing."""

    pool: str
    door: str
    layer_id: int
    loc: str
    where: str


@dataclass(frozen=True)
class IndexWidthHazard:
    """An int32 index tensor handed to code addressing a pool of >= 2^31 elements."""

    pool: str
    call: str
    index: str
    pool_elements: int
    where: str

    def __str__(self) -> str:
        return (
            f"{self.call}: {self.index} is int32 while the {self.pool} it addresses spans "
            f"{self.pool_elements} elements (>= 2^31): index * slot stride overflows 32-bit "
            f"offsets; pass int64 indices or widen them in the kernel (.to(tl.int64)) [{self.where}]"
        )


INT32_OFFSET_LIMIT = 2**31
_NARROW_INDEX_DTYPES = (torch.int32, torch.uint32) if hasattr(torch, "uint32") else (torch.int32,)


_VIEW_OPS = frozenset({torch.Tensor.view, torch.Tensor.reshape, torch.reshape})
_FLATTEN_OPS = frozenset({torch.Tensor.flatten, torch.flatten})
_WATCHED = _VIEW_OPS | _FLATTEN_OPS | {torch.Tensor.contiguous}


def _requested_shape(args: Sequence[Any], kwargs: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    """The shape a view/reshape call asks for, or None for ``view(dtype)``."""
    rest = args[1:]
    if not rest:
        rest = (kwargs.get("shape", kwargs.get("size")),)
    if len(rest) == 1 and isinstance(rest[0], (tuple, list, torch.Size)):
        rest = tuple(rest[0])
    if not rest or not all(isinstance(d, int) for d in rest):
        return None
    return tuple(rest)


def _resolve(shape: Tuple[int, ...], numel: int) -> Optional[Tuple[int, ...]]:
    if shape.count(-1) > 1:
        return None
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or numel % known:
            return None
        return tuple(numel // known if d == -1 else d for d in shape)
    return shape if math.prod(shape) == numel else None


def _splits_slot_dim(old: Tuple[int, ...], new: Tuple[int, ...]) -> bool:
    """``new`` cuts dim 0 of ``old`` into (pages, page_size) and keeps the row."""
    if len(old) < 2 or len(new) < 2:
        return False
    if new[0] * new[1] != old[0] or math.prod(new[2:]) != math.prod(old[1:]):
        return False
    return tuple(new[:2]) != tuple(old[:2]) or len(new) > len(old)


def _regroups_heads(tensor: torch.Tensor, args: Sequence[Any], kwargs: Dict[str, Any]) -> bool:
    """The view keeps the head dim's width but divides or multiplies the head count."""
    requested = _requested_shape(args, kwargs)
    new = _resolve(requested, tensor.numel()) if requested is not None else None
    old = tuple(tensor.shape)
    if new is None or len(new) < 2 or len(old) < 2:
        return False
    return new[-1] == old[-1] and new[-2] != old[-2]


def _flatten_shape(shape: Tuple[int, ...], args: Sequence[Any], kwargs: Dict[str, Any]) -> Tuple[int, ...]:
    start = args[1] if len(args) > 1 else kwargs.get("start_dim", 0)
    end = args[2] if len(args) > 2 else kwargs.get("end_dim", -1)
    if not shape:
        return (1,)
    start, end = start % len(shape), end % len(shape)
    return (*shape[:start], math.prod(shape[start : end + 1]), *shape[end + 1 :])


def _can_view(tensor: torch.Tensor, shape: Tuple[int, ...]) -> bool:
    try:
        tensor.view(shape)
    except RuntimeError:
        return False
    return True


def _caller() -> str:
    # Skip this module, the hooks and the pool's own frames to name user code.
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("runtime_shim."):
        frame = frame.f_back
    if frame is None:
        return "<unknown>"
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class kv_layout_guard(TorchFunctionMode):
    """Raise `KVLayoutError` on layout-sensitive ops over token-major pool storage.

    Use as ``with kv_layout_guard() as guard:``; pools created inside are
    known automatically, others can be added with `register`.
    """

    def __init__(self, *pools_or_tensors: Any) -> None:
        super().__init__()
        self._storages: Dict[int, "weakref.ReferenceType[torch.Tensor]"] = {}
        self._pool_names: Dict[int, str] = {}
        self.unmarked_writes: List[UnmarkedWrite] = []
        self.index_width_hazards: List[IndexWidthHazard] = []
        for item in pools_or_tensors:
            self.register(item)

    def register(self, pool_or_tensor: Any) -> None:
        """Watch a token-major pool's raw buffer, or any tensor's storage."""
        raw = pool_or_tensor if isinstance(pool_or_tensor, torch.Tensor) else getattr(
            pool_or_tensor, "raw", None
        )
        if not isinstance(raw, torch.Tensor):
            raise TypeError(
                f"cannot watch a {type(pool_or_tensor).__name__}: expected a tensor or a "
                f"token-major pool with a raw byte buffer"
            )
        key = raw.untyped_storage().data_ptr()
        self._storages[key] = weakref.ref(raw)
        self._pool_names[key] = type(pool_or_tensor).__name__

    def on_pool_created(self, pool: Any) -> None:
        self.register(pool)

    def on_unmarked_write(self, pool: Any, door: str, layer_id: int, loc_info: Any) -> None:
        if self._watches(pool.raw):
            self.unmarked_writes.append(
                UnmarkedWrite(type(pool).__name__, door, layer_id, describe_loc(loc_info), _caller())
            )

    def on_write_index(self, pool: Any, door: str, layer_id: int, loc: Any) -> None:
        if not isinstance(loc, torch.Tensor) or loc.dtype not in _NARROW_INDEX_DTYPES:
            return
        if not self._watches(pool.raw):
            return
        elements = pool.raw.numel() // pool.dtype.itemsize
        if elements >= INT32_OFFSET_LIMIT:
            self.index_width_hazards.append(
                IndexWidthHazard(type(pool).__name__, f"{type(pool).__name__}.{door} (layer {layer_id})",
                                 "the write loc", elements, _caller())
            )

    def check_kernel_call(self, name: str, args: Sequence[Any], kwargs: Dict[str, Any]) -> None:
        """Record a hazard if ``args``/``kwargs`` hold an int32 tensor and a view
        of a watched pool whose storage spans 2^31 elements of the view's dtype."""
        values = list(args) + list(kwargs.values())
        labels = [f"argument {i}" for i in range(len(args))] + [f"{k}=" for k in kwargs]
        narrow = [
            label for label, value in zip(labels, values)
            if isinstance(value, torch.Tensor) and value.dtype in _NARROW_INDEX_DTYPES
        ]
        if not narrow:
            return
        for value in values:
            if not isinstance(value, torch.Tensor) or not self._watches(value):
                continue
            elements = value.untyped_storage().nbytes() // value.element_size()
            if elements >= INT32_OFFSET_LIMIT:
                key = value.untyped_storage().data_ptr()
                self.index_width_hazards.append(
                    IndexWidthHazard(self._pool_names.get(key, "pool"), name, ", ".join(narrow), elements, _caller())
                )
                return

    def kernel(self, fn: Callable[..., Any], name: Optional[str] = None) -> Callable[..., Any]:
        """``fn`` with its calls checked for int32 indices into a pool of >= 2^31 elements."""
        label = name or getattr(fn, "__name__", repr(fn))

        def checked(*args: Any, **kwargs: Any) -> Any:
            self.check_kernel_call(label, args, kwargs)
            return fn(*args, **kwargs)

        checked.__name__ = label
        checked.__wrapped__ = fn  # type: ignore[attr-defined]
        return checked

    def _watches(self, tensor: torch.Tensor) -> bool:
        try:
            ref = self._storages.get(tensor.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):
            return False
        # A freed pool's address may be reused by an unrelated allocation.
        return ref is not None and ref() is not None

    def __enter__(self) -> "kv_layout_guard":
        super().__enter__()
        _hooks.STATE.active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _hooks.STATE.active.remove(self)
        super().__exit__(*exc)

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: Sequence[Any] = (),
        kwargs: Optional[Dict[str, Any]] = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func not in _WATCHED or _hooks.STATE.trusted_depth:
            return func(*args, **kwargs)
        tensor = args[0] if args else None
        if not isinstance(tensor, torch.Tensor) or not self._watches(tensor):
            return func(*args, **kwargs)
        self._check(func, tensor, args, kwargs)
        try:
            return func(*args, **kwargs)
        except RuntimeError as err:
            if func is torch.Tensor.view and _regroups_heads(tensor, args, kwargs):
                raise KVLayoutError(
                    "KV203",
                    f"head-regroup-view: .view() to shape {_requested_shape(args, kwargs)} on a "
                    f"token-major KV tensor of shape {tuple(tensor.shape)} stride "
                    f"{tensor.stride()} cannot fold heads into pages across the entry "
                    f"stride; exclude it explicitly (assert x.is_contiguous())",
                ) from err
            raise

    def _check(
        self, func: Callable[..., Any], tensor: torch.Tensor, args: Sequence[Any], kwargs: Dict[str, Any]
    ) -> None:
        old = tuple(tensor.shape)
        where = f"shape {old} stride {tensor.stride()}"
        if func is torch.Tensor.contiguous:
            if not tensor.is_contiguous():
                raise KVLayoutError(
                    "KV202",
                    f"kv-layout-copy: .contiguous() on a token-major KV tensor ({where}) "
                    f"copies it and drops the entry stride",
                )
            return
        if func in _FLATTEN_OPS:
            new = _flatten_shape(old, args, kwargs)
        else:
            requested = _requested_shape(args, kwargs)
            new = _resolve(requested, tensor.numel()) if requested is not None else None
            if new is None:
                return
        name = getattr(func, "__name__", str(func))
        if _splits_slot_dim(old, new):
            raise KVLayoutError(
                "KV201",
                f"stride-silent-view: .{name}() to shape {new} splits the slot dim of a "
                f"token-major KV tensor ({where}) into pages; the in-page stride "
                f"is not heads*dim. Use paged_view / paged_kv_view / paged_row_view",
            )
        if func is not torch.Tensor.view and not _can_view(tensor, new):
            raise KVLayoutError(
                "KV202",
                f"kv-layout-copy: .{name}() to shape {new} on a token-major KV tensor ({where}) "
                f"packs a copy and drops the entry stride",
            )
