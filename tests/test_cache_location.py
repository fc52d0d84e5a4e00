"""Where kvlint keeps its caches: under the project's root, never in the folder it was started from."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main

BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)
# What marks the project's root: its configuration or a repository.
PROJECT_KINDS = {
    "kvlint.toml": lambda project: (project / "kvlint.toml").write_text(""),
    "pyproject.toml": lambda project: (project / "pyproject.toml").write_text("[tool.kvlint]\n"),
    "git repository": lambda project: (project / ".git").mkdir(),
}
COMMANDS = {"contract": ["contract"], "check": ["check"], "fix": ["fix"], "fix --diff": ["fix", "--diff"]}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def everything_under(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): b"" if path.is_dir() else path.read_bytes() for path in folder.rglob("*")}


def make_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tmp_path/project`, with a finding, and the working directory its parent `tmp_path`."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.py").write_text(BARE)
    monkeypatch.chdir(tmp_path)
    return project


@pytest.fixture(params=PROJECT_KINDS.values(), ids=PROJECT_KINDS.keys())
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    project = make_project(tmp_path, monkeypatch)
    request.param(project)
    return project


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_run_from_the_parent_folder_keeps_its_cache_in_the_project(project: Path, command: list[str]) -> None:
    assert invoke(*command, "project")[0] in (0, 1)
    assert not (project.parent / ".kvlint_cache").exists()
    assert (project / ".kvlint_cache" / ".gitignore").is_file()


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_tree_nothing_marks_run_from_beside_it_keeps_its_cache_in_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    project = make_project(tmp_path, monkeypatch)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert invoke(*command, "../project")[0] in (0, 1)
    assert [path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob(".kvlint_cache")] == ["project/.kvlint_cache"]


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_no_cache_from_outside_the_project_writes_nothing_anywhere(
    project: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    # `fix` rewrites the file it fixes: leave it nothing to rewrite, the cache is what is watched.
    (project / "bad.py").write_text(BARE if command != ["fix"] else "x = 1\n")
    before = everything_under(project.parent)
    assert invoke(*command, "--no-cache", "../project")[0] in (0, 1)
    assert everything_under(project.parent) == before


def test_contract_without_the_cache_prints_what_the_cached_contract_does(project: Path) -> None:
    uncached = invoke("contract", "--no-cache", "project")
    assert uncached[0] == 0 and "write-loc-class" in uncached[1]
    assert not (project / ".kvlint_cache").exists()
    assert invoke("contract", "project") == uncached  # learned, then stored
    assert invoke("contract", "project") == uncached  # from the cache
