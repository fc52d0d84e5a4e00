"""Which files are in scope: the given paths, minus excludes and git-ignored files.

Directory walks never follow symlinked directories (no loops, nothing outside
the tree); a symlinked file is taken only when it resolves inside the path
that was given. Paths are reported relative to the working directory.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from kvlint.api.paths import display_path
from kvlint.api.config import Config, ConfigError
from kvlint.running.phases import Phases, log

# Directories no one wants linted; the same spirit as ruff's defaults.
SKIPPED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", "__pycache__", ".tox", ".nox", ".venv", "venv",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".kvlint_cache", "node_modules",
        "site-packages", ".eggs",
    }
)


@dataclass(frozen=True)
class Scope:
    """The files in scope, sorted, and what was skipped and why."""

    files: tuple[Path, ...]
    # Paths skipped for a reason the user should see (broken link, link outside the tree).
    skipped: tuple[tuple[str, str], ...]
    # Each file's real path (links resolved), worked out once as the walk goes: `Path.resolve`
    # costs a stat per path component, which over a tree of thousands of files adds up.
    real: Mapping[Path, Path] = field(default_factory=dict)


def discover(paths: Sequence[Path], exclude: Sequence[str], exclude_root: Path) -> Scope:
    cwd = Path.cwd()
    found: dict[Path, Path] = {}
    skipped: list[tuple[str, str]] = []
    for given in paths:
        absolute = Path(os.path.abspath(given))
        if not absolute.exists() and not absolute.is_symlink():
            raise ConfigError(f"path does not exist: {given}")
        if absolute.is_dir() and not absolute.is_symlink():
            # git lists what it ignores on the other core while the directory is walked here.
            ignored = _GitIgnored(absolute)
            walked: dict[Path, Path] = dict(_walk(absolute, skipped, cwd))
            candidates = ignored.dropped_from(list(walked))
        else:
            # A file named explicitly is checked even if excluded by a directory rule,
            # and even when it is a link out of the tree: the user asked for it.
            reason = _unusable(absolute, tree=None)
            if reason is not None:
                skipped.append((display_path(absolute, cwd), reason))
                continue
            candidates = [absolute]
            walked = {absolute: absolute.resolve()}
        for candidate in candidates:
            if not _excluded(candidate, exclude, exclude_root):
                found.setdefault(candidate, walked[candidate])
    files = tuple(sorted(_one_path_per_file(found)))
    return Scope(files, tuple(skipped), {path: found[path] for path in files})


def tree_of(in_scope: Scope, context: Sequence[Path], exclude: Sequence[str], root: Path) -> Scope:
    """The whole project a narrower run (`--changed`, the pre-commit hook's file list) is part of:
    its own scope and the project's context. The project index and the contract read it all."""
    # The context's own order first: project rules then meet facts in a whole-tree run's order.
    by_real = {in_scope.real[path]: path for path in in_scope.files}
    included = discover(list(context), exclude, root)
    tree = [by_real.pop(included.real[path], path) for path in included.files]
    files = tuple(tree + list(by_real.values()))
    return Scope(files, (), {**included.real, **in_scope.real})


def _one_path_per_file(paths: Mapping[Path, Path]) -> list[Path]:
    """Drop links to a file that is in scope under another path: it would be checked (and fixed) twice."""
    chosen: dict[Path, Path] = {}
    for path, target in paths.items():
        if target not in chosen or chosen[target].is_symlink():
            chosen[target] = path
    return list(chosen.values())


def _walk(root: Path, skipped: list[tuple[str, str]], cwd: Path) -> Iterable[tuple[Path, Path]]:
    """Each Python file under `root` with its real path, in `os.walk`'s top-down order.

    Directory entries carry their type, so a plain file or directory costs no stat (a third of a
    one-file hook run's walk over sglang/srt was `is_symlink` and `stat` per file). Where no link
    leads to `root`, each path is its own real path: one `Path` serves as both (a `Path` costs
    microseconds to make, thousands of them milliseconds).
    """
    resolved_root = root.resolve()
    pending = [(root, root if resolved_root == root else resolved_root)]
    while pending:
        base, real_base = pending.pop()
        try:
            with os.scandir(base) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue
        kept = []
        for entry in entries:
            name = entry.name
            if not _is_directory(entry) or name in SKIPPED_DIRS or name.endswith(".egg-info"):
                continue
            child = base / name
            if entry.is_symlink():
                skipped.append((display_path(child, cwd), "symlink to a directory, not followed"))
                continue
            if name.endswith(".py"):
                skipped.append((display_path(child, cwd), "a directory, not a Python file"))
            kept.append((child, child if real_base is base else real_base / name))
        for entry in entries:
            if not entry.name.endswith(".py") or _is_directory(entry):
                continue
            path = base / entry.name
            if entry.is_file(follow_symlinks=False):
                yield path, path if real_base is base else real_base / entry.name
                continue
            reason = _unusable(path, tree=resolved_root)
            if reason is not None:
                skipped.append((display_path(path, cwd), reason))
                continue
            yield path, path.resolve()
        # Depth first, in name order, as `os.walk` goes.
        pending.extend(reversed(kept))


def _is_directory(entry: os.DirEntry[str]) -> bool:
    """A directory, or a link to one (a link is reported, never followed), as `os.walk` lists it."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _unusable(path: Path, tree: Optional[Path]) -> Optional[str]:
    """Why `path` cannot be checked as a Python file, or None when it can.

    `tree`, when given, is the resolved directory being walked: a link that
    leaves it is not followed. Anything but a regular file is refused because
    reading a FIFO or a device would block or never end.
    """
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except FileNotFoundError:
            return "broken symlink"
        except RuntimeError:  # Python < 3.13 reports a symlink loop this way
            return "symlink loop"
        except OSError as exc:
            return "symlink loop" if exc.errno == errno.ELOOP else f"cannot resolve symlink: {exc.strerror}"
        if tree is not None and not target.is_relative_to(tree):
            return "symlink pointing outside the tree, not followed"
        if target.is_dir():
            return "symlink to a directory, not followed"
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot stat: {exc.strerror}"
    if stat.S_ISDIR(mode):
        return "a directory, not a Python file"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


class _GitIgnored:
    """What git ignores under a directory: untracked and matched by an ignore rule, or inside an
    ignored directory (a tracked file is never ignored).

    One listing of what git ignores, not each candidate asked about: `git check-ignore` on
    sglang/srt's 2,141 paths took 0.06 s of every pre-commit run, the listing 0.007 s. It is
    started when made, and read when asked for.
    """

    def __init__(self, root: Path) -> None:
        self._root = root
        try:
            self._git: Optional[subprocess.Popen[bytes]] = subprocess.Popen(
                ["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
                cwd=root,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError:
            self._git = None

    def dropped_from(self, candidates: list[Path]) -> list[Path]:
        """`candidates` without the files git ignores (all of them where git cannot tell: not a repository)."""
        listed = self._listed()
        if not candidates or not listed:
            return candidates
        root = self._root
        files = {os.path.normpath(os.path.join(root, name)) for name in listed if not name.endswith("/")}
        directories = tuple(os.path.normpath(os.path.join(root, name)) + os.sep for name in listed if name.endswith("/"))
        return [path for path in candidates if str(path) not in files and not str(path).startswith(directories)]

    def _listed(self) -> list[str]:
        """What git listed, relative to the root; an ignored directory once, with a trailing slash."""
        if self._git is None:
            return []
        try:
            out, _err = self._git.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self._git.kill()
            self._git.communicate()
            return []
        # 128: not a git repository.
        if self._git.returncode != 0:
            return []
        return [os.fsdecode(item) for item in out.split(b"\0") if item]


def _excluded(path: Path, patterns: Sequence[str], root: Path) -> bool:
    if not patterns:
        return False
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = path.as_posix()
    parts = relative.split("/")
    for pattern in patterns:
        anchored = pattern.startswith("/")
        pattern = pattern.strip("/")
        if "/" in pattern or anchored:
            if fnmatch(relative, pattern) or any(
                fnmatch("/".join(parts[:i]), pattern) for i in range(1, len(parts))
            ):
                return True
        elif any(fnmatch(part, pattern) for part in parts):
            return True
    return False


def only_changed(files: list[Path], real: Mapping[Path, Path], rev: str, root: Path) -> list[Path]:
    """`files` (`real`: each one's real path, as `discover` found it) that git says changed against `rev`
    in the repository holding the project `root`."""
    top = _git(["rev-parse", "--show-toplevel"], root)
    if top is None:
        raise ConfigError("--changed needs a git repository")
    root = Path(top.strip())
    diff = _git(["diff", "--name-only", "-z", "--diff-filter=d", rev, "--"], root)
    if diff is None:
        raise ConfigError(f"--changed: git cannot diff against {rev!r}")
    untracked = _git(["ls-files", "-z", "--others", "--exclude-standard"], root) or ""
    changed = {(root / name).resolve() for name in (diff + untracked).split("\0") if name}
    # The walk's real paths, not `Path.resolve` (a stat per path component): over sglang/srt's
    # 2,141 files resolving took 0.4 s of every `--changed` run.
    return [path for path in files if real[path] in changed]


def _git(args: list[str], cwd: Path) -> Optional[str]:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


@dataclass(frozen=True)
class Discovered:
    scope: Scope
    # The files to report on: the scope, or under --changed its changed files.
    files: list[Path]
    # The whole tree a narrower run is part of, its context; None when the run is the whole tree.
    whole: Optional[Scope]


def discovered(config: Config, paths: Sequence[Path], changed: Optional[str], phases: Phases) -> Discovered:
    """The discover phase of a run: the files in scope, those to report on, and their context."""
    given = list(paths) or list(config.include_paths)
    scope = discover(given, config.exclude, config.root)
    files = list(scope.files)
    if changed is not None:
        files = only_changed(files, scope.real, changed, config.root)
    # Under --changed, or with paths narrower than the project (the pre-commit hook), the rest of
    # the project is context: the contract, the helpers' facts and KV301's facts come from it as in
    # a whole-tree run, but nothing is reported there.
    whole = None
    if changed or paths or _absolute(given) != _absolute(config.context):
        whole = tree_of(scope, config.context, config.exclude, config.root)
    phases.done("discover", "%d files in scope, %d paths skipped", len(files), len(scope.skipped))
    for skipped_path, reason in scope.skipped:
        log.debug("skipped %s: %s", skipped_path, reason)
    return Discovered(scope, files, whole)


def _absolute(paths: Sequence[Path]) -> set[str]:
    return {os.path.abspath(path) for path in paths}
