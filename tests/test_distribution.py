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


def test_each_published_hook_runs_as_one_process() -> None:
    """Left to itself, pre-commit splits the staged files over the cores, one kvlint per share, and each
    pays the run's fixed cost (contract, index, KV301's context) again: on two cores, eight backends
    took 1.5-1.8 s as two processes and 1.0-1.2 s as one, which spreads its own work over the cores."""
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8").split("- id: ")[1:]
    assert [hook.split()[0] for hook in hooks] == ["kvlint", "kvlint-fix"]
    assert all("\n  require_serial: true\n" in hook for hook in hooks)
