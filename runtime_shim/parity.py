"""Stride parity: does a kernel give the same answer on a token-major pool?

Point `check_stride_parity` at a callable that runs your kernel on one layer
of a KV cache. The harness fills identical random contents into a contiguous
per-layer cache (`ContiguousMHAPool` / `ContiguousMLAPool`) and into a
token-major pool (`TokenMajorMHAPool` / `TokenMajorMLAPool`, whose per-layer
views have the whole entry as slot stride), runs the callable on both and
requires ``torch.equal`` (no tolerance: a tolerance hides exactly the
misread this looks for). Then it runs a **negative control**: the same
callable on the stride-naive reinterpretation of the pool (each view's
storage re-read with the row-major strides of its shape, what a kernel that
derives strides from the shape sees). That must differ; if it does not, the
kernel never read the cache and the check proved nothing, so the harness
says so instead of passing.

The callable gets a `ParityRun`: the layer's flat views ``k`` and ``v``
(``[num_slots, heads, dim]``; for MLA ``k`` is the ``[num_slots, 1,
latent + rope]`` row and ``v`` its latent prefix), ``page_size``, a batch
of sequences in both index forms upstream kernels take (``kv_indptr`` /
``kv_indices`` token ids, and ``page_table`` / ``seq_lens``), and
``randn`` for deterministic extra inputs (queries). It returns a tensor or a
tuple of tensors. A kernel that writes the cache is compared too: after the
call the harness compares every layer of the two pools byte for byte, and
the negative control counts as differing if the pool it wrote differs.

`check_index_width` is the large-pool case: a token-major pool spanning more
than 2^31 elements, the kernel run once with int64 and once with int32
``kv_indices`` / ``page_table`` in a child process, so a crash is a verdict,
not a dead test run. A kernel that multiplies a loaded int32 index by the
slot stride without widening it wraps at 2^31 elements: below 2^32 the
offset turns negative and the read faults (an illegal memory access on
CUDA, a segfault under the Triton interpreter); past 2^32 it wraps to a
small positive offset and silently reads another slot's rows (verdict
``differs``). Both were seen with upstream's decode kernel on an H200. On CPU it uses the smallest pool that crosses the limit,
allocated with ``torch.empty`` so only the touched rows become resident.
The kernel is named as ``"module:attribute"`` so the child can import it.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from runtime_shim import _hooks
from runtime_shim.contiguous import ContiguousMHAPool, ContiguousMLAPool
from runtime_shim.layout import DensePart, build_dense_views, contiguous_strides, dense_part_views, mha_entry_layout, mla_entry_layout
from runtime_shim.paged import paged_view
from runtime_shim.pool import TokenMajorMHAPool, TokenMajorMLAPool
from runtime_shim.write_loc import KVWriteLoc

__all__ = [
    "INT32_LIMIT",
    "IndexWidthVerdict",
    "MHAGeometry",
    "MLAGeometry",
    "ParityError",
    "ParityPools",
    "ParityReport",
    "ParityRun",
    "build_pools",
    "check_index_width",
    "check_stride_parity",
    "overflow_slot",
]

# Element offsets at or past this overflow a signed 32-bit product.
INT32_LIMIT = 2**31


@dataclass(frozen=True)
class MHAGeometry:
    """K and V rows per layer; ``k_dim != v_dim`` gives K/V of different widths."""

    layer_num: int
    k_heads: int
    k_dim: int
    v_heads: int
    v_dim: int

    def entry_elements(self, dtype: torch.dtype) -> int:
        layout = mha_entry_layout(self.layer_num, self.k_heads, self.k_dim, self.v_heads, self.v_dim, dtype)
        return layout.entry_bytes // dtype.itemsize


@dataclass(frozen=True)
class MLAGeometry:
    """One latent + rope row per token and layer (single head)."""

    layer_num: int
    latent_dim: int
    rope_dim: int

    def entry_elements(self, dtype: torch.dtype) -> int:
        layout = mla_entry_layout(self.layer_num, self.latent_dim, self.rope_dim, dtype)
        return layout.entry_bytes // dtype.itemsize


Geometry = Union[MHAGeometry, MLAGeometry]


class ParityError(AssertionError):
    """The kernel differs between layouts, or the check could not fail."""


@dataclass
class ParityRun:
    """What the kernel callable receives: one layer of one cache, and inputs."""

    layout: str  # "contiguous", "token_major" or "stride_naive"
    geometry: Geometry
    k: torch.Tensor
    v: torch.Tensor
    page_size: int
    num_slots: int
    dtype: torch.dtype
    device: torch.device
    kv_indptr: torch.Tensor  # [batch + 1] int32
    kv_indices: torch.Tensor  # [sum(seq_lens)] token ids, index_dtype
    page_table: torch.Tensor  # [batch, max_pages] page ids, index_dtype
    seq_lens: torch.Tensor  # [batch] int32
    seed: int = 0

    @property
    def batch(self) -> int:
        return int(self.seq_lens.shape[0])

    def paged(self, flat: torch.Tensor) -> torch.Tensor:
        """``flat`` as ``[pages, page_size, ...]`` with its own slot stride."""
        return paged_view(flat, self.page_size)

    def randn(self, *shape: int, salt: int = 0, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        """The same random tensor in every run of one check (queries, new K/V)."""
        gen = torch.Generator().manual_seed(self.seed * 1000003 + salt)
        return torch.randn(shape, generator=gen).to(dtype or self.dtype).to(self.device)


@dataclass
class ParityReport:
    geometry: Geometry
    page_size: int
    dtype: torch.dtype
    layer: int
    entry_elements: int
    control_max_abs_diff: float
    control_pool_changed: bool

    def __str__(self) -> str:
        return (
            f"{self.geometry} page_size={self.page_size} {str(self.dtype).removeprefix('torch.')} "
            f"layer {self.layer}: token-major == contiguous (torch.equal); stride-naive control "
            f"differs (max |diff| {self.control_max_abs_diff:.3g}"
            f"{', pool bytes differ' if self.control_pool_changed else ''})"
        )


Kernel = Callable[[ParityRun], Union[torch.Tensor, Sequence[torch.Tensor]]]


def _marked(loc: torch.Tensor) -> KVWriteLoc:
    return KVWriteLoc.for_batch(SimpleNamespace(out_cache_loc=loc, out_cache_loc_id_space="kernel"))


def _random_rows(gen: torch.Generator, shape: Tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(-100, 100, shape, generator=gen).to(dtype)


def _pools(geometry: Geometry, num_slots: int, page_size: int, dtype: torch.dtype, device: torch.device):
    common = dict(num_slots=num_slots, page_size=page_size, layer_num=geometry.layer_num, dtype=dtype, device=device)
    if isinstance(geometry, MHAGeometry):
        dims = dict(k_heads=geometry.k_heads, k_dim=geometry.k_dim, v_heads=geometry.v_heads, v_dim=geometry.v_dim)
        return ContiguousMHAPool(**common, **dims), TokenMajorMHAPool(**common, **dims, strict=True)
    dims = dict(latent_dim=geometry.latent_dim, rope_dim=geometry.rope_dim)
    return ContiguousMLAPool(**common, **dims), TokenMajorMLAPool(**common, **dims, strict=True)


def _fill(pools: Sequence[Any], geometry: Geometry, num_slots: int, dtype: torch.dtype, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    device = pools[0].device
    loc = _marked(torch.arange(num_slots, device=device))
    for layer in range(geometry.layer_num):
        if isinstance(geometry, MHAGeometry):
            k = _random_rows(gen, (num_slots, geometry.k_heads, geometry.k_dim), dtype).to(device)
            v = _random_rows(gen, (num_slots, geometry.v_heads, geometry.v_dim), dtype).to(device)
            for pool in pools:
                pool.set_kv_buffer(layer, loc, k, v)
        else:
            latent = _random_rows(gen, (num_slots, 1, geometry.latent_dim), dtype).to(device)
            rope = _random_rows(gen, (num_slots, 1, geometry.rope_dim), dtype).to(device)
            for pool in pools:
                pool.set_mla_kv_buffer(layer, loc, latent, rope)


def _layer_views(pool: Any, geometry: Geometry, layer: int) -> Tuple[torch.Tensor, torch.Tensor]:
    if isinstance(geometry, MHAGeometry):
        return pool.get_kv_buffer(layer)
    return pool.get_key_buffer(layer), pool.get_value_buffer(layer)


def _stride_naive(view: torch.Tensor) -> torch.Tensor:
    """The view's storage read with the row-major strides of its shape."""
    with _hooks.trusted():
        return view.as_strided(tuple(view.shape), contiguous_strides(tuple(view.shape)), view.storage_offset())


def _sequences(
    num_slots: int, page_size: int, batch: int, max_len: int, index_dtype: torch.dtype,
    device: torch.device, seed: int, first_page: int = 0,
) -> Dict[str, torch.Tensor]:
    """Whole pages per sequence, in shuffled page order from ``first_page`` on."""
    gen = torch.Generator().manual_seed(seed + 7)
    lens = torch.randint(1, max_len + 1, (batch,), generator=gen)
    lens[0] = max_len
    pages_per_seq = [-(-int(n) // page_size) for n in lens]
    num_pages = num_slots // page_size - first_page
    if sum(pages_per_seq) > num_pages:
        raise ValueError(
            f"{batch} sequences of up to {max_len} tokens need {sum(pages_per_seq)} pages of "
            f"{page_size}; the pool has {num_pages}"
        )
    order = torch.randperm(num_pages, generator=gen) + first_page
    table = torch.zeros((batch, max(pages_per_seq)), dtype=torch.int64)
    indices: List[torch.Tensor] = []
    cursor = 0
    for b, (n, p) in enumerate(zip(lens.tolist(), pages_per_seq)):
        pages = order[cursor : cursor + p]
        cursor += p
        table[b, :p] = pages
        # A page whose first slot is unused exists in real pools too (slot 0 of
        # page 0 is reserved); the token ids walk the pages in table order.
        tokens = (pages[:, None] * page_size + torch.arange(page_size)).flatten()[:n]
        indices.append(tokens)
    indptr = torch.zeros(batch + 1, dtype=torch.int32)
    indptr[1:] = lens.cumsum(0).to(torch.int32)
    return dict(
        kv_indptr=indptr.to(device),
        kv_indices=torch.cat(indices).to(index_dtype).to(device),
        page_table=table.to(index_dtype).to(device),
        seq_lens=lens.to(torch.int32).to(device),
    )


def _as_tuple(result: Any) -> Tuple[torch.Tensor, ...]:
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in result):
        return tuple(result)
    raise TypeError(f"the kernel callable must return a tensor or a tuple of tensors, got {type(result).__name__}")


def _pool_layers(pool: Any, geometry: Geometry) -> List[torch.Tensor]:
    return [t for layer in range(geometry.layer_num) for t in _layer_views(pool, geometry, layer)]


def _max_abs_diff(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return math.inf
        d = (x.double() - y.double()).abs()
        d = torch.where(torch.isnan(d), torch.full_like(d, math.inf), d)
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
    return worst


@dataclass
class ParityPools:
    """The two filled pools of one check and the sequences over them."""

    geometry: Geometry
    contiguous: Any
    token_major: Any
    page_size: int
    num_slots: int
    dtype: torch.dtype
    device: torch.device
    sequences: Dict[str, torch.Tensor]
    seed: int

    def run(self, layout: str, layer: int) -> ParityRun:
        """The `ParityRun` for ``layout`` ("contiguous", "token_major" or
        "stride_naive", the negative control over the token-major pool)."""
        if layout == "contiguous":
            k, v = _layer_views(self.contiguous, self.geometry, layer)
        else:
            k, v = _layer_views(self.token_major, self.geometry, layer)
            if layout == "stride_naive":
                if isinstance(self.geometry, MLAGeometry):
                    k = _stride_naive(k)
                    v = k[..., : self.geometry.latent_dim]
                else:
                    k, v = _stride_naive(k), _stride_naive(v)
            elif layout != "token_major":
                raise ValueError(f"unknown layout {layout!r}")
        return ParityRun(layout, self.geometry, k, v, self.page_size, self.num_slots, self.dtype,
                         self.device, seed=self.seed, **self.sequences)


def build_pools(
    geometry: Geometry,
    *,
    page_size: int,
    dtype: torch.dtype,
    device: "str | torch.device" = "cpu",
    batch: int = 2,
    max_len: int = 40,
    num_slots: Optional[int] = None,
    index_dtype: torch.dtype = torch.int64,
    seed: int = 0,
) -> ParityPools:
    """A contiguous and a token-major pool with identical random contents in
    every slot of every layer, and ``batch`` sequences of up to ``max_len``
    tokens over whole, shuffled pages."""
    device = torch.device(device)
    if num_slots is None:
        pages = batch * -(-max_len // page_size) + 2
        num_slots = pages * page_size
    contiguous, token_major = _pools(geometry, num_slots, page_size, dtype, device)
    _fill([contiguous, token_major], geometry, num_slots, dtype, seed)
    seqs = _sequences(num_slots, page_size, batch, max_len, index_dtype, device, seed)
    return ParityPools(geometry, contiguous, token_major, page_size, num_slots, dtype, device, seqs, seed)


def check_stride_parity(
    kernel: Kernel,
    geometry: Geometry,
    *,
    page_size: int,
    dtype: torch.dtype,
    device: "str | torch.device" = "cpu",
    batch: int = 2,
    max_len: int = 40,
    num_slots: Optional[int] = None,
    layer: Optional[int] = None,
    index_dtype: torch.dtype = torch.int64,
    seed: int = 0,
) -> ParityReport:
    """Run ``kernel`` on a contiguous cache and a token-major pool of identical
    contents; raise `ParityError` unless the results are ``torch.equal`` and
    the stride-naive control differs. Returns what was checked.

    ``layer`` defaults to the middle one; ``index_dtype`` is the dtype of
    ``kv_indices`` and ``page_table``."""
    pools = build_pools(
        geometry, page_size=page_size, dtype=dtype, device=device, batch=batch, max_len=max_len,
        num_slots=num_slots, index_dtype=index_dtype, seed=seed,
    )
    layer = geometry.layer_num // 2 if layer is None else layer
    contiguous, token_major = pools.contiguous, pools.token_major

    def run(layout: str) -> Tuple[torch.Tensor, ...]:
        return tuple(t.detach().clone() for t in _as_tuple(kernel(pools.run(layout, layer))))

    ref = run("contiguous")
    out = run("token_major")
    where = f"{geometry} page_size={page_size} {dtype} layer {layer}"
    if len(out) != len(ref):
        raise ParityError(f"{where}: the kernel returned {len(out)} tensors on the token-major pool, {len(ref)} on the contiguous cache")
    for i, (a, b) in enumerate(zip(out, ref)):
        if not torch.equal(a, b):
            raise ParityError(
                f"{where}: output {i} differs between the token-major pool and the contiguous "
                f"cache (max |diff| {_max_abs_diff([a], [b]):.3g}); the kernel does not honour "
                f"the slot stride ({token_major.entry_bytes // dtype.itemsize} elements here)"
            )
    ref_pool, tm_pool = _pool_layers(contiguous, geometry), _pool_layers(token_major, geometry)
    for i, (a, b) in enumerate(zip(tm_pool, ref_pool)):
        if not torch.equal(a, b):
            raise ParityError(f"{where}: after the kernel, pool view {i} (layer {i // 2}) differs between the layouts")

    control = run("stride_naive")
    control_diff = _max_abs_diff(control, ref) if len(control) == len(ref) else math.inf
    outputs_equal = len(control) == len(ref) and all(torch.equal(a, b) for a, b in zip(control, ref))
    pool_changed = not all(torch.equal(a, b) for a, b in zip(_pool_layers(token_major, geometry), ref_pool))
    if outputs_equal and not pool_changed:
        raise ParityError(
            f"{where}: negative control failed: the kernel gave the same result on the stride-naive "
            f"reinterpretation of the pool, so it did not read the cache through the views it was "
            f"given and this check cannot fail for it"
        )
    return ParityReport(geometry, page_size, dtype, layer, token_major.entry_bytes // dtype.itemsize, control_diff, pool_changed)


# ---------------------------------------------------------------- large pool


def overflow_slot(entry_elements: int) -> int:
    """The first slot whose row offset (slot * entry elements) needs 32 bits or more."""
    return -(-INT32_LIMIT // entry_elements)


@dataclass(frozen=True)
class IndexWidthVerdict:
    index_dtype: str
    status: str  # "equal", "differs", "crashed", "timeout"
    slots: int
    elements: int
    entry_elements: int
    detail: str

    @property
    def ok(self) -> bool:
        return self.status == "equal"

    def __str__(self) -> str:
        head = f"{self.index_dtype} indices over a pool of {self.slots} slots ({self.elements} elements): {self.status}"
        if self.ok:
            return head
        return (
            f"{head}; offsets overflow 32 bits at {overflow_slot(self.entry_elements)} slots "
            f"(slot stride {self.entry_elements} elements){': ' + self.detail if self.detail else ''}"
        )


def _large_geometry_pool(geometry: Geometry, dtype: torch.dtype, num_slots: int, device: torch.device):
    """Per-layer views of the last layer over an uninitialised raw buffer."""
    if isinstance(geometry, MHAGeometry):
        layout = mha_entry_layout(geometry.layer_num, geometry.k_heads, geometry.k_dim, geometry.v_heads, geometry.v_dim, dtype)
    else:
        layout = mla_entry_layout(geometry.layer_num, geometry.latent_dim, geometry.rope_dim, dtype)
    raw = torch.empty(num_slots * layout.entry_bytes, dtype=torch.uint8, device=device)
    last = geometry.layer_num - 1
    with _hooks.trusted():
        if isinstance(geometry, MHAGeometry):
            k = build_dense_views(raw, layout=layout, part_name="k", num_slots=num_slots)[last]
            v = build_dense_views(raw, layout=layout, part_name="v", num_slots=num_slots)[last]
        else:
            latent = layout.part("latent")
            row = DensePart("kv", geometry.layer_num, (1, geometry.latent_dim + geometry.rope_dim), dtype,
                            latent.offset_bytes, latent.layer_stride_bytes)
            k = dense_part_views(raw, row, entry_bytes=layout.entry_bytes, num_slots=num_slots)[last]
            v = k[..., : geometry.latent_dim]
    return raw, layout, k, v


def _child_main(spec: Dict[str, Any]) -> None:
    """In the child: build the large pool once, then run each index dtype,
    printing one JSON line per finished run (a crash ends the output)."""
    import importlib

    module_name, _, attr = spec["kernel"].partition(":")
    kernel = getattr(importlib.import_module(module_name), attr)
    geometry = (MHAGeometry if spec["geometry"]["kind"] == "mha" else MLAGeometry)(**spec["geometry"]["dims"])
    dtype = getattr(torch, spec["dtype"])
    device = torch.device(spec["device"])
    page_size, num_slots, tokens = spec["page_size"], spec["num_slots"], spec["tokens"]
    raw, layout, k, v = _large_geometry_pool(geometry, dtype, num_slots, device)
    entry = layout.entry_bytes // dtype.itemsize
    # The touched slots: the last whole pages, all past the 32-bit limit.
    first_page = num_slots // page_size - (-(-tokens // page_size))
    base = first_page * page_size
    n = num_slots - base
    gen = torch.Generator().manual_seed(spec["seed"])
    rows_k = _random_rows(gen, (n, *k.shape[1:]), dtype).to(device)
    with _hooks.trusted():
        k[base:] = rows_k
        if isinstance(geometry, MHAGeometry):
            rows_v = _random_rows(gen, (n, *v.shape[1:]), dtype).to(device)
            v[base:] = rows_v
            k_small, v_small = rows_k.clone(), rows_v.clone()
        else:
            k_small = rows_k.clone()
            v_small = k_small[..., : geometry.latent_dim]
    for index_name in spec["index_dtypes"]:
        index_dtype = getattr(torch, index_name)
        seqs_big = _sequences(num_slots, page_size, 1, tokens, index_dtype, device, spec["seed"], first_page=first_page)
        seqs_small = dict(seqs_big)
        seqs_small["kv_indices"] = (seqs_big["kv_indices"].long() - base).to(torch.int64)
        seqs_small["page_table"] = (seqs_big["page_table"].long() - first_page).to(torch.int64)
        small = ParityRun("contiguous", geometry, k_small, v_small, page_size, n, dtype, device, seed=spec["seed"], **seqs_small)
        big = ParityRun("token_major", geometry, k, v, page_size, num_slots, dtype, device, seed=spec["seed"], **seqs_big)
        ref = _as_tuple(kernel(small))
        out = _as_tuple(kernel(big))
        if device.type == "cuda":
            torch.cuda.synchronize()
        equal = len(out) == len(ref) and all(torch.equal(a, b) for a, b in zip(out, ref))
        detail = "" if equal else f"max |diff| {_max_abs_diff(out, ref):.3g}"
        print(json.dumps(dict(index_dtype=index_name, status="equal" if equal else "differs",
                              entry_elements=entry, detail=detail)), flush=True)


def check_index_width(
    kernel: str,
    geometry: Geometry,
    *,
    page_size: int,
    dtype: torch.dtype,
    device: "str | torch.device" = "cpu",
    index_dtypes: Sequence[torch.dtype] = (torch.int64, torch.int32),
    num_slots: Optional[int] = None,
    tokens: int = 48,
    seed: int = 0,
    timeout: float = 300.0,
) -> List[IndexWidthVerdict]:
    """The large-pool case: one verdict per index dtype, from a child process.

    ``kernel`` is ``"module:attribute"``, importable in the child (the parent's
    ``sys.path`` is passed on). The pool spans ``num_slots`` slots, by default
    the smallest page-aligned count whose elements exceed 2^31 with room for
    ``tokens`` slots past the limit; one sequence of ``tokens`` tokens lives
    in its last pages. Each run is compared with ``torch.equal`` against the
    same kernel over a small contiguous cache holding the same rows. The
    runs go in ``index_dtypes`` order; once one crashes, it and every later
    one get the verdict ``crashed`` (run the int32 case last).
    Under the interpreter (no CUDA) the child inherits ``TRITON_INTERPRET=1``.
    """
    device = torch.device(device)
    entry = geometry.entry_elements(dtype)
    if num_slots is None:
        needed = overflow_slot(entry) + tokens
        num_slots = -(-needed // page_size) * page_size
    elements = num_slots * entry
    if elements <= INT32_LIMIT or (num_slots - tokens) * entry < INT32_LIMIT - entry:
        raise ValueError(f"{num_slots} slots of {entry} elements do not put {tokens} tokens past 2^31 elements")
    dims = {name: getattr(geometry, name) for name in geometry.__dataclass_fields__}
    spec = dict(
        kernel=kernel, geometry=dict(kind="mha" if isinstance(geometry, MHAGeometry) else "mla", dims=dims),
        dtype=str(dtype).removeprefix("torch."), device=str(device), page_size=page_size,
        num_slots=num_slots, tokens=tokens, seed=seed,
        index_dtypes=[str(d).removeprefix("torch.") for d in index_dtypes],
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    if device.type != "cuda":
        env["TRITON_INTERPRET"] = "1"
    names = spec["index_dtypes"]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "runtime_shim._parity_child", json.dumps(spec)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
        timed_out = False
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr, rc, timed_out = "", None, True
    results = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    verdicts = [
        IndexWidthVerdict(r["index_dtype"], r["status"], num_slots, elements, entry, r["detail"]) for r in results
    ]
    if len(verdicts) < len(names):
        if timed_out:
            status, why = "timeout", f"no answer within {timeout:.0f} s"
        else:
            status = "crashed"
            if rc is not None and rc < 0:
                try:
                    note = f"killed by {signal.Signals(-rc).name}"
                except ValueError:
                    note = f"killed by signal {-rc}"
            else:
                note = f"exit status {rc}"
            lines = [line.strip() for line in stderr.splitlines()]
            # The exception line ("torch.AcceleratorError: CUDA error: an illegal
            # memory access ..."), else any line naming an error.
            errors = [l for l in lines if re.match(r"^[\w.]*(Error|Exception)\b.*:", l)] or [
                l for l in lines if "Error" in l or "error:" in l
            ]
            why = f"{note}{': ' + errors[-1][:300] if errors else ''}"
        for name in names[len(verdicts):]:
            verdicts.append(IndexWidthVerdict(name, status, num_slots, elements, entry, why))
    elif rc not in (0, None):
        raise RuntimeError(f"the large-pool child exited {rc} after all runs:\n{stderr[-2000:]}")
    return verdicts
