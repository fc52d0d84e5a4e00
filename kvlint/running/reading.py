"""Read a run's files: their bytes now, or, where the stat table vouches for a file's digest,
only when something asks for them.

With the cache on, every cache answers by content digest, so most files of a warm run, or of a
pre-commit run on one file, are never looked at beyond `os.stat`
(`kvlint.store.stat_table`). A file the table does not vouch for (new, changed, racily
clean, or not a regular file) is read and hashed at once, as is every file with the cache off.

A deferred file is read when first asked for, and its bytes must still hash to the digest the
table gave: the caches key what is computed from them by that digest. When it is gone,
unreadable or different by then, `SourceChanged` is raised and the run starts over reading
every file (`kvlint.running.engine.run`), so the run reports what it would have reported had
it read the file at the start.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from time import time_ns
from typing import Callable, Generic, Iterator, Mapping, Optional, Sequence, TypeVar

from kvlint.api.config import Config
from kvlint.api.paths import display_path
from kvlint.api.types import RunError
from kvlint.running.discovery import Discovered
from kvlint.running.phases import Phases
from kvlint.store.result_cache import digest
from kvlint.store.stat_table import StatTable

K = TypeVar("K")
J = TypeVar("J")


class SourceChanged(Exception):
    """A file whose bytes were deferred was gone, unreadable or changed when they were asked for."""


class _Store:
    """The bytes read so far and every hashed or vouched-for file's digest, by path."""

    def __init__(self) -> None:
        self.data: dict[Path, bytes] = {}
        self.digests: dict[Path, bytes] = {}

    def bytes_of(self, path: Path) -> bytes:
        data = self.data.get(path)
        if data is None:
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise SourceChanged(f"{path} could not be read again: {exc.strerror or exc}") from exc
            if digest(data) != self.digests[path]:
                raise SourceChanged(f"{path} changed while kvlint ran")
            self.data[path] = data
        return data


class FileBytes(Mapping[K, bytes], Generic[K]):
    """Files' bytes by key (a path, or the path shown in reports), each read at most once per run."""

    def __init__(self, store: _Store, paths: dict[K, Path]) -> None:
        self._store = store
        self._paths = paths

    def __getitem__(self, key: K) -> bytes:
        return self._store.bytes_of(self._paths[key])

    def __contains__(self, key: object) -> bool:
        # Mapping's own would read the file.
        return key in self._paths

    def __iter__(self) -> Iterator[K]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def keyed(self, key: Callable[[K], J]) -> FileBytes[J]:
        """The same files under other keys, sharing what is read."""
        return FileBytes(self._store, {key(known): path for known, path in self._paths.items()})

    def joined(self, after: FileBytes[K]) -> FileBytes[K]:
        """These files, then `after`'s, as `{**self, **after}` would order them, without reading any."""
        return FileBytes(self._store, {**self._paths, **after._paths})

    def paths(self) -> dict[K, Path]:
        """Each file's path, by key."""
        return dict(self._paths)

    def digests(self) -> dict[K, bytes]:
        """Each file's content digest (only where the reader hashed: with the cache on)."""
        return {key: self._store.digests[path] for key, path in self._paths.items()}


class Reader:
    """Reads the files of one run into one store. `hashing`: the cache is on, every file's digest is
    wanted; `table`: the stat table vouching for unchanged files (None: read every file now)."""

    def __init__(self, cwd: Path, hashing: bool, table: Optional[StatTable]) -> None:
        self._cwd = cwd
        self._hashing = hashing
        self._table = table
        self._store = _Store()
        # Files whose digest the table gave: not read unless asked for.
        self.vouched = 0

    def read(self, files: Sequence[Path], real: Mapping[Path, Path]) -> tuple[FileBytes[Path], list[RunError]]:
        """`files` (`real`: each one's real path); a file that cannot be read is left out with an error."""
        store, table = self._store, self._table
        # Locals: this loop runs once for each of a tree's thousands of files on every run.
        digests, vouched = store.digests, 0
        paths: dict[Path, Path] = {}
        errors: list[RunError] = []
        stat_at = time_ns()
        for path in files:
            info = _regular_file_stat(path) if table is not None else None
            key = str(real.get(path) or os.path.abspath(path)) if info is not None else ""
            known = table.digest(key, info) if table is not None and info is not None else None
            if known is not None:
                digests[path] = known
                paths[path] = path
                vouched += 1
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                errors.append(_read_error(path, self._cwd, exc))
                continue
            store.data[path] = data
            paths[path] = path
            if self._hashing:
                digests[path] = digest(data)
                if table is not None and info is not None:
                    table.record(key, info, digests[path], stat_at)
        self.vouched += vouched
        return FileBytes(store, paths), errors


def _regular_file_stat(path: Path) -> Optional[os.stat_result]:
    """The stat of a regular file; None otherwise or when it fails (reading it then tells why)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def _read_error(path: Path, cwd: Path, exc: OSError) -> RunError:
    shown = display_path(path, cwd)
    if isinstance(exc, FileNotFoundError):
        return RunError(shown, "file vanished before it could be read")
    if isinstance(exc, IsADirectoryError):
        return RunError(shown, "is a directory, not a Python file")
    return RunError(shown, f"cannot read: {exc.strerror or exc}", unchecked=True)


@dataclass(frozen=True)
class ReadTree:
    """The run's files, read and keyed as findings show them: those reported on, and the context."""

    cwd: Path
    # Both keyed by their display path; `everything` is the context, then the files reported on.
    by_path: FileBytes[str]
    context_by_path: FileBytes[str]
    everything: FileBytes[str]
    # The joined bytes by real path, as contract learning reads them.
    read: FileBytes[Path]
    read_errors: list[RunError]
    # Each shown path as the configuration's per-file patterns see it.
    config_paths: dict[str, str]
    # Each file's content digest (with the cache on), before the project index adds its view.
    content_digests: dict[str, bytes]
    table: Optional[StatTable]


def read_tree(config: Config, cache_at: Optional[Path], found: Discovered, stat_table: bool, phases: Phases) -> ReadTree:
    """The read phase of a run: every file's bytes (or their promise, where the stat table vouches for
    them), keyed as findings show them. `cache_at`: the cache directory, None with the cache off."""
    cwd = Path.cwd()
    table = StatTable(cache_at) if cache_at is not None and stat_table else None
    reader = Reader(cwd, cache_at is not None, table)
    sources, read_errors = reader.read(found.files, found.scope.real)
    reading = {found.scope.real[path] for path in sources}
    whole = found.whole
    context_files = [path for path in whole.files if whole.real[path] not in reading] if whole else []
    context, _unread = reader.read(context_files, whole.real if whole else {})
    phases.done("read", "%d files read, %d could not be, %d of context; %d of them unchanged since hashed, left unread",
                len(sources), len(read_errors), len(context), reader.vouched)
    as_shown = partial(display_path, cwd=cwd)
    by_path = sources.keyed(as_shown)
    root = config.root.resolve()
    config_paths = {shown: _config_relative(path, root) for shown, path in by_path.paths().items()}
    context_by_path = context.keyed(as_shown)
    config_paths.update({shown: _config_relative(path, root) for shown, path in context_by_path.paths().items()})
    everything = context_by_path.joined(by_path)
    return ReadTree(cwd, by_path, context_by_path, everything, context.joined(sources), read_errors, config_paths,
                 everything.digests() if cache_at is not None else {}, table)


def _config_relative(path: Path, root: Path) -> str:
    """`path` as the configuration's per-file patterns see it: relative to the resolved config root."""
    # What `relative_to(root).as_posix()` gives, by a prefix test on the text: over sglang/srt's
    # 2,141 files `relative_to` took 0.025 s of every run.
    return display_path(path, root)
