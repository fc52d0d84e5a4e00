"""A run's changes to the result cache, appended to a journal beside the cache file.

A hook run that checked one file changes a few entries of a cache that holds the whole tree's
(sglang/srt: 6 MB); pickling and writing it all again took 0.02-0.03 s of each such run. It
appends the entries it changed instead. Loading reads the cache file, then the journal's
records in order; a run that rewrites the file (the journal outgrew `MAX_SHARE` of it, a file
was deleted, another run replaced it) folds the journal in and removes it.

A record is written with one `write` to a file opened for appending, so records of concurrent
runs do not interleave, and carries its length and digest: one cut short (a killed run, a full
disk) ends the journal there and is never read as anything else. Every entry is keyed by what
it was computed from, so the records of any runs, in any order, never give a wrong answer; a
record lost to a concurrent rewrite costs only a miss.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import struct
from pathlib import Path
from typing import Any, Iterator

# The journal is folded into the cache file once it would be larger than this share of it.
MAX_SHARE = 0.25
_HEADER = struct.Struct("<Q32s")


def journal_of(path: Path) -> Path:
    return path.with_suffix(".journal")


def records(path: Path) -> Iterator[dict[str, Any]]:
    """The records of the journal of the cache file `path`, up to the first that cannot be read."""
    try:
        with open(journal_of(path), "rb") as handle:
            data = handle.read()
    except OSError:
        return
    start = 0
    while start + _HEADER.size <= len(data):
        length, digest = _HEADER.unpack_from(data, start)
        body = data[start + _HEADER.size:start + _HEADER.size + length]
        if len(body) != length or hashlib.sha256(body).digest() != digest:
            return
        try:
            record = pickle.loads(body)
        except Exception:  # noqa: BLE001 - an unreadable record ends the journal
            return
        if not isinstance(record, dict):
            return
        yield record
        start += _HEADER.size + length


def append(path: Path, record: dict[str, Any], cache_size: int) -> bool:
    """Append `record` to the journal of the cache file `path` (of `cache_size` bytes); False,
    writing nothing, when the journal would outgrow its share of the file."""
    body = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    data = _HEADER.pack(len(body), hashlib.sha256(body).digest()) + body
    journal = journal_of(path)
    try:
        size = os.stat(journal).st_size
    except FileNotFoundError:
        size = 0
    if size + len(data) > cache_size * MAX_SHARE:
        return False
    handle = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(handle, data)
    finally:
        os.close(handle)
    return True


def remove(path: Path) -> None:
    try:
        os.unlink(journal_of(path))
    except FileNotFoundError:
        pass
