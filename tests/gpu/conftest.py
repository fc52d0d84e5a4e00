"""tests/gpu runs everywhere: compiled on CUDA, under Triton's interpreter on CPU.

Without CUDA, ``TRITON_INTERPRET=1`` is set here, at collection time, before
any module decorates a ``@triton.jit`` function (Triton decides compiled or
interpreted at decoration), and the modules pick CI-sized shapes from
``kv_gpu_helpers.ON_CUDA``. Nothing that can run skips. Only a machine
without torch or Triton installed (both are in the ``runtime`` extra)
reports each module as one skip naming what is missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

# The test modules share `kv_gpu_helpers` and the upstream loaders; make them
# importable whatever the import mode (and in the large-pool child process).
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


def _skip_reason() -> Optional[str]:
    try:
        import torch
    except Exception as err:  # pragma: no cover - depends on the machine
        return f"torch is not importable ({err}); install the runtime extra"
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        import triton  # noqa: F401
    except Exception as err:  # pragma: no cover - depends on the machine
        return f"triton is not importable ({err}); install the runtime extra"
    return None


SKIP_REASON = _skip_reason()


class _SkippedModule(pytest.Module):
    """A test module collected as a single skip, without importing it."""

    def collect(self) -> Any:
        pytest.skip(SKIP_REASON or "", allow_module_level=True)


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    if SKIP_REASON is not None and module_path.name.startswith("test_"):
        return _SkippedModule.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(config: Any, items: list) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)


def pytest_report_header(config: Any) -> str:
    import torch

    if torch.cuda.is_available():
        return f"tests/gpu: compiled Triton on {torch.cuda.get_device_name(0)}"
    return f"tests/gpu: no CUDA, Triton interpreter on CPU (TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')})"


def pytest_configure(config: Any) -> None:
    # The interpreter emulates -inf - -inf (an empty softmax block) in numpy,
    # which warns; compiled Triton computes the same NaN silently and masks it.
    config.addinivalue_line(
        "filterwarnings", "ignore:invalid value encountered:RuntimeWarning:triton.runtime.interpreter"
    )
