"""Which rule codes are in force: --select / --ignore with prefixes, per-file ignores."""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Iterable, Sequence

from kvlint.api.config import ConfigError


def matches(code: str, patterns: Iterable[str]) -> bool:
    """A pattern selects a code equal to it or a family it prefixes ("KV2" -> KV201...)."""
    return any(code.startswith(pattern.upper()) for pattern in patterns)


def select_codes(all_codes: Sequence[str], select: Sequence[str], ignore: Sequence[str]) -> list[str]:
    for pattern in (*select, *ignore):
        if not any(code.startswith(pattern.upper()) for code in all_codes):
            raise ConfigError(f"unknown rule code or prefix: {pattern!r} (see `kvlint rules`)")
    chosen = [code for code in all_codes if matches(code, select)]
    return [code for code in chosen if not matches(code, ignore)]


def per_file_ignored(path: str, per_file_ignores: Sequence[tuple[str, Sequence[str]]], codes: Iterable[str]) -> frozenset[str]:
    """The codes per-file-ignores removes for `path` (posix, relative to the config's directory)."""
    ignored: set[str] = set()
    for glob, patterns in per_file_ignores:
        if _glob_matches(path, glob):
            ignored.update(code for code in codes if matches(code, patterns))
    return frozenset(ignored)


def _glob_matches(path: str, glob: str) -> bool:
    if "/" not in glob.rstrip("/"):
        return any(fnmatch(part, glob) for part in path.split("/"))
    glob = glob.lstrip("/")
    return fnmatch(path, glob) or fnmatch(path, glob.rstrip("/") + "/*")
