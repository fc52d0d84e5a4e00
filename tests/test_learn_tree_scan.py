"""The whole-tree scans of contract learning read only what starts a line, as the parser would."""

from __future__ import annotations

from pathlib import Path

from kvlint.learn.scope import Scope
from kvlint.learn.tree import class_bases, import_counts

SOURCE = b'''class Pool(Base, torch.nn.Module):
    class Inner(Pool):
        from engine.inner import helper
doc = "class Fake(Pool) and from engine.fake import nothing"
# a subclass Other(Pool) in a comment
\tclass Tabbed(Inner):
from engine.pool import Pool
'''


def test_class_headers_are_read_only_at_line_starts() -> None:
    bases = class_bases(Scope({Path("m.py"): SOURCE}))
    assert bases == {"Pool": {"Base", "Module"}, "Inner": {"Pool"}, "Tabbed": {"Inner"}}


def test_from_imports_are_counted_only_at_line_starts() -> None:
    assert import_counts(Scope({Path("m.py"): SOURCE}), b"") == {"engine.inner": 1, "engine.pool": 1}
