"""Writing a multi-file fixture tree, each file first edited as a test case asks."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence


def write_edited(root: Path, texts: Mapping[str, str], edits: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, str]:
    """`texts` (path under `root` -> source) written out, each file with its (old, new) edits made; every
    `old` must be there, so a fixture drifting from its edits fails loudly. Returns the texts written."""
    written = dict(texts)
    for name, changes in edits.items():
        for old, new in changes:
            assert old in written[name], (name, old)
            written[name] = written[name].replace(old, new)
    for name, text in written.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return written
