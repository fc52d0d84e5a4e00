"""The result cache: what checking a file produced, keyed by everything it depends on.

One cache file per *run key*: kvlint's version and its own source files, the
configuration, the rule selection and options, the contract in force and the
working directory (paths in findings are relative to it). Inside, each file's
entry is keyed by its display path and the hash of its bytes, so editing a
file, changing any input of the run key, or upgrading kvlint never serves a
stale result. Project rules (KV301) are cached by the hashes of the files
whose facts they read, and of the files their findings land in. A file read
only as context (under `--changed`, or by a hook run naming a few files) keeps
its project rules' facts by content, so the next such run does not extract
them again. The selected rules' trigger words are kept too, so a run whose
changed files hold none of them never imports a rule.

A run that changed a few entries appends them to a journal beside the file
(`kvlint.store.journal`); a rewrite goes to a temp file renamed over
the old one, so two concurrent runs each leave a complete cache (the last one
wins). A file that cannot be read back (truncated, corrupt, another format) is
treated as empty and rewritten. Only the newest `MAX_RUN_KEYS` are kept.

What a load makes lives until the run saves: it is unpickled with the garbage
collector paused, then frozen out of its walks (`gc.freeze`) until `save`.
Collections took 1.9 s of a one-file run over sglang/srt before, 0.6 s after.
The project index's summaries (most of the cache's bytes) stay pickled until
the index asks for one, and are written back as they were read.

Nothing here imports LibCST: a warm run must not pay for the parser. Rule
facts stay pickled bytes until a project rule actually has to run again. The
cache directory is trusted like the source tree it sits in (entries are
pickles, as for any tool cache).
"""

from __future__ import annotations

import gc
import hashlib
import os
import pickle
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Optional

from kvlint import __version__
from kvlint.store import journal as cache_journal
from kvlint.processes.collector import collector_paused
from kvlint.api.triggers import Triggers
from kvlint.store.resolved_views import ResolvedViews
from kvlint.api.types import FileOutcome, Finding

# Bumped when the layout of a cache file changes.
FORMAT = 9
MAX_RUN_KEYS = 16
STALE_TEMP_S = 3600
GITIGNORE = "# Automatically created by kvlint.\n*\n"
CACHEDIR_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This directory is kvlint's result cache.\n"

# The fields of `_Contents` keyed by path (or rule code): a journal record holds only the entries a run stored.
_BY_KEY = ("files", "project", "summaries", "words", "context_facts")

# A cached file: its content digest, its outcome (None: no selected rule's trigger
# words, never parsed) and each project rule's facts, still pickled.
FileEntry = tuple[bytes, Optional[FileOutcome], dict[str, bytes]]


@dataclass(frozen=True)
class ProjectEntry:
    """A project rule's findings and the exact inputs they were computed from."""

    inputs: bytes
    # (path, digest) of files a finding sits in: its suppressions were read there.
    also_read: tuple[tuple[str, bytes], ...]
    findings: tuple[Finding, ...]
    # (path, line, column) of the suppressions its findings used: those are not KV001.
    used: tuple[tuple[str, int, int], ...] = ()


@dataclass
class _Contents:
    files: dict[str, FileEntry] = field(default_factory=dict)
    project: dict[str, ProjectEntry] = field(default_factory=dict)
    # What the selected rules look for, so a run need not import them to skip a file.
    triggers: Optional[Triggers] = None
    # The project index: each file's `ast` summary by content, and the helper views with what
    # resolving them read (`kvlint.store.resolved_views`). A summary stays
    # pickled until the index asks for it, so a run after one edit pickles one summary when it
    # saves, not every one (sglang/srt's 308 took 0.19 s to pickle again).
    summaries: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)
    # The names each file calls and defines, by content: the index's name rounds read no bytes.
    words: dict[str, tuple[bytes, Any]] = field(default_factory=dict)
    views: Optional[ResolvedViews] = None
    # Project rules' facts of context files (no per-file rule ran on them), still pickled, by content.
    context_facts: dict[str, tuple[bytes, dict[str, bytes]]] = field(default_factory=dict)
    # The --prove pass's result (certificate, KV104 findings) under the digest of what it read.
    proof: tuple[bytes, Any] = (b"", None)


def digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def dataclass_identity(value: Any) -> tuple[tuple[str, Any], ...]:
    """Every compared field of a dataclass, so a field added later is part of the key by itself."""
    return tuple((item.name, getattr(value, item.name)) for item in fields(value) if item.compare)


def run_key(*parts: object) -> str:
    """A stable name for everything besides a file's bytes that its result depends on."""
    text = repr((FORMAT, __version__, _own_sources_identity(), parts))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _own_sources_identity() -> tuple[tuple[str, int, int], ...]:
    """kvlint's source files by size and mtime: a rule edited in a checkout invalidates."""
    package = Path(__file__).resolve().parent.parent
    found = []
    for directory, _dirs, names in os.walk(package):
        for name in names:
            if name.endswith(".py"):
                info = os.stat(os.path.join(directory, name))
                found.append((os.path.join(directory, name), info.st_size, info.st_mtime_ns))
    return tuple(sorted(found))


class ResultCache:
    """One run key's cached results, loaded at the start of a run and saved at its end."""

    def __init__(self, directory: Path, key: str) -> None:
        self._directory = directory
        self._path = directory / f"v{FORMAT}" / f"{key}.pickle"
        # The file as it was read: still so at `save`, no concurrent run wrote it meanwhile.
        self._read_as = _file_identity(self._path)
        self._contents = _load(self._path)
        # What was loaded lives until the run ends: the collections a run makes (LibCST's trees
        # make many) need not walk it again each time. `save` hands it back to the collector.
        gc.freeze()
        # What this run stored, by field (and key, for the fields keyed by path or code): what `save` appends.
        self._changes: dict[str, Any] = {}
        # The summaries unpickled in this run, by path (each at the content stored for it).
        self._summaries: dict[str, Any] = {}

    def file(self, path: str, content_digest: bytes) -> Optional[FileEntry]:
        entry = self._contents.files.get(path)
        if entry is None or entry[0] != content_digest:
            return None
        return entry

    def store_file(
        self, path: str, content_digest: bytes, outcome: Optional[FileOutcome], facts: dict[str, Any]
    ) -> None:
        pickled = {code: pickle.dumps(fact, protocol=pickle.HIGHEST_PROTOCOL) for code, fact in facts.items()}
        self._keep("files", path, (content_digest, outcome, pickled))

    @property
    def triggers(self) -> Optional[Triggers]:
        return self._contents.triggers

    def store_triggers(self, triggers: Triggers) -> None:
        self._set("triggers", triggers)

    def summary(self, path: str, content_digest: bytes) -> Any:
        """The project index's summary of `path` at this content, or None."""
        entry = self._contents.summaries.get(path)
        if entry is None or entry[0] != content_digest:
            return None
        if path not in self._summaries:
            self._summaries[path] = pickle.loads(entry[1])
        return self._summaries[path]

    def holds_summaries(self) -> bool:
        """Whether an earlier run under this key left the project index's summaries (a warm cache)."""
        return bool(self._contents.summaries)

    def store_summary(self, path: str, content_digest: bytes, summary: Any) -> None:
        self._keep("summaries", path, (content_digest, pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)))
        self._summaries[path] = summary

    def file_words(self, path: str, content_digest: bytes) -> Any:
        """The names `path` calls and defines at this content, or None."""
        entry = self._contents.words.get(path)
        return entry[1] if entry is not None and entry[0] == content_digest else None

    def store_file_words(self, path: str, content_digest: bytes, words: Any) -> None:
        self._keep("words", path, (content_digest, words))

    def project_facts(self, path: str, content_digest: bytes) -> Optional[dict[str, bytes]]:
        """The project rules' facts (pickled) of `path` at this content: from its checked result,
        else from its reading as context; None when neither is cached."""
        entry = self.file(path, content_digest)
        if entry is not None:
            return entry[2]
        context = self._contents.context_facts.get(path)
        return context[1] if context is not None and context[0] == content_digest else None

    def store_context_facts(self, facts: dict[str, tuple[bytes, dict[str, Any]]]) -> None:
        """Project facts of files read as context only, by path: (content digest, facts by rule code)."""
        for path, (content_digest, by_code) in facts.items():
            pickled = {code: pickle.dumps(fact, protocol=pickle.HIGHEST_PROTOCOL) for code, fact in by_code.items()}
            self._keep("context_facts", path, (content_digest, pickled))

    def views(self) -> Optional[ResolvedViews]:
        """The helper views last resolved under this run key, or None."""
        return self._contents.views

    def store_views(self, views: ResolvedViews) -> None:
        self._set("views", views)

    def proof(self, key: bytes) -> Any:
        """The --prove result computed under `key` (the scope's contents and the run's raw findings), or None."""
        stored, proof = self._contents.proof
        return proof if stored == key else None

    def store_proof(self, key: bytes, proof: Any) -> None:
        self._set("proof", (key, proof))

    def project(self, code: str, inputs: bytes, digests: dict[str, bytes]) -> Optional[ProjectEntry]:
        entry = self._contents.project.get(code)
        if entry is None or entry.inputs != inputs:
            return None
        if any(digests.get(path) != known for path, known in entry.also_read):
            return None
        return entry

    def store_project(self, code: str, entry: ProjectEntry) -> None:
        self._keep("project", code, entry)

    def _keep(self, name: str, key: str, entry: Any) -> None:
        """Store `entry` under `key` in the field `name` (one of `_BY_KEY`)."""
        getattr(self._contents, name)[key] = entry
        self._changes.setdefault(name, {})[key] = entry

    def _set(self, name: str, value: Any) -> None:
        setattr(self._contents, name, value)
        self._changes[name] = value

    def save(self, seen: Iterable[str]) -> None:
        """Append what changed to the cache's journal, or write the cache again, merged with what a
        concurrent run wrote meanwhile (`kvlint.store.journal`).

        Entries for files not in this run are kept while the file still exists.
        """
        gc.unfreeze()
        seen = set(seen)
        exists = _Existence(seen)
        gone = [path for path in self._contents.files if not exists(path)]
        if not self._changes and not gone:
            _touch(self._path)
            return
        if not gone and self._read_as is not None and _file_identity(self._path) == self._read_as:
            try:
                appended = cache_journal.append(self._path, self._changes, self._read_as[1])
            except OSError:
                return
            if appended:
                # The file's time orders the run keys `_prune` keeps.
                _touch(self._path)
                return
        # Reading the file again (0.4 s over sglang/srt) only when another run replaced it.
        merged = _load(self._path) if _file_identity(self._path) != self._read_as else _Contents()
        for path, entry in merged.files.items():
            if path not in seen and path not in self._contents.files and exists(path):
                self._contents.files[path] = entry
        self._contents.files = {path: entry for path, entry in self._contents.files.items() if exists(path)}
        for name in ("summaries", "words"):
            by_content: dict[str, tuple[bytes, Any]] = getattr(self._contents, name)
            for path, entry in getattr(merged, name).items():
                by_content.setdefault(path, entry)
            setattr(self._contents, name, {path: entry for path, entry in by_content.items() if exists(path)})
        for path, facts in merged.context_facts.items():
            self._contents.context_facts.setdefault(path, facts)
        self._contents.context_facts = {
            path: entry for path, entry in self._contents.context_facts.items() if exists(path)
        }
        try:
            prepare_directory(self._directory, self._path.parent)
            write_atomically(self._path, pickle.dumps(self._contents, protocol=pickle.HIGHEST_PROTOCOL))
            cache_journal.remove(self._path)
            _prune(self._path.parent)
        except OSError:
            # A read-only checkout or a full disk: the run's result stands, only the cache is lost.
            return


class _Existence:
    """Whether a path is still there: one of the run's own (`seen`), else a name its
    directory lists. The entries of a tree's files are keyed by the same few thousand paths four
    times over: a hook run checking one file made some 7,000 `exists` calls over sglang/srt, where
    its directories are listed in a hundred. A wrong answer only keeps or drops an entry."""

    def __init__(self, seen: Iterable[str]) -> None:
        self._seen = set(seen)
        self._listed: dict[str, frozenset[str]] = {}

    def __call__(self, path: str) -> bool:
        if path in self._seen:
            return True
        directory, name = os.path.split(path)
        if directory not in self._listed:
            try:
                self._listed[directory] = frozenset(os.listdir(directory or "."))
            except OSError:
                self._listed[directory] = frozenset()
        return name in self._listed[directory]


def project_inputs(code: str, digests: Iterable[tuple[str, bytes]]) -> bytes:
    """The identity of a project rule's inputs: which files gave it facts, and the facts' digests."""
    hasher = hashlib.sha256(code.encode())
    for path, content_digest in sorted(digests):
        hasher.update(path.encode() + b"\0" + content_digest)
    return hasher.digest()


def _file_identity(path: Path) -> Optional[tuple[int, int, int]]:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def _load(path: Path) -> _Contents:
    # Unpickling a tree's cache makes a few hundred thousand objects and no garbage; with the
    # collector on, every few hundred of them start a collection that walks those made so far
    # (0.4 s of a one-file run over sglang/srt, opening and saving the cache).
    try:
        with collector_paused(), open(path, "rb") as handle:
            contents = pickle.load(handle)
    except FileNotFoundError:
        return _Contents()
    except Exception:  # noqa: BLE001 - any unreadable cache is an empty one
        return _Contents()
    if not isinstance(contents, _Contents):
        return _Contents()
    with collector_paused():
        for record in cache_journal.records(path):
            for name, value in record.items():
                if name in _BY_KEY:
                    getattr(contents, name).update(value)
                else:
                    setattr(contents, name, value)
    return contents


def prepare_directory(root: Path, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
        marker = root / name
        if not marker.exists():
            write_atomically(marker, text.encode())


def write_atomically(path: Path, data: bytes) -> None:
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        # mkstemp creates owner-only files; a cache is as readable as the tree it sits in.
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _prune(directory: Path) -> None:
    """Keep the most recently used run keys: old selections and configs do not pile up.

    A temp file older than `STALE_TEMP_S` belongs to a run that was killed mid-write.
    """
    entries = []
    for entry in os.scandir(directory):
        if entry.name.endswith(".tmp"):
            try:
                if time.time() - entry.stat().st_mtime > STALE_TEMP_S:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass
        elif entry.name.endswith(".pickle"):
            try:
                entries.append((entry.stat().st_mtime_ns, entry.path))
            except FileNotFoundError:
                continue
    for _mtime, path in sorted(entries, reverse=True)[MAX_RUN_KEYS:]:
        try:
            os.unlink(path)
            cache_journal.remove(Path(path))
        except FileNotFoundError:
            continue
