"""Every third-party import in the repository is declared in pyproject.toml, in
the extra of the code that imports it.

A package the machine happens to have (numpy beside torch, say) must never make
a run pass: this reads the imports with `ast`, so it fails on a clean checkout
whether or not the package is installed.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))

# Which requirement groups the code under each folder may rely on: the linter
# itself needs only the core; the runtime shim and the examples it runs add the
# `runtime` extra; tests and benches may use everything the dev install brings.
ALLOWED_GROUPS = {
    "kvlint": ("core",),
    "codemods": ("core",),
    "runtime_shim": ("core", "runtime"),
    "examples": ("core", "runtime"),
    "bench": ("core", "runtime", "dev"),
    "tests": ("core", "runtime", "dev"),
}


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


@cache
def declared_groups() -> dict[str, set[str]]:
    project = PYPROJECT["project"]
    groups = {"core": {requirement_name(r) for r in project["dependencies"]}}
    for extra, requirements in project.get("optional-dependencies", {}).items():
        groups[extra] = {requirement_name(r) for r in requirements}
    return groups


def first_party_names() -> set[str]:
    """Top-level names that resolve inside the repository: its packages and, for
    scripts and tests run with their own folder on `sys.path`, every module file."""
    names = {path.name for path in REPO.iterdir() if path.is_dir() and not path.name.startswith(".")}
    for folder in ALLOWED_GROUPS:
        for path in (REPO / folder).rglob("*.py"):
            names.add(path.stem)
            names.add(path.parent.name)
    return names


def imported_top_levels(path: Path) -> dict[str, int]:
    """Absolute imports of `path`, top-level name -> first line that imports it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            found.setdefault(module.split(".")[0], node.lineno)
    return found


@cache
def installed_providers() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def distributions_of(import_name: str) -> set[str]:
    """The distributions that provide `import_name` here (`import importlinter` is
    the `import-linter` distribution); one of that name when none is installed."""
    provided = installed_providers().get(import_name, [])
    names = {name.lower().replace("_", "-") for name in provided}
    return names or {import_name.lower().replace("_", "-")}


def third_party_imports() -> list[tuple[str, int, str]]:
    local = first_party_names()
    stdlib = set(sys.stdlib_module_names)
    found = []
    for folder in ALLOWED_GROUPS:
        for path in sorted((REPO / folder).rglob("*.py")):
            for name, line in imported_top_levels(path).items():
                if name not in stdlib and name not in local and name != "__future__":
                    found.append((path.relative_to(REPO).as_posix(), line, name))
    return found


def test_the_scan_sees_the_imports_it_must_check() -> None:
    names = {name for _, _, name in third_party_imports()}
    # The core, runtime and dev dependencies are each imported somewhere: a scan
    # that found none of them would pass vacuously.
    assert {"libcst", "click", "rich", "torch", "pytest", "hypothesis"} <= names


def undeclared(path: str, line: int, name: str) -> str | None:
    """Why importing `name` at `path:line` is not covered by pyproject.toml, or None."""
    groups = declared_groups()
    allowed = ALLOWED_GROUPS[path.split("/")[0]]
    reachable = set().union(*(groups.get(group, set()) for group in allowed))
    if distributions_of(name) & reachable:
        return None
    return (
        f"{path}:{line} imports `{name}`, which no requirement in {', '.join(allowed)} "
        f"of pyproject.toml provides; declare it in the extra that needs it"
    )


@pytest.mark.parametrize("path,line,name", third_party_imports(), ids=lambda value: str(value))
def test_every_third_party_import_is_declared_where_it_is_used(path: str, line: int, name: str) -> None:
    problem = undeclared(path, line, name)
    assert problem is None, problem


def test_an_undeclared_or_misplaced_import_is_caught() -> None:
    assert undeclared("examples/run_backend.py", 1, "numpy")  # declared nowhere
    assert undeclared("kvlint/cli.py", 1, "torch")  # declared, but only in the runtime extra
    assert undeclared("runtime_shim/pool.py", 1, "torch") is None
