"""Where every cache of a run lives: `<project root>/<cache-dir>`, never wherever kvlint was started.

A cache written into the working directory litters whatever folder a command was run from (a
parent of the tree, a home directory) with a `.kvlint_cache/` no project owns. Every cache (the
result cache, the stat table, the learned contract) asks `cache_directory`, and `project_root`
alone decides the root, so how a run finds its project can change in one place.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from kvlint.api.config import Config
from kvlint.learn.contract import ROOT_MARKERS

# A folder holding one of these is a project's root: its configuration, a package's metadata, a repository.
_MARKERS = ("kvlint.toml", *ROOT_MARKERS)


def cache_directory(config: Config, paths: Sequence[Path]) -> Path:
    """The folder the caches of a run over `paths` (none: the configured include) are kept in."""
    return project_root(config, paths) / config.cache_dir


def project_root(config: Config, paths: Sequence[Path]) -> Path:
    """The folder of the governing configuration; without one, the nearest folder at or above
    the given paths' common folder that holds a project marker; without one, the working
    directory where the paths lie inside it, else their common folder."""
    if config.path is not None:
        return config.root
    given = paths or config.include_paths
    shared = Path(os.path.commonpath([os.path.abspath(path) for path in given]))
    folder = shared if shared.is_dir() else shared.parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in _MARKERS):
            return candidate
    # A tree nothing marks is, without a configuration, read whole from the working directory
    # (`Config.root`): a run over one of its files shares the whole-tree run's cache.
    cwd = Path.cwd()
    return cwd if folder == cwd or cwd in folder.parents else folder
