"""Cost of running under `kv_layout_guard`, outside the ops it flags.

The guard is a TorchFunctionMode, so every torch call in its scope goes
through one Python frame and a set lookup. This measures what that costs on
a decode-step-shaped workload over a real token-major pool (projections,
KV writes through the marked door, a gather of the context, attention) and
on a worst case of tiny element-wise ops. Guarded and unguarded runs are
interleaved in the same process, and each figure is the median of many
iterations, so machine noise shifts all sides alike. A pass-through
TorchFunctionMode is timed too, to separate the cost of any mode from the
guard's own checks.

    python bench/guard_overhead.py [--iters N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List, Optional

import torch
from torch.overrides import TorchFunctionMode

from runtime_shim import KVWriteLoc, TokenMajorMHAPool, kv_layout_guard

LAYERS, HEADS, HEAD_DIM, HIDDEN = 4, 8, 64, 512
BATCH, CONTEXT = 8, 256


def _decode_workload() -> Callable[[], None]:
    pool = TokenMajorMHAPool(num_slots=4096, page_size=16, layer_num=LAYERS, k_heads=HEADS,
                             k_dim=HEAD_DIM, v_heads=HEADS, v_dim=HEAD_DIM,
                             dtype=torch.float32, device="cpu")
    g = torch.Generator().manual_seed(0)
    weights = [torch.randn(HIDDEN, 3 * HIDDEN, generator=g) / HIDDEN**0.5 for _ in range(LAYERS)]
    out_proj = [torch.randn(HIDDEN, HIDDEN, generator=g) / HIDDEN**0.5 for _ in range(LAYERS)]
    hidden0 = torch.randn(BATCH, HIDDEN, generator=g)
    write_loc = KVWriteLoc(torch.arange(BATCH) * 7, id_space="kernel")
    context = torch.randint(0, 4096, (BATCH, CONTEXT), generator=g)

    def step() -> None:
        hidden = hidden0
        for layer in range(LAYERS):
            q, k, v = (hidden @ weights[layer]).split(HIDDEN, dim=-1)
            q = q.view(BATCH, HEADS, HEAD_DIM)
            pool.set_kv_buffer(layer, write_loc, k.view(BATCH, HEADS, HEAD_DIM),
                               v.view(BATCH, HEADS, HEAD_DIM))
            k_cache, v_cache = pool.get_kv_buffer(layer)
            keys = k_cache[context].transpose(1, 2)          # (B, H, C, D)
            values = v_cache[context].transpose(1, 2)
            scores = torch.einsum("bhd,bhcd->bhc", q, keys) * HEAD_DIM**-0.5
            attn = torch.einsum("bhc,bhcd->bhd", scores.softmax(-1), values)
            hidden = torch.nn.functional.silu(attn.reshape(BATCH, HIDDEN) @ out_proj[layer]) + hidden

    return step


def _tiny_ops_workload() -> Callable[[], None]:
    x = torch.randn(16)

    def step() -> None:
        y = x
        for _ in range(50):
            y = (y * 1.001).add(0.5).relu()

    return step


class _PassThroughMode(TorchFunctionMode):
    """The floor: what any TorchFunctionMode costs, before the guard's own checks."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


def _timed(step: Callable[[], None], mode: Optional[TorchFunctionMode]) -> float:
    if mode is None:
        t0 = time.perf_counter()
        step()
        return time.perf_counter() - t0
    with mode:
        t0 = time.perf_counter()
        step()
        return time.perf_counter() - t0


def _medians(step: Callable[[], None], iters: int) -> Dict[str, float]:
    modes: Dict[str, Optional[TorchFunctionMode]] = {
        "plain": None, "pass-through mode": _PassThroughMode(), "guard": kv_layout_guard(),
    }
    samples: Dict[str, List[float]] = {name: [] for name in modes}
    for _ in range(5):
        step()
    for _ in range(iters):
        for name, mode in modes.items():
            samples[name].append(_timed(step, mode))
    return {name: statistics.median(times) for name, times in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for label, make in (("decode step (representative)", _decode_workload),
                        ("tiny element-wise ops (worst case)", _tiny_ops_workload)):
        m = _medians(make(), args.iters)
        print(f"{label}: guarded/plain = {m['guard'] / m['plain']:.3f} "
              f"(pass-through TorchFunctionMode alone: {m['pass-through mode'] / m['plain']:.3f}; "
              f"medians {m['plain'] * 1e6:.0f} / {m['pass-through mode'] * 1e6:.0f} / "
              f"{m['guard'] * 1e6:.0f} us over {args.iters} iterations)")


if __name__ == "__main__":
    main()
