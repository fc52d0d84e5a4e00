"""The learned contract, cached, so that a run over a tree whose edits learning does not read
does not learn it again.

Learning reads every file of the scope (a bytes test picks the few it parses) and climbs the
directories above the defining files for package and project-root markers (`module_path`). A
contract is kept under its frame (`frame_key`: kvlint's own identity, as the result cache's run
keys, the configuration, the working directory, since a learned value names its file relative
to it, every file's path and the markers above the files), with every file's digest and what
learning asked of each file (`kvlint.learn.scope.Asked`). Another frame learns again.
In the same frame, the files whose digests changed are asked learning's questions again: when
each answers as before (an edit to a backend's body, a comment, lines moving in a file whose
lines the contract does not name), the contract is kept and stored under the new digests, in
well under a tenth of a second on sglang/srt; else learning runs again, and what it read of
each piece of a file it parsed (`kvlint.learn.memo`, by content) is reused, so only the
edited file's pieces are parsed again.

A contract learned with the installed engine's source as context (`kvlint.learn.installed_engine`)
is kept with the engine's identity (its location, how it was found, its version): a run locates
the engine again (a few stats and one directory listing) and keeps the contract while the same
engine is found, reading none of its files; another engine, or none, learns again.

The last few learnings (a whole tree, a subdirectory, or two states of a tree switched back and
forth) sit in one file at the top of the result cache's directory (apart from the run keys'
files, which the result cache prunes): the result cache's key holds the contract, so the
contract must be known before that cache is opened. The pieces' readings sit in another, read
before the edited files are asked (their unchanged methods are not parsed again). A file that
cannot be read back, or holds anything else, is taken as empty and rewritten.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from kvlint.api.paths import ROOT_MARKERS
from kvlint.api.config import Config, configured_contract
from kvlint.api.contract import Contract
from kvlint.store.result_cache import dataclass_identity, digest, prepare_directory, run_key, write_atomically
from kvlint.learn.installed_engine import engine_package, locate_engine
from kvlint.learn.memo import recall, used
from kvlint.learn.scope import Asked

CONTRACT_FILE = "contract.pickle"
READINGS_FILE = "contract-readings.pickle"
# Learnings kept: a whole-tree run, a server's `include`, a run of a subdirectory, or the states
# of a tree switched back and forth.
MAX_LEARNINGS = 4
# What `module_path` looks for in each directory above a file.
_MARKERS = ("__init__.py", *ROOT_MARKERS)
_DIGEST_SIZE = len(digest(b""))


def contract_for(
    config: Config,
    sources: Mapping[Path, bytes],
    directory: Optional[Path],
    store: bool = True,
    file_digests: Optional[Mapping[Path, bytes]] = None,
) -> tuple[Contract, bool]:
    """The contract learned from `sources`, and whether the cache in `directory` answered.
    `directory=None` (`--no-cache`) neither reads nor writes; `store=False` (the language server)
    reads only; `file_digests`: each source's `digest`, where the caller has them (the result
    cache needs them too)."""
    if directory is None:
        # Imported here, as below: the learners are most of a warm run's imports, and the cache answers it.
        from kvlint.learn.contract import learn_contract

        return learn_contract(config, sources), False
    paths = sorted(sources)
    frame = frame_key(config, paths)
    digests = b"".join(file_digests[path] if file_digests else digest(sources[path]) for path in paths)
    known = _load(directory / CONTRACT_FILE)
    # The newest first; the tree as one of them left it before any other.
    candidates = sorted(
        (learning for learning in reversed(known.learnings) if learning.frame == frame),
        key=lambda learning: learning.digests != digests,
    )
    engines = _EnginesNow(config, paths)
    remembered = False
    for learning in candidates:
        if not remembered and learning.digests != digests:
            # What learning read of the pieces of a file is remembered: an edited file's unchanged methods
            # are not parsed. Loaded only once a file changed: the readings name the learners' functions.
            recall(_load_readings(directory / READINGS_FILE))
            remembered = True
        if engines.as_before(learning) and _answers_as_before(learning, paths, sources, digests):
            if store and learning.digests != digests:
                _save(directory, replace(learning, digests=digests), known, replacing=learning)
            return learning.contract, True
    # Imported here: only a run the cache cannot answer learns (the learners took 35 ms of every warm run).
    from kvlint.learn.contract import learn_asking

    if not remembered:
        recall(_load_readings(directory / READINGS_FILE))
    contract, asked = learn_asking(config, sources)
    if store:
        learning = _Learning(frame, digests, pickle.dumps(asked, protocol=pickle.HIGHEST_PROTOCOL), asked.engine, contract)
        _save(directory, learning, known)
        _save_readings(directory)
    return contract, False


@dataclass(frozen=True)
class _Learning:
    """A scope's contract, the digests of the files it was learned from (in path order, one
    after the other) and what learning asked of them."""

    frame: bytes
    digests: bytes
    # What learning asked, pickled apart: its questions name the learners' functions, and loading
    # them imports every learner (a third of a warm run), which only a changed file needs.
    asked_pickled: bytes
    # The identity of the installed engine learning read as context (`Asked.engine`), "" where none.
    engine: str
    contract: Contract

    def asked(self) -> Asked:
        asked: Asked = pickle.loads(self.asked_pickled)
        return asked


def _answers_as_before(learning: _Learning, paths: list[Path], sources: Mapping[Path, bytes], digests: bytes) -> bool:
    """Whether every file that changed since `learning` answers learning's questions as before."""
    if learning.digests == digests:
        return True
    asked = learning.asked()
    for number, path in enumerate(paths):
        span = slice(number * _DIGEST_SIZE, (number + 1) * _DIGEST_SIZE)
        if learning.digests[span] != digests[span] and not asked.answers_as_before(number, sources[path]):
            return False
    return True


class _EnginesNow:
    """The installed engine a learning read as context, located again (never read): a tree that
    builds on the engine keeps its contract while the same engine, at the same version, is found
    the same way."""

    def __init__(self, config: Config, paths: list[Path]) -> None:
        self._config = config
        self._paths = paths
        self._identity: Optional[str] = None

    def as_before(self, learning: _Learning) -> bool:
        engine = learning.engine
        if not engine:
            return True
        if self._identity is None:
            # As learning looked for it: under the configured contract, the learned values not yet known.
            configured = configured_contract(self._config)
            package = engine_package(self._config, configured)
            self._identity = locate_engine(package, self._config, configured, self._paths).identity()
        return self._identity == engine


def frame_key(config: Config, paths: list[Path]) -> bytes:
    """Everything a contract is learned from besides the files' bytes: kvlint's identity, the
    configuration, the working directory, the files' paths (sorted) and the markers above them."""
    hasher = hashlib.sha256(run_key(dataclass_identity(config), str(Path.cwd())).encode())
    # Strings, not `Path`s, and each directory once: this runs before every check, over every file.
    shown = [str(path) for path in paths]
    hasher.update("\0".join(shown).encode())
    directories: set[str] = set()
    for parent in {os.path.dirname(path) for path in shown}:
        directory = os.path.abspath(parent)
        while directory not in directories and directory != os.path.dirname(directory):
            directories.add(directory)
            directory = os.path.dirname(directory)
    # `os.access`, not `os.path.exists`: most markers are absent, and `exists` pays for the
    # exception a missing file raises, over a thousand times a run on sglang/srt.
    for directory in sorted(directories):
        present = "".join("1" if os.access(os.path.join(directory, marker), os.F_OK) else "0" for marker in _MARKERS)
        hasher.update(f"{directory}\0{present}".encode())
    return hasher.digest()


@dataclass
class _Stored:
    """What the contract file holds."""

    # The newest last: a tree switched back and forth (a stash, a branch) finds each state's.
    learnings: list[_Learning] = field(default_factory=list)


def _load(path: Path) -> _Stored:
    try:
        with open(path, "rb") as handle:
            stored = pickle.load(handle)
    except Exception:  # noqa: BLE001 - missing, truncated, corrupt, foreign or naming code that is gone
        return _Stored()
    # Read with a default: a file an older kvlint wrote may lack the field.
    learnings = getattr(stored, "learnings", None)
    if not (isinstance(stored, _Stored) and isinstance(learnings, list)):
        return _Stored()
    return _Stored([learning for learning in learnings if isinstance(learning, _Learning)])


def _save(directory: Path, learning: _Learning, known: _Stored, replacing: Optional[_Learning] = None) -> None:
    """`learning` as the newest, in place of the one it was kept from; the oldest drop out first."""
    kept = [old for old in known.learnings if old is not replacing][-(MAX_LEARNINGS - 1):]
    _write(directory, CONTRACT_FILE, _Stored([*kept, learning]))


@dataclass
class _Readings:
    """What the last learning read of each piece of a file it parsed (`learn_memo`), and the
    kvlint that read it (`run_key()`: its version and own source files)."""

    readings: dict[Any, Any]
    kvlint: str


def _load_readings(path: Path) -> dict[Any, Any]:
    """The readings this kvlint made: another kvlint's may be shaped otherwise."""
    try:
        with open(path, "rb") as handle:
            stored = pickle.load(handle)
    except Exception:  # noqa: BLE001 - missing, truncated, corrupt, foreign or naming code that is gone
        return {}
    readings = getattr(stored, "readings", None)
    if isinstance(stored, _Readings) and isinstance(readings, dict) and getattr(stored, "kvlint", "") == run_key():
        return readings
    return {}


def _save_readings(directory: Path) -> None:
    _write(directory, READINGS_FILE, _Readings(used(), run_key()))


def _write(directory: Path, name: str, stored: object) -> None:
    try:
        prepare_directory(directory, directory)
        write_atomically(directory / name, pickle.dumps(stored, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        # A read-only checkout or a full disk: the run goes on with the contract it learned.
        return
