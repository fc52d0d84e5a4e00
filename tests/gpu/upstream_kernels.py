"""Upstream SGLang's own Triton kernels, loaded as files from the pinned wheel.

The sglang wheel (`SGLANG_VERSION`, the release the corpus tests pin) is
downloaded once with ``pip download --no-deps`` into
``<corpus dir>/wheels/`` (see ``tests/corpus.py``: ``$KVLINT_CORPUS_DIR``,
default ``~/.cache/kvlint-corpus``), and the few kernel files below are
extracted next to it. Nothing of sglang is installed or imported as a
package: each file is executed as a module of its real dotted name, with
the smallest stand-ins for the in-tree imports it makes. Every stand-in is
listed in `STAND_INS` with the reason it cannot change a kernel's result.

A newer wheel that moves or renames one of these files, or a function in
it, fails with `UpstreamKernelMissing` naming the file and the name: never a
silent skip.

Used by ``tests/gpu/test_upstream_kernels.py`` and ``bench/upstream_decode.py``.
"""

from __future__ import annotations

import fcntl
import importlib.util
import subprocess
import sys
import types
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent.parent))
from corpus import CorpusUnavailable, corpus_dir, sglang_version  # noqa: E402

# The release the corpus tests judge (`tests/corpus.py`; $KVLINT_SGLANG_VERSION to try another).
SGLANG_VERSION = sglang_version()

# Dotted module name -> path inside the wheel. Order matters: a file is loaded
# after the files it imports.
FILES: Dict[str, str] = {
    "sglang.kernels.ops.attention.score_mod": "sglang/kernels/ops/attention/score_mod.py",
    "sglang.kernels.ops.attention.decode_attention": "sglang/kernels/ops/attention/decode_attention.py",
    "sglang.kernels.ops.attention.extend_attention": "sglang/kernels/ops/attention/extend_attention.py",
    "sglang.kernels.ops.attention.fused_qk_rope_reshape_and_cache": (
        "sglang/kernels/ops/attention/fused_qk_rope_reshape_and_cache.py"
    ),
}

# What each kernel file imports from the tree and what stands in for it.
STAND_INS = {
    "sglang.srt.utils.is_hip / is_gfx95_supported / is_gfx1250_supported": (
        "False: this is not a ROCm machine. They only pick HIP block sizes, HIP "
        "env flags and the Lean decode path, none of which runs on CUDA or CPU."
    ),
    "sglang.srt.utils.is_cuda": (
        "torch.cuda.is_available(), what upstream returns on an NVIDIA machine. It "
        "only picks extend's BLOCK_M/BLOCK_N from the compute capability: tile "
        "sizes, not addresses (the parity test compares two runs of the same tiles)."
    ),
    "sglang.srt.utils.get_device_core_count": (
        "raises if called: upstream calls it only from the HIP MLA tuning path."
    ),
    "sglang.srt.environ.envs": (
        "every flag's .get() raises: each one is read only behind an `_is_hip` or "
        "`_is_gfx95` test, so a flag read off ROCm is a test failure, not a default."
    ),
    "sglang.srt.runtime_context.get_exec": (
        "raises if called: only reached from the HIP MLA tuning path."
    ),
    "sglang.kernels.ops.attention.score_mod": "the real file from the same wheel.",
}


class UpstreamKernelMissing(RuntimeError):
    """The pinned wheel lacks a kernel file or name these tests load."""


def wheel_dir() -> Path:
    return corpus_dir() / "wheels"


def sglang_wheel(version: str = SGLANG_VERSION) -> Path:
    """The cached sglang wheel of ``version``, downloaded on first use."""
    target = wheel_dir()
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(target.glob(f"sglang-{version}-*.whl"))
        if found:
            return found[0]
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--timeout", "30", "--retries", "1",
            "-d", str(target), f"sglang=={version}",
        ]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CorpusUnavailable(f"cannot run `pip download sglang=={version}`: {exc}") from None
        found = sorted(target.glob(f"sglang-{version}-*.whl"))
        if result.returncode != 0 or not found:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise CorpusUnavailable(f"`pip download --no-deps sglang=={version}` failed: {tail[0]}")
        return found[0]


def extract(wheel: Path, root: Path, members) -> None:
    """Extract ``members`` of ``wheel`` under ``root``; a missing one raises
    `UpstreamKernelMissing` naming the wheel and the file."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for member in members:
            if member not in names:
                raise UpstreamKernelMissing(
                    f"{wheel.name} has no {member}: the kernel file moved or was renamed "
                    f"upstream; update FILES in tests/gpu/upstream_kernels.py"
                )
            archive.extract(member, root)


def kernel_sources(version: str = SGLANG_VERSION) -> Path:
    """A directory holding `FILES` extracted from the wheel (cached)."""
    wheel = sglang_wheel(version)
    root = wheel_dir() / f"{wheel.stem}-kernels"
    marker = root / ".complete"
    if not marker.is_file():
        extract(wheel, root, FILES.values())
        marker.write_text(wheel.name + "\n")
    return root


class _RaisingFlag:
    def __init__(self, name: str) -> None:
        self.name = name

    def get(self):
        raise AssertionError(
            f"upstream read env flag {self.name} off ROCm; the stand-in assumed it "
            f"is read only behind an _is_hip test (see STAND_INS)"
        )


class _Envs:
    def __getattr__(self, name: str) -> _RaisingFlag:
        return _RaisingFlag(name)


def _raises(name: str):
    def stand_in(*args, **kwargs):
        raise AssertionError(f"upstream called {name} off ROCm (see STAND_INS)")

    return stand_in


def _stand_in_modules() -> Dict[str, types.ModuleType]:
    import torch

    def package(name: str) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__path__ = []  # a package, so submodules can be registered below it
        return module

    modules = {name: package(name) for name in (
        "sglang", "sglang.srt", "sglang.kernels", "sglang.kernels.ops",
        "sglang.kernels.ops.attention",
    )}
    utils = types.ModuleType("sglang.srt.utils")
    utils.is_hip = lambda: False
    utils.is_gfx95_supported = lambda: False
    utils.is_gfx1250_supported = lambda: False
    utils.is_cuda = lambda: torch.cuda.is_available()
    utils.get_device_core_count = _raises("get_device_core_count")
    environ = types.ModuleType("sglang.srt.environ")
    environ.envs = _Envs()
    runtime_context = types.ModuleType("sglang.srt.runtime_context")
    runtime_context.get_exec = _raises("get_exec")
    modules.update({m.__name__: m for m in (utils, environ, runtime_context)})
    return modules


_LOADED: Optional[Dict[str, types.ModuleType]] = None


def load(version: str = SGLANG_VERSION) -> Dict[str, types.ModuleType]:
    """{dotted name: module} for every file in `FILES`, loaded once per process.

    ``TRITON_INTERPRET`` must be set as wanted before the first call: Triton
    decides at decoration time whether a ``@triton.jit`` function is compiled
    or interpreted.
    """
    global _LOADED
    if _LOADED is not None:
        return _LOADED
    root = kernel_sources(version)
    saved = {name: sys.modules[name] for name in list(sys.modules) if name == "sglang" or name.startswith("sglang.")}
    for name in saved:
        del sys.modules[name]
    loaded: Dict[str, types.ModuleType] = {}
    try:
        sys.modules.update(_stand_in_modules())
        for name, member in FILES.items():
            path = root / member
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            loaded[name] = module
    finally:
        # The loaded modules keep their globals; the names go so that a real
        # sglang (if any) is not shadowed for the rest of the process.
        for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
            del sys.modules[name]
        sys.modules.update(saved)
    _LOADED = loaded
    return loaded


def kernel(module: str, name: str):
    """``name`` from upstream's ``sglang/kernels/ops/attention/<module>.py``."""
    dotted = f"sglang.kernels.ops.attention.{module}"
    mod = load()[dotted]
    try:
        return getattr(mod, name)
    except AttributeError:
        raise UpstreamKernelMissing(
            f"{FILES[dotted]} in sglang {SGLANG_VERSION} has no {name!r}: renamed or "
            f"moved upstream; update tests/gpu/upstream_kernels.py"
        ) from None


def decode_attention_fwd():
    return kernel("decode_attention", "decode_attention_fwd")


def extend_attention_fwd():
    return kernel("extend_attention", "extend_attention_fwd")


def fused_qk_rope_reshape_and_cache():
    return kernel("fused_qk_rope_reshape_and_cache", "fused_qk_rope_reshape_and_cache")


def upstream_files() -> List[str]:
    return list(FILES.values())
