"""The README's console examples are what kvlint prints: each `$ kvlint ...` line is run over a copy
of the examples (with the repository's configuration) and its output compared with the lines below
it. A line `...` stands for any lines; a line ending in ` ...` for the rest of that line."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")


def _sessions() -> list[tuple[str, list[str]]]:
    """Each `$ kvlint ...` command of a ```console block, with the output lines shown under it."""
    sessions: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", README, flags=re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                sessions.append((line[2:], []))
            else:
                sessions[-1][1].append(line)
    return sessions


def _pattern(shown: list[str]) -> str:
    parts = []
    for line in shown:
        if line == "...":
            parts.append(r"(?:.*\n)*?")
        elif line.endswith(" ..."):
            parts.append(re.escape(line[:-3]) + r".*\n")
        else:
            parts.append(re.escape(line) + r"\n")
    return "".join(parts)


SESSIONS = _sessions()


def test_the_readme_shows_console_examples() -> None:
    assert len(SESSIONS) >= 3 and all(command.startswith("kvlint ") for command, _ in SESSIONS)


@pytest.fixture(scope="module")
def examples_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    shutil.copytree(REPO / "examples", root / "examples", ignore=shutil.ignore_patterns("__pycache__", ".kvlint_cache"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


@pytest.mark.parametrize("command, shown", SESSIONS, ids=[command for command, _ in SESSIONS])
def test_console_example_matches_real_output(examples_copy: Path, command: str, shown: list[str]) -> None:
    args = shlex.split(command)[1:]
    result = subprocess.run(
        [sys.executable, "-m", "kvlint", *args], cwd=examples_copy, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=300,
    )
    assert re.fullmatch(_pattern(shown), result.stdout), f"README shows:\n{chr(10).join(shown)}\n\nkvlint printed:\n{result.stdout}"
