"""Drive ``layers/attention/token_major_backend.py`` through a few decode steps.

The same requests, weights and random K/V run against a token-major pool and
a contiguous (page-major) one, so the backend's two hazards show up as
behaviour:

* strict token-major pool: the bare ``out_cache_loc`` is refused ("not marked
  kernel-facing");
* under ``kv_layout_guard()``: the ``.view(-1, page_size, H, D)`` raises KV201;
* non-strict token-major pool, no guard, ``page_size == 1``: the output
  differs from the contiguous run (the written bytes do not: the loc values
  are right, only their mark is missing);
* after ``kvlint fix``: runs clean on a strict pool under the guard, and
  writes the same bytes and returns the same output as the contiguous pool.

Usage, from the repository root::

    python -m examples.run_backend                      # the file as written
    cp -r examples /tmp/ex && kvlint fix /tmp/ex
    python -m examples.run_backend --backend /tmp/ex/layers/attention/token_major_backend.py
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, List, Optional, Sequence

import torch

from runtime_shim import (
    ContiguousMHAPool,
    KVIndexTranslator,
    KVWriteLoc,
    TokenMajorMHAPool,
    UnmarkedWrite,
    kv_layout_guard,
)

BACKEND_PATH = Path(__file__).resolve().parent / "layers" / "attention" / "token_major_backend.py"
POOL_KINDS = ("token_major", "contiguous")


@dataclass(frozen=True)
class RadixAttentionStub:
    """The attributes of SGLang's ``RadixAttention`` a backend reads."""

    layer_id: int
    tp_q_head_num: int
    tp_k_head_num: int
    tp_v_head_num: int
    head_dim: int
    v_head_dim: int
    scaling: Optional[float] = None
    is_cross_attention: bool = False


@dataclass
class DecodeRun:
    # [steps, layers, batch, q_heads * v_dim]
    output: torch.Tensor
    # [layers, 2 (K, V), slots, kv_heads, head_dim]: every row the run wrote,
    # gathered by physical slot id, so two pools' rows compare directly
    written: torch.Tensor
    # writes a non-strict pool let through without a mark (guard runs only)
    unmarked_writes: List[UnmarkedWrite] = field(default_factory=list)

    def written_bytes(self) -> bytes:
        # A fresh contiguous clone owns a storage of exactly its own bytes (torch alone, no numpy).
        packed = self.written.detach().cpu().clone(memory_format=torch.contiguous_format)
        return bytes(packed.untyped_storage())


def load_backend_class(path: "str | Path" = BACKEND_PATH) -> type:
    """``TokenMajorAttnBackend`` from the file at ``path`` (e.g. a fixed copy)."""
    path = Path(path).resolve()
    name = f"_kvlint_example_backend_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.TokenMajorAttnBackend


def build_pool(
    kind: str,
    *,
    num_slots: int,
    page_size: int,
    layer_num: int,
    kv_heads: int,
    head_dim: int,
    strict: bool = True,
    dtype: torch.dtype = torch.float32,
    device: "str | torch.device" = "cpu",
) -> Any:
    if kind not in POOL_KINDS:
        raise ValueError(f"pool kind must be one of {POOL_KINDS}, got {kind!r}")
    pool_cls = TokenMajorMHAPool if kind == "token_major" else ContiguousMHAPool
    return pool_cls(
        num_slots=num_slots,
        page_size=page_size,
        layer_num=layer_num,
        k_heads=kv_heads,
        k_dim=head_dim,
        v_heads=kv_heads,
        v_dim=head_dim,
        dtype=dtype,
        device=device,
        strict=strict,
    )


def run_decode(
    backend_cls: Optional[type] = None,
    *,
    pool: str = "token_major",
    strict: bool = True,
    guard: bool = False,
    page_size: int = 1,
    steps: int = 3,
    prefix_lens: Sequence[int] = (5, 9, 3),
    layer_num: int = 4,
    q_heads: int = 4,
    kv_heads: int = 2,
    head_dim: int = 16,
    seed: int = 0,
    device: "str | torch.device" = "cpu",
) -> DecodeRun:
    """Prefill ``prefix_lens`` tokens per request, then decode ``steps`` tokens.

    Everything random comes from ``seed``, so two calls that differ only in
    ``pool`` see identical inputs. Raises what the pool or the guard raises.
    """
    backend_cls = backend_cls or load_backend_class()
    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    batch_size = len(prefix_lens)
    max_len = max(prefix_lens) + steps
    pages_per_req = -(-max_len // page_size)
    # Page 0 is reserved (padding writes land there), plus a few spare pages
    # so that the physical pages a request gets are scattered.
    num_pages = 1 + batch_size * pages_per_req + 3
    num_slots = num_pages * page_size

    # Virtual pages are handed out in order; the translator's table scatters
    # them over physical pages, as a unified pool's allocator does.
    physical_pages = 1 + torch.randperm(num_pages - 1, generator=gen)
    page_table = torch.cat([torch.zeros(1, dtype=torch.int64), physical_pages])
    translator = KVIndexTranslator(page_table, page_size)
    positions = torch.arange(max_len)
    virtual = torch.stack(
        [(1 + r * pages_per_req) * page_size + positions for r in range(batch_size)]
    )
    req_to_token = translator.translate(virtual.flatten()).view(batch_size, max_len)

    layers = [
        RadixAttentionStub(
            layer_id=i,
            tp_q_head_num=q_heads,
            tp_k_head_num=kv_heads,
            tp_v_head_num=kv_heads,
            head_dim=head_dim,
            v_head_dim=head_dim,
        )
        for i in range(layer_num)
    ]

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(device)

    prefix_k = [[rand(n, kv_heads, head_dim) for n in prefix_lens] for _ in layers]
    prefix_v = [[rand(n, kv_heads, head_dim) for n in prefix_lens] for _ in layers]
    step_q = [[rand(batch_size, q_heads * head_dim) for _ in layers] for _ in range(steps)]
    step_k = [[rand(batch_size, kv_heads, head_dim) for _ in layers] for _ in range(steps)]
    step_v = [[rand(batch_size, kv_heads, head_dim) for _ in layers] for _ in range(steps)]

    with _maybe_guard(guard) as active_guard:
        kv_pool = build_pool(
            pool,
            num_slots=num_slots,
            page_size=page_size,
            layer_num=layer_num,
            kv_heads=kv_heads,
            head_dim=head_dim,
            strict=strict,
            device=device,
        )
        # Prefill through the door with locs this driver translated itself,
        # so it states their id space.
        for layer in layers:
            for r, n in enumerate(prefix_lens):
                loc = req_to_token[r, :n].to(device)
                kv_pool.set_kv_buffer(
                    layer,
                    KVWriteLoc(loc, id_space="kernel"),
                    prefix_k[layer.layer_id][r],
                    prefix_v[layer.layer_id][r],
                )

        backend = backend_cls(page_size, device=device)
        seq_lens = torch.tensor(prefix_lens, dtype=torch.int64)
        outputs = []
        for step in range(steps):
            forward_batch = SimpleNamespace(
                batch_size=batch_size,
                req_pool_indices=torch.arange(batch_size),
                # decode: the new token is at position seq_len and attends to itself
                seq_lens=(seq_lens + 1).to(device),
                out_cache_loc=virtual[torch.arange(batch_size), seq_lens].to(device),
                out_cache_loc_id_space="virtual",
                token_to_kv_pool=kv_pool,
                req_to_token_pool=SimpleNamespace(req_to_token=req_to_token.to(device)),
            )
            translator.rebind_write_loc(forward_batch)
            backend.init_forward_metadata(forward_batch)
            outputs.append(
                torch.stack(
                    [
                        backend.forward_decode(
                            step_q[step][layer.layer_id],
                            step_k[step][layer.layer_id],
                            step_v[step][layer.layer_id],
                            layer,
                            forward_batch,
                        )
                        for layer in layers
                    ]
                )
            )
            seq_lens += 1

        used = torch.cat([req_to_token[r, : int(n)] for r, n in enumerate(seq_lens)]).to(device)
        written = torch.stack(
            [
                torch.stack([kv_pool.get_key_buffer(layer.layer_id)[used], kv_pool.get_value_buffer(layer.layer_id)[used]])
                for layer in layers
            ]
        )
        unmarked = list(active_guard.unmarked_writes) if active_guard is not None else []
    return DecodeRun(output=torch.stack(outputs), written=written, unmarked_writes=unmarked)


@contextlib.contextmanager
def _maybe_guard(enabled: bool) -> Iterator[Optional[kv_layout_guard]]:
    if not enabled:
        yield None
        return
    with kv_layout_guard() as guard:
        yield guard


def _attempt(label: str, backend_cls: type, reference: DecodeRun, **kwargs: Any) -> str:
    try:
        run = run_decode(backend_cls, **kwargs)
    except Exception as err:  # the point is to show what each setting raises
        first_line = str(err).splitlines()[0]
        return f"{label:<44} raises {type(err).__name__}: {first_line}"
    same_out = torch.equal(run.output, reference.output)
    same_bytes = run.written_bytes() == reference.written_bytes()
    verdict = "matches the contiguous pool" if same_out and same_bytes else "DIFFERS from the contiguous pool"
    detail = f"output {'same' if same_out else 'max |diff| %.3g' % (run.output - reference.output).abs().max()}, written bytes {'same' if same_bytes else 'differ'}"
    if run.unmarked_writes:
        detail += f", {len(run.unmarked_writes)} unmarked writes"
    return f"{label:<44} {verdict} ({detail})"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", type=Path, default=BACKEND_PATH, help="token_major_backend.py to run (e.g. a fixed copy)")
    parser.add_argument("--page-size", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)

    backend_cls = load_backend_class(args.backend)
    common = dict(page_size=args.page_size, device=args.device)
    reference = run_decode(backend_cls, pool="contiguous", **common)
    print(f"backend: {args.backend}  page_size={args.page_size}")
    print(_attempt("token-major, strict", backend_cls, reference, pool="token_major", strict=True, **common))
    print(_attempt("token-major, non-strict, kv_layout_guard()", backend_cls, reference, pool="token_major", strict=False, guard=True, **common))
    print(_attempt("token-major, strict, kv_layout_guard()", backend_cls, reference, pool="token_major", strict=True, guard=True, **common))
    print(_attempt("token-major, non-strict, no guard", backend_cls, reference, pool="token_major", strict=False, **common))
    return 0


if __name__ == "__main__":
    sys.exit(main())
