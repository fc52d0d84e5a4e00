"""Which files are unchanged since kvlint last hashed them, told by `os.stat` alone.

Every cache kvlint keeps (results, contract, project index, KV301's facts) keys a file by the
digest of its bytes, so a run the caches answer needs each file's digest and nothing else of
it. Reading and hashing the 2,141 files of sglang/srt took about 0.13 s of every run, a
pre-commit run on one file included. The table kept in the cache directory maps each file's
real path to its stat signature (mtime, ctime, size, inode, device) and the digest of the
bytes read under it: a file whose signature is unchanged has that digest, unread.

A file can change without changing its signature when the change lands within the
timestamp granularity of the moment it was hashed, at the same size ("racily clean", as git
calls it). So a digest is kept only for a file whose last change (mtime or ctime, whichever
is later) is `RACY_NS` older than the moment before its stat: any later write moves one of
them past what the table holds. Setting the mtime back (`touch -d`, a checkout keeping
times) moves the ctime, which is part of the signature too.

The table is written atomically like the other cache files, and only when it changed. A
table that cannot be read back (missing, truncated, another format) is empty: every file is
hashed again and the table rewritten.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Optional

from kvlint.store.result_cache import prepare_directory, write_atomically

STAT_FILE = "stats.pickle"
# Bumped when the layout of the table changes.
FORMAT = 1
# A file changed this recently when it was hashed may change again unseen (see the docstring).
RACY_NS = 2_000_000_000

# st_mtime_ns, st_ctime_ns, st_size, st_ino, st_dev.
Signature = tuple[int, int, int, int, int]


def signature(info: os.stat_result) -> Signature:
    return (info.st_mtime_ns, info.st_ctime_ns, info.st_size, info.st_ino, info.st_dev)


class StatTable:
    """Real path -> (signature, digest), loaded from the cache directory and saved at the end of a run."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._entries = _load(directory / STAT_FILE)
        self._seen: set[str] = set()
        self._dirty = False

    def digest(self, real: str, info: os.stat_result) -> Optional[bytes]:
        """The digest of `real`'s bytes if its signature is the one they were hashed under."""
        self._seen.add(real)
        entry = self._entries.get(real)
        return entry[1] if entry is not None and entry[0] == signature(info) else None

    def record(self, real: str, info: os.stat_result, content_digest: bytes, stat_at_ns: int) -> None:
        """`real` hashed to `content_digest` under `info`, taken at `stat_at_ns` (`time.time_ns()` just
        before the stat); kept only when the file's last change is comfortably older than that."""
        self._seen.add(real)
        if max(info.st_mtime_ns, info.st_ctime_ns) > stat_at_ns - RACY_NS:
            if self._entries.pop(real, None) is not None:
                self._dirty = True
            return
        entry = (signature(info), content_digest)
        if self._entries.get(real) != entry:
            self._entries[real] = entry
            self._dirty = True

    def save(self) -> None:
        """Write the table if it changed; entries of files this run did not stat are kept while they exist."""
        if not self._dirty:
            return
        kept = {real: entry for real, entry in self._entries.items() if real in self._seen or os.path.exists(real)}
        try:
            prepare_directory(self._directory, self._directory)
            write_atomically(self._directory / STAT_FILE, pickle.dumps((FORMAT, kept), protocol=pickle.HIGHEST_PROTOCOL))
        except OSError:
            # A read-only checkout or a full disk: the next run hashes the files again.
            return
        self._dirty = False


def _load(path: Path) -> dict[str, tuple[Signature, bytes]]:
    try:
        with open(path, "rb") as handle:
            stored = pickle.load(handle)
    except Exception:  # noqa: BLE001 - missing, truncated, corrupt or foreign: an empty table
        return {}
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == FORMAT and isinstance(stored[1], dict)):
        return {}
    return {real: entry for real, entry in stored[1].items() if _well_formed(real, entry)}


def _well_formed(real: object, entry: object) -> bool:
    return (
        isinstance(real, str) and isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], bytes)
        and isinstance(entry[0], tuple) and len(entry[0]) == 5 and all(type(part) is int for part in entry[0])
    )
