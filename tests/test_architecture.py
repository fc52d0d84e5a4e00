"""The shape docs/ARCHITECTURE.md describes: layers that import one way, small
modules, and function-level imports only where they buy start-up time."""

from __future__ import annotations

import ast
import logging
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("kvlint", "codemods")
MAX_MODULE_LINES = 400


def sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))


def test_import_contracts_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    importlinter_cli = pytest.importorskip("importlinter.cli")
    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(REPO))
    # Its logging set-up (`dictConfig`) disables every logger it does not name, kvlint's too: undone
    # afterwards, or a later test of this process that reads kvlint's log sees nothing.
    for name in list(logging.root.manager.loggerDict):
        logger = logging.getLogger(name)
        monkeypatch.setattr(logger, "disabled", logger.disabled)
    assert importlinter_cli.lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True) == 0


def test_no_module_is_over_the_size_a_reader_can_hold() -> None:
    long = {
        path.relative_to(REPO).as_posix(): count
        for path in sources()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_every_function_level_import_says_why_it_is_not_at_the_top() -> None:
    silent = []
    for path in sources():
        lines = path.read_text(encoding="utf-8").splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for statement in function.body:
                if isinstance(statement, (ast.Import, ast.ImportFrom)) and not _explained(lines, statement.lineno):
                    silent.append(f"{path.relative_to(REPO)}:{statement.lineno}")
            # Imports in branches of the body (the reporters' dispatch) are covered by
            # a comment on the function's first statement.
    assert silent == []


def _explained(lines: list[str], lineno: int) -> bool:
    """A comment on the import line, or on the line above the group of imports it belongs to."""
    index = lineno - 1
    if "#" in lines[index]:
        return True
    while index > 0 and lines[index - 1].strip().startswith(("import ", "from ")):
        index -= 1
    return index > 0 and lines[index - 1].strip().startswith("#")


def test_the_package_layout_matches_the_layers() -> None:
    top = sorted(entry.name for entry in os.scandir(REPO / "kvlint") if not entry.name.startswith("__pycache__"))
    assert top == [
        "__init__.py", "__main__.py", "analysis", "api", "cli.py", "face", "fix", "learn", "live", "processes", "rules",
        "running", "store", "testing.py",
    ]
