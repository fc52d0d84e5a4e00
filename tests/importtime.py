"""Reading `python -X importtime` reports."""

from __future__ import annotations

import re

_LIBCST = re.compile(r"\|\s*libcst(\.\S*)?\s*$", re.MULTILINE)


def imported_libcst(report: str) -> bool:
    """Whether the report lists LibCST's package or one of its modules (not a module merely named after it)."""
    return _LIBCST.search(report) is not None
