"""kvlint reads code as text: it never imports or runs the files it checks,
and configuration values are data, never evaluated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pinned import PINNED_TOML

BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)


def leaves_sentinel(sentinel: Path) -> str:
    """Module-level code that creates `sentinel` the moment it is imported or run."""
    return f"open({str(sentinel)!r}, 'w').close()\n"


def kvlint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvlint", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def booby_trapped(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    package = project / "pkg"
    package.mkdir(parents=True)
    sentinel = tmp_path / "SENTINEL"
    trap = leaves_sentinel(sentinel)
    # The write-loc class is not in this tree: pin it, so the fix is safe (issue 15).
    (project / "kvlint.toml").write_text(PINNED_TOML)
    # Files an importer would touch first: package inits, conftest, setup, __main__.
    for name in ("pkg/__init__.py", "conftest.py", "setup.py", "pkg/__main__.py"):
        (project / name).write_text(trap + BARE)
    (project / "pkg" / "attn.py").write_text(trap + "import pkg\n" + BARE + "if __name__ == '__main__':\n    " + trap)
    return project, sentinel


@pytest.mark.parametrize("command", [["check"], ["check", "--jobs", "2"], ["fix", "--unsafe"], ["contract"]])
def test_checked_code_is_never_imported_or_run(booby_trapped: tuple[Path, Path], command: list[str]) -> None:
    project, sentinel = booby_trapped
    result = kvlint(project, *command, ".")
    assert result.returncode in (0, 1), result.stderr
    assert not sentinel.exists()


def test_fixed_files_really_were_processed(booby_trapped: tuple[Path, Path]) -> None:
    project, sentinel = booby_trapped
    kvlint(project, "fix", ".")
    assert "KVWriteLoc.for_batch(forward_batch)" in (project / "pkg" / "attn.py").read_text()
    assert not sentinel.exists()


@pytest.mark.parametrize(
    "config",
    [
        '[contract]\nwrite-loc-module = "__import__(\'os\').system(\'touch {sentinel}\')"\n',
        '[contract]\nwrite-loc-class = "open(\'{sentinel}\', \'w\')"\n',
        '[contract]\nkv-name-fallback = "{sentinel}"\nloc-attributes = ["__import__(\'os\')"]\n',
        'include = ["$(touch {sentinel})"]\n',
        'exclude = ["`touch {sentinel}`"]\n',
    ],
    ids=["module", "class", "regex_and_list", "include_shell", "exclude_shell"],
)
def test_configuration_values_are_never_evaluated(tmp_path: Path, config: str) -> None:
    sentinel = tmp_path / "SENTINEL"
    project = tmp_path / "project"
    project.mkdir()
    (project / "kvlint.toml").write_text(config.format(sentinel=sentinel))
    (project / "attn.py").write_text(BARE)
    for command in (["check"], ["fix"]):
        result = kvlint(project, *command)
        assert "Traceback" not in result.stderr
        assert result.returncode in (0, 1, 2)
    assert not sentinel.exists()
