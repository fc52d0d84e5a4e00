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
    # Generating a backend's code takes a good part of a second: each round generates it once.
    original = module.code
    current, code = module, original
    for _ in range(MAX_FIX_ROUNDS):
        try:
            replacements = replacements_for(current)
            if not replacements:
                break
            updated = apply_replacements(current, replacements, path)
            updated_code = updated.code
            if updated_code == code:
                break
            # Re-parse: fixes may share nodes, and the next round needs a plain tree.
            current = cst.parse_module(updated_code.encode(updated.encoding))
            code = updated_code
            compile(code.encode(current.encoding), path, "exec", dont_inherit=True)
        except (FixFailed, SyntaxError, cst.ParserSyntaxError, ValueError) as exc:
            return None, f"fix not applied, the rewrite would not parse: {exc}"
    if code == original:
        return None, None
    return code.encode(current.encoding), None
