"""The project a run's paths belong to: its configuration, its root, and the files that are its context.

One rule for every command (check, fix, baseline, contract, the language server): the project comes
from the paths, never from the working directory, so the same paths give the same findings from
anywhere, and a one-file run reads the same context as the whole-tree run.

The root is, nearest first: the folder of the `kvlint.toml` (or `pyproject.toml` with `[tool.kvlint]`)
found from the paths upward; else the nearest enclosing repository (a folder holding `.git`); else the
package root: the folder holding the top package of the chain of folders with an `__init__.py` that
the paths sit in (`srt/` in `sglang/` gives the folder above `sglang/`, where `import sglang` starts).
A repository wins over a package root inside it: every path of a repository then has one root, so a
one-file run and `kvlint check .` at the top read the same context. With none of these the project is
the given paths themselves (an implicit namespace package such as sglang 0.5's `srt/mem_cache/` has
no `__init__.py` to climb; such a tree needs a `kvlint.toml` or a repository for a narrow run to see
the rest of it).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from kvlint.api.config import Config, ConfigError, find_config_file, load_config


def project_config(paths: Sequence[Path], explicit: Optional[Path] = None) -> Config:
    """The configuration governing `paths` (none given: the working directory), its root and context.

    `explicit` (`--config FILE`) governs whatever the paths: its folder is the root. Paths of two
    projects in one command are an error naming both roots: each has its own contract and context.
    """
    if explicit is not None:
        return load_config(explicit)
    given = [Path(os.path.abspath(path)) for path in paths] or [Path.cwd()]
    folders = {path if path.is_dir() else path.parent for path in given}
    # Each folder once: a hook's file list shares a few, and the search upward reads each pyproject.toml it meets.
    found = {_project_of(folder) for folder in folders}
    if len(found) > 1:
        roots = sorted(str(root) if root is not None else "(no project)" for _file, root in found)
        raise ConfigError(f"paths belong to different projects ({roots[0]} and {roots[1]}); check each on its own")
    config_file, root = found.pop()
    if config_file is not None:
        return load_config(config_file)
    if root is not None:
        return replace(Config(), project_root=root)
    # No marker bounds the tree: its context is the paths as given, its cache beside them.
    return replace(Config(), project_root=Path(os.path.commonpath(folders)), project_paths=tuple(given))


def _project_of(start: Path) -> tuple[Optional[Path], Optional[Path]]:
    """The configuration file governing the folder `start` and the project root, (None, None) when nothing marks one."""
    config_file = find_config_file(start)
    if config_file is not None:
        return config_file, config_file.parent
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return None, folder
    if not (start / "__init__.py").is_file():
        return None, None
    top = start
    while (top.parent / "__init__.py").is_file():
        top = top.parent
    return None, top.parent
