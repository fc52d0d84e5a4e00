"""Where every cache of a run lives: `<project root>/<cache-dir>`, never wherever kvlint was started.

A cache written into the working directory litters whatever folder a command was run from (a
parent of the tree, a home directory) with a `.kvlint_cache/` no project owns. Every cache (the
result cache, the stat table, the learned contract) asks `cache_directory`, and the root is the
project's, as `kvlint.api.project` found it from the paths.
"""

from __future__ import annotations

from pathlib import Path

from kvlint.api.config import Config


def cache_directory(config: Config) -> Path:
    """The folder the caches of a run under `config` are kept in: under its project's root
    (`kvlint.api.project.project_config` decides the root from the run's paths)."""
    return config.root / config.cache_dir
