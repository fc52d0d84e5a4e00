"""The distribution name is this project's own: `kvlint` on PyPI is another tool."""

from __future__ import annotations

import tomllib
from pathlib import Path

from click.testing import CliRunner

from kvlint import DISTRIBUTION, __version__
from kvlint.cli import main

REPO = Path(__file__).resolve().parent.parent


def test_pyproject_publishes_under_the_distribution_name() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION != "kvlint"
    assert project["version"] == __version__


def test_version_names_the_distribution_so_two_kvlints_can_be_told_apart() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"kvlint {__version__} (distribution {DISTRIBUTION})"


def test_readme_says_which_tool_this_is() -> None:
    assert f"**`{DISTRIBUTION}`** distribution" in (REPO / "README.md").read_text(encoding="utf-8")
