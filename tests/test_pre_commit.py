"""A real pre-commit run of the hooks this repository publishes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from pinned import PINNED_TOML

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("pre-commit") is None, reason="pre-commit is not installed")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True, capture_output=True)


def _try_repo(project: Path, hook: str, *files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["pre-commit", "try-repo", str(REPO), hook, "--files", *files],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_hooks_fail_on_a_hazard_and_pass_on_clean_code(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.py").write_text("def f(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n")
    (project / "good.py").write_text("def f(pool, layer, loc, k, v):\n    pool.set_kv_buffer(layer, loc, k, v)\n")
    # The write-loc class is not in this tree: pin it, so the hook's fix is safe (issue 15).
    (project / "kvlint.toml").write_text(PINNED_TOML)
    _git(project, "init", "-q")
    _git(project, "add", ".")

    bad = _try_repo(project, "kvlint", "bad.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout and "KV101" in bad.stdout

    good = _try_repo(project, "kvlint", "good.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout

    fixed = _try_repo(project, "kvlint-fix", "bad.py")
    assert "KVWriteLoc.for_batch(fb)" in (project / "bad.py").read_text(), fixed.stdout
    assert _try_repo(project, "kvlint", "bad.py").returncode == 0
