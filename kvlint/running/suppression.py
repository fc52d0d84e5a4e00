"""`# kvlint: ignore[...]` and `# noqa: ...` comments.

Comments are read with `tokenize`, so a `#` inside a string never counts.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Optional

from kvlint.api.types import Suppression

_KVLINT = re.compile(r"#\s*kvlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)

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
            codes = _codes(match.group("codes"))
            found.setdefault(line, []).append(Suppression(line, column + match.start() + 1, codes, codes is None))
    return found


def _codes(text: Optional[str]) -> Optional[frozenset[str]]:
    if text is None or not text.strip():
        return None
    return frozenset(part.strip().upper() for part in re.split(r"[,\s]+", text) if part.strip())
