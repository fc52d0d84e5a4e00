"""The installed engine a tree builds on: located without importing it, read as learning's context.

Code built on the engine outside its tree (a plugin, a downstream serving layer, a private model
repository) imports the engine without containing it: its write-loc class, write doors, pools and
gate live in the installed engine. Where the scanned tree imports the engine's package but does
not define the write-loc class, `kvlint.learn.contract` reads the installed engine's source after
the tree's files, as context: never reported, never fixed.

Where the engine is looked for, the first place that has it winning:

1. `engine-path` under `[tool.kvlint]`: a setting is the user's word, and the only way to correct
   a search that finds the wrong copy (kvlint's own environment holding another release than the
   project runs), so it is not a last resort but the first answer.
2. kvlint's own interpreter: `importlib.util.find_spec` of the top-level name locates the package
   on `sys.path` (editable installs' finders included) without executing it.
3. The project's environment: an active `VIRTUAL_ENV`, else the nearest `.venv` above the scanned
   files (pre-commit runs kvlint in an environment of its own, which does not hold the engine):
   its `lib/python*/site-packages` or `Lib/site-packages`.

Only the runtime package holding the write-loc module is read (`sglang/srt`: 2,028 of the 0.5.22
wheel's 4,297 Python files; the rest are kernels, multimodal generation, benchmarks and tests,
which define no pool). An engine is known by its location, how it was found and its version
(`InstalledEngine.identity`): the version is read from the name of the `*.dist-info` folder beside
the package (`sglang-0.5.22.dist-info`; no file is opened), so a warm run compares identities and
reads nothing of the engine. Where no dist-info sits beside it (a source checkout, an editable
install) the version is the package's `__version__` read statically, and each source file's size
and mtime join the identity: such a copy changes without its version changing.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from kvlint.api.config import Config
from kvlint.api.contract import Contract

# What `identity` says when the engine was looked for and not found.
NOT_FOUND = "not found"


@dataclass(frozen=True)
class InstalledEngine:
    """An installed copy of the engine's package."""

    package: str
    # The package's folder (`.../site-packages/sglang`).
    folder: Path
    # The folder whose Python files are read: the runtime package (`sglang/srt`), else `folder`.
    runtime: Path
    version: str
    # Where it was found: "engine-path in <config>", "kvlint's interpreter", "VIRTUAL_ENV", ".venv at <dir>".
    found_by: str
    # Without a dist-info: each source file's size and mtime, digested ("" with one).
    stamp: str

    def describe(self) -> str:
        """`sglang 0.5.22 at /.../site-packages/sglang`, as `kvlint contract` names it."""
        return f"{self.package} {self.version or '(version unknown)'} at {self.folder}"

    def identity(self) -> str:
        return "\0".join((self.package, str(self.folder), self.found_by, self.version, self.stamp))

    def shown(self, path: Path) -> str:
        """An engine file as the contract's sources name it: `engine sglang/srt/mem_cache/memory_pool.py`."""
        return f"engine {self.package}/{Path(os.path.relpath(path, self.folder)).as_posix()}"

    def sources(self) -> dict[Path, bytes]:
        """The runtime package's Python files, by path; one that cannot be read is left out."""
        found: dict[Path, bytes] = {}
        for path in _python_files(self.runtime):
            try:
                found[path] = path.read_bytes()
            except OSError:
                continue
        return found


@dataclass(frozen=True)
class Search:
    """The engine found, or None, and where kvlint looked (for `kvlint contract` and messages)."""

    package: str
    engine: Optional[InstalledEngine]
    looked: tuple[str, ...]

    def identity(self) -> str:
        return self.engine.identity() if self.engine is not None else f"{self.package}\0{NOT_FOUND}"

    def describe(self) -> str:
        if self.engine is not None:
            return f"{self.engine.describe()}, found through {self.engine.found_by}"
        return f"no installed {self.package} found; looked in {', '.join(self.looked)}"


def engine_package(config: Config, contract: Contract) -> str:
    """The engine's top-level package: `engine-path`'s folder name, else the write-loc module's first part."""
    if config.engine_path:
        return config.engine_folder.name
    return contract.write_loc_module.split(".", 1)[0]


def locate_engine(package: str, config: Config, contract: Contract, near: Sequence[Path]) -> Search:
    """The installed `package`, looked for in `engine-path`, kvlint's interpreter, then the project's
    environment (`near`: the scanned files, whose nearest `.venv` above is the project's)."""
    looked: list[str] = []
    candidates: list[tuple[str, Optional[Path]]] = []
    if config.engine_path:
        candidates.append((f"engine-path in {config.path}", config.engine_folder))
    candidates.append(("kvlint's interpreter", _from_interpreter(package)))
    virtual_env = os.environ.get("VIRTUAL_ENV")
    if virtual_env:
        candidates.append((f"VIRTUAL_ENV {virtual_env}", _in_environment(Path(virtual_env), package)))
    venv = _nearest_venv(near)
    if venv is not None:
        candidates.append((f".venv at {venv.parent}", _in_environment(venv, package)))
    for found_by, folder in candidates:
        looked.append(found_by)
        if folder is not None and folder.is_dir():
            return Search(package, _engine_at(package, folder.resolve(), found_by, contract), tuple(looked))
    if not virtual_env:
        looked.append("no VIRTUAL_ENV")
    if venv is None:
        looked.append("no .venv above the scanned files")
    return Search(package, None, tuple(looked))


def _engine_at(package: str, folder: Path, found_by: str, contract: Contract) -> InstalledEngine:
    parts = contract.write_loc_module.split(".")
    runtime = folder / parts[1] if len(parts) > 2 and parts[0] == package else folder
    if not runtime.is_dir():
        runtime = folder
    version = _dist_info_version(folder.parent, package)
    if version is not None:
        return InstalledEngine(package, folder, runtime, version, found_by, "")
    return InstalledEngine(package, folder, runtime, _static_version(folder), found_by, _stat_stamp(runtime))


def _from_interpreter(package: str) -> Optional[Path]:
    """Where kvlint's interpreter would import `package` from. `find_spec` of a top-level name
    runs the finders, never the package's code."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _in_environment(environment: Path, package: str) -> Optional[Path]:
    """`package` in a virtual environment's site-packages (POSIX and Windows layouts); this
    interpreter's Python version first where the environment holds several."""
    own = f"python{sys.version_info.major}.{sys.version_info.minor}"
    layouts = sorted(environment.glob("lib/python*/site-packages"), key=lambda site: (site.parent.name != own, str(site)))
    for site in (*layouts, environment / "Lib" / "site-packages"):
        if (site / package).is_dir():
            return site / package
    return None


def _nearest_venv(near: Sequence[Path]) -> Optional[Path]:
    """The `.venv` folder in the directory of the scanned files or the nearest one above it."""
    if not near:
        return None
    directory = os.path.commonpath([os.path.dirname(os.path.abspath(path)) for path in near])
    while True:
        candidate = os.path.join(directory, ".venv")
        if os.path.isdir(candidate):
            return Path(candidate)
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info_version(site: Path, package: str) -> Optional[str]:
    """The version in the name of the one `<package>-<version>.dist-info` folder beside the package
    (a wheel's installer names it so); None where there is none, or several (a stale leftover)."""
    try:
        names = [entry.name for entry in os.scandir(site) if entry.name.endswith(".dist-info")]
    except OSError:
        return None
    versions = [
        name[: -len(".dist-info")].split("-", 1)[1]
        for name in names
        if "-" in name and _normalized(name.split("-", 1)[0]) == _normalized(package)
    ]
    return versions[0] if len(versions) == 1 else None


_VERSION_FILES = ("version.py", "_version.py", "__init__.py")


def _static_version(folder: Path) -> str:
    """The package's `__version__ = "..."`, read as text from its version module or `__init__.py`."""
    for name in _VERSION_FILES:
        try:
            tree = ast.parse((folder / name).read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(target, ast.Name) and target.id == "__version__" for target in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                return node.value.value
    return ""


def _stat_stamp(runtime: Path) -> str:
    """A digest of every source file's path, size and mtime: stats, no reads."""
    hasher = hashlib.blake2b(digest_size=16)
    for path in _python_files(runtime):
        try:
            info = os.stat(path)
        except OSError:
            continue
        hasher.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return hasher.hexdigest()


def _python_files(root: Path) -> list[Path]:
    """The `.py` files under `root`, in path order; links to directories are not followed."""
    found: list[Path] = []
    for directory, directories, names in os.walk(root):
        directories[:] = sorted(name for name in directories if name != "__pycache__")
        found.extend(Path(directory, name) for name in sorted(names) if name.endswith(".py"))
    return sorted(found)
