"""`# kvlint: ignore[...]` and `# noqa: ...` comments.

Comments are read with `tokenize`, so a `#` inside a string never counts.

A `# noqa` is shared with every other linter, so it is read as ruff reads it:
bare (nothing after it, or anything but a `:`) it suppresses every code on its
line; followed by `:` it suppresses only the codes it lists, and of those only
kvlint's (`KV...`) concern kvlint. `# noqa: E501` or `# noqa: leading-underscore`
is another tool's comment and suppresses nothing here, never every code.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Optional

from kvlint.api.types import Suppression

_KVLINT = re.compile(r"#\s*kvlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?P<colon>\s*:)?", re.IGNORECASE)
# The code list after `# noqa:`: codes separated by commas or spaces; whatever follows is a reason.
_NOQA_CODES = re.compile(r"\s*(?P<codes>[A-Z]+[0-9]+(?:(?:\s*,\s*|\s+)[A-Z]+[0-9]+)*)", re.IGNORECASE)
_OWN_PREFIX = "KV"

# Trigger words that make a file worth parsing when unused ignores are reported.
SUPPRESSION_WORDS = ("kvlint: ignore", "kvlint:ignore", "noqa: KV", "noqa:KV")


def parse_suppressions(source: str) -> dict[int, list[Suppression]]:
    found: dict[int, list[Suppression]] = {}
    lowered = source.lower()
    if "kvlint" not in lowered and "noqa" not in lowered:
        return found  # tokenizing costs more than the rules on a typical file
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        line, column = token.start
        for match in _KVLINT.finditer(token.string):
            found.setdefault(line, []).append(
                Suppression(line, column + match.start() + 1, _codes(match.group("codes")), bare_noqa=False)
            )
        for match in _NOQA.finditer(token.string):
            if match.group("colon") is None:
                found.setdefault(line, []).append(Suppression(line, column + match.start() + 1, None, bare_noqa=True))
                continue
            codes = _own_noqa_codes(token.string, match.end())
            if codes:
                found.setdefault(line, []).append(Suppression(line, column + match.start() + 1, codes, bare_noqa=False))
    return found


def _own_noqa_codes(comment: str, start: int) -> frozenset[str]:
    """kvlint's codes among those a `# noqa:` lists from `start`; empty for another tool's list."""
    listed = _NOQA_CODES.match(comment, start)
    codes = _codes(listed.group("codes")) if listed is not None else None
    return frozenset(code for code in codes or () if code.startswith(_OWN_PREFIX))


def _codes(text: Optional[str]) -> Optional[frozenset[str]]:
    if text is None or not text.strip():
        return None
    return frozenset(part.strip().upper() for part in re.split(r"[,\s]+", text) if part.strip())
