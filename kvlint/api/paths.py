"""A file's path as findings, messages and caches show it: relative to a base folder, with `/`."""

from __future__ import annotations

import os
from pathlib import Path

# Markers of a project root: a package path never climbs past one.
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def display_path(path: Path, cwd: Path) -> str:
    # A run shows every file of the tree several times: a prefix test on the text is many
    # times cheaper than `relative_to`, which takes the paths apart.
    text, base = str(path), str(cwd)
    base = base if base.endswith(os.sep) else base + os.sep
    if text.startswith(base):
        return text[len(base) :].replace(os.sep, "/")
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return path.as_posix()
