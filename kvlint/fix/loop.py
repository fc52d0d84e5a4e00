"""The fix loop: apply, re-parse, re-check, until nothing changes.

Fixes can nest (a fixed call inside another flagged call), so each round
re-computes the replacements on a fresh parse of the previous round's output.
The result must compile, or nothing is returned.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import libcst as cst

from kvlint.fix.apply import FixFailed, apply_replacements
from kvlint.api.rule import Replacement

# Nested fixes settle in two rounds; three is a safety margin.
MAX_FIX_ROUNDS = 3

ReplacementsFor = Callable[[cst.Module], Sequence[Replacement]]


def fix_until_stable(
    module: cst.Module, path: str, replacements_for: ReplacementsFor
) -> tuple[Optional[bytes], Optional[str]]:
    """The fixed source (None when nothing changed) and why fixing failed (None when it did not)."""
    current = module
    for _ in range(MAX_FIX_ROUNDS):
        try:
            updated = apply_replacements(current, replacements_for(current), path)
            if updated.code == current.code:
                break
            # Re-parse: fixes may share nodes, and the next round needs a plain tree.
            current = cst.parse_module(updated.bytes)
            compile(current.bytes, path, "exec", dont_inherit=True)
        except (FixFailed, SyntaxError, cst.ParserSyntaxError, ValueError) as exc:
            return None, f"fix not applied, the rewrite would not parse: {exc}"
    if current.code == module.code:
        return None, None
    return current.bytes, None
