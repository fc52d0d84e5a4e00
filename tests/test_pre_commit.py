"""A real pre-commit run of the hooks this repository publishes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pinned import PINNED_TOML

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("pre-commit") is None, reason="pre-commit is not installed")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True, capture_output=True)


def _hook_repository(into: Path) -> str:
    """This checkout as pre-commit sees a hook repository: its files (uncommitted
    edits included, as `pre-commit try-repo` would take them) committed in a
    repository of their own. Returns the commit."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    _git(into, "init", "-q")
    _git(into, "add", ".")
    _git(into, "commit", "-q", "-m", "hooks under test")
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=into, capture_output=True, text=True, check=True).stdout.strip()


def test_hooks_fail_on_a_hazard_and_pass_on_clean_code(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    rev = _hook_repository(hooks)
    project = tmp_path / "project"
    project.mkdir()
    (project / "bad.py").write_text("def f(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n")
    (project / "good.py").write_text("def f(pool, layer, loc, k, v):\n    pool.set_kv_buffer(layer, loc, k, v)\n")
    # The write-loc class is not in this tree: pin it, so the hook's fix is safe (issue 15).
    (project / "kvlint.toml").write_text(PINNED_TOML)
    # One hook environment for every run below (try-repo would build one per run).
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {hooks}\n    rev: {rev}\n    hooks:\n      - id: kvlint\n      - id: kvlint-fix\n"
    )
    _git(project, "init", "-q")
    _git(project, "add", ".")

    def run_hook(hook: str, *files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pre-commit", "run", hook, "--files", *files],
            cwd=project, capture_output=True, text=True, timeout=900,
            env={**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")},
        )

    bad = run_hook("kvlint", "bad.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout and "KV101" in bad.stdout

    good = run_hook("kvlint", "good.py")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout

    fixed = run_hook("kvlint-fix", "bad.py")
    assert "KVWriteLoc.for_batch(fb)" in (project / "bad.py").read_text(), fixed.stdout
    assert run_hook("kvlint", "bad.py").returncode == 0
