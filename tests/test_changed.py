"""`--changed` picks a file by its real path, however the tree is reached: git names files under
its real top level, the walk under the path it was given."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main

BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_changed_finds_the_changed_files_of_a_tree_reached_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = tmp_path / "repository"
    (repository / "pkg").mkdir(parents=True)
    (repository / "kvlint.toml").write_text("")
    for name in ("pkg/kept.py", "pkg/edited.py"):
        (repository / name).write_text(BARE)
    _git(repository, "init", "-q")
    _git(repository, "add", ".")
    _git(repository, "commit", "-q", "-m", "root")
    (repository / "pkg" / "edited.py").write_text(BARE + "# edited\n")
    (repository / "pkg" / "new.py").write_text(BARE)
    os.symlink(repository, tmp_path / "link")
    monkeypatch.chdir(repository)

    through_link = str(tmp_path / "link" / "pkg")
    result = CliRunner().invoke(main, ["check", "--changed", "--format", "json", through_link], catch_exceptions=False)

    report = json.loads(result.stdout)
    assert result.exit_code == 1 and report["files_in_scope"] == 2
    assert sorted(finding["path"] for finding in report["findings"]) == [
        f"{through_link}/edited.py", f"{through_link}/new.py"
    ]
