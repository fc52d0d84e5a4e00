"""The learned contract, cached, so that a run over a tree that did not change does not learn it again.

Learning reads every file of the scope (a bytes test picks the few it parses) and climbs the
directories above the defining files for package and project-root markers (`module_path`). So
a contract is stored under all of that: kvlint's own identity (as the result cache's run keys),
the configuration, the working directory (a learned value names its file relative to it),
every file's path and content digest, and which markers the directories above the files hold.
Any edit anywhere in the scope learns again; what is saved is the 2-3 s a warm run over an
unchanged tree (or a server starting where `kvlint check` ran) would spend.

The contracts of the last few scopes, and what learning read of each piece of a file it parsed
(`kvlint.running.learn_memo`: an edited tree parses only the edited file's pieces again), sit in
one file at the top of the result cache's directory (apart from the run keys' files, which the
result cache prunes): the result cache's key holds the contract, so the contract must be known
before that cache is opened. A file that cannot be read back, or holds anything else, is taken
as empty and rewritten.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Mapping

from kvlint.api.config import Config
from kvlint.api.contract import Contract
from kvlint.running.cache import dataclass_identity, digest, prepare_directory, run_key, write_atomically
from kvlint.running.learn import ROOT_MARKERS, learn_contract
from kvlint.running.learn_memo import recall, used

CONTRACT_FILE = "contract.pickle"
# Scopes kept: a whole-tree run, a server's `include`, a run of a subdirectory or two.
MAX_SCOPES = 4
# What `module_path` looks for in each directory above a file.
_MARKERS = ("__init__.py", *ROOT_MARKERS)


def contract_for(
    config: Config, sources: Mapping[Path, bytes], cache: bool, store: bool = True
) -> tuple[Contract, bool]:
    """The contract learned from `sources`, and whether the cache answered. `cache=False` (`--no-cache`)
    neither reads nor writes; `store=False` (the language server) reads only."""
    if not cache:
        return learn_contract(config, sources), False
    directory = config.root / config.cache_dir
    key = scope_key(config, sources)
    known = _load(directory / CONTRACT_FILE)
    contract = known.contracts.get(key)
    if contract is not None:
        return contract, True
    # Readings are kvlint's own (what it took from a piece): another kvlint's are not used.
    recall(known.readings if known.kvlint == run_key() else {})
    contract = learn_contract(config, sources)
    if store:
        _save(directory, key, contract, known)
    return contract, False


@dataclass
class _Stored:
    contracts: dict[bytes, Contract] = field(default_factory=dict)
    # What learning read of each piece of a file it parsed (`learn_memo`): after an edit, learning
    # parses only the edited file's pieces again.
    readings: dict[Any, Any] = field(default_factory=dict)
    # The kvlint that made them (`run_key()`: its version and own source files).
    kvlint: str = ""


def scope_key(config: Config, sources: Mapping[Path, bytes]) -> bytes:
    hasher = hashlib.sha256(run_key(dataclass_identity(config), str(Path.cwd())).encode())
    directories: set[Path] = set()
    for path in sorted(sources):
        hasher.update(str(path).encode() + b"\0" + digest(sources[path]))
        directory = path.absolute().parent
        while directory not in directories and directory != directory.parent:
            directories.add(directory)
            directory = directory.parent
    for directory in sorted(directories):
        present = "".join("1" if (directory / marker).exists() else "0" for marker in _MARKERS)
        hasher.update(f"{directory}\0{present}".encode())
    return hasher.digest()


def _load(path: Path) -> _Stored:
    try:
        with open(path, "rb") as handle:
            stored = pickle.load(handle)
    except Exception:  # noqa: BLE001 - missing, truncated, corrupt or foreign: nothing known
        return _Stored()
    # Fields are read with a default: a file an older kvlint wrote may lack one.
    contracts, readings = getattr(stored, "contracts", None), getattr(stored, "readings", None)
    if not (isinstance(stored, _Stored) and isinstance(contracts, dict) and isinstance(readings, dict)):
        return _Stored()
    kept = {key: value for key, value in contracts.items() if isinstance(key, bytes) and isinstance(value, Contract)}
    return _Stored(kept, readings, str(getattr(stored, "kvlint", "")))


def _save(directory: Path, key: bytes, contract: Contract, known: _Stored) -> None:
    # The newest last: the oldest scopes drop out first.
    kept = [(old, value) for old, value in known.contracts.items() if old != key][-(MAX_SCOPES - 1):]
    stored = _Stored(dict([*kept, (key, contract)]), used(), run_key())
    try:
        prepare_directory(directory, directory)
        write_atomically(directory / CONTRACT_FILE, pickle.dumps(stored, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        # A read-only checkout or a full disk: the run goes on with the contract it learned.
        return
