"""LibCST, loaded when a rule first reads it rather than when the rules are imported.

Importing LibCST costs a quarter of a second, a third of a one-file run (its
nodes are some three hundred dataclasses). Every rule module imports it, yet a
rule reads it only in `check`, and most files a pre-commit run checks are
cleared by the rules' `may_flag` on CPython's tree: such a run never needs it.

`defer()` puts a stand-in for `libcst` in `sys.modules` before the registry
imports the rules, so their `import libcst as cst` binds the stand-in. The
first attribute read through it (`cst.Call`, `cst.parse_module`, an
`import libcst.x`) imports LibCST for real, and the stand-in takes a copy of
its namespace, so later reads are plain module lookups. A run that checks
files in worker processes calls `load()` first: forked workers then share it.

Only `libcst` itself is deferred, and only when nothing has imported it yet
(a test session, the fix path or the language server may have).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

_NAME = "libcst"


class _StandIn(types.ModuleType):
    """`libcst` until something reads it; then a copy of its namespace."""

    def __getattr__(self, name: str) -> Any:
        # Reached only for names the copy lacks: all of them before the load, and
        # after it only submodules LibCST imported later (its own lazy imports).
        return getattr(load(), name)


def defer() -> None:
    """Stand in for LibCST until it is read, unless something imported it already."""
    if _NAME in sys.modules:
        return
    spec = importlib.util.find_spec(_NAME)
    if spec is None:
        # Not installed: the rules' own import says so.
        return
    stand_in = _StandIn(_NAME)
    # The import system reads `__spec__` of a module in `sys.modules`; `__path__` is left out
    # on purpose, so importing a submodule loads LibCST first.
    stand_in.__spec__ = spec
    sys.modules[_NAME] = stand_in


def loaded() -> bool:
    """Whether LibCST itself is imported, not a stand-in for it."""
    module = sys.modules.get(_NAME)
    return module is not None and not isinstance(module, _StandIn)


def load() -> types.ModuleType:
    """LibCST itself, imported now if a stand-in held its place."""
    module = sys.modules.get(_NAME)
    if module is not None and not isinstance(module, _StandIn):
        return module
    if module is not None:
        del sys.modules[_NAME]
    try:
        real = importlib.import_module(_NAME)
    except BaseException:
        if module is not None:
            sys.modules[_NAME] = module
        raise
    if module is not None:
        module.__dict__.update(real.__dict__)
    return real
