"""The directory walk: what it takes, what it skips and says so, and in which order."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kvlint.running.discovery import discover


def test_the_walk_takes_python_files_depth_first_and_reports_what_it_skips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("b/z.py", "b/c/y.py", "a.py", ".venv/v.py", "pkg.egg-info/e.py", "node_modules/n.py", "b/notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "b" / "dir.py").mkdir()
    (tmp_path / "b" / "dir.py" / "inner.py").write_text("x = 1\n")
    os.symlink(tmp_path / "b" / "c", tmp_path / "b" / "linked_dir")
    os.symlink(tmp_path / "a.py", tmp_path / "b" / "linked.py")
    os.symlink(tmp_path / "missing.py", tmp_path / "b" / "broken.py")
    monkeypatch.chdir(tmp_path)

    scope = discover([Path(".")], [], tmp_path)

    shown = [path.relative_to(tmp_path).as_posix() for path in scope.files]
    # A link to a file already in scope is dropped: the file is checked once, under its own path.
    assert shown == ["a.py", "b/c/y.py", "b/dir.py/inner.py", "b/z.py"]
    assert scope.skipped == (
        ("b/dir.py", "a directory, not a Python file"),
        ("b/linked_dir", "symlink to a directory, not followed"),
        ("b/broken.py", "broken symlink"),
    )
    assert scope.real[tmp_path / "b" / "c" / "y.py"] == (tmp_path / "b" / "c" / "y.py").resolve()


def test_a_link_to_an_excluded_file_is_taken_with_its_real_path(tmp_path: Path) -> None:
    (tmp_path / "excluded").mkdir()
    (tmp_path / "excluded" / "m.py").write_text("x = 1\n")
    (tmp_path / "view").mkdir()
    os.symlink(tmp_path / "excluded" / "m.py", tmp_path / "view" / "m.py")

    scope = discover([tmp_path], ["excluded"], tmp_path)

    assert scope.files == (tmp_path / "view" / "m.py",)
    assert scope.real[tmp_path / "view" / "m.py"] == (tmp_path / "excluded" / "m.py").resolve()


def test_under_a_linked_directory_each_file_has_the_real_path_of_its_target(tmp_path: Path) -> None:
    (tmp_path / "real" / "sub" / "deep").mkdir(parents=True)
    (tmp_path / "real" / "sub" / "a.py").write_text("x = 1\n")
    (tmp_path / "real" / "sub" / "deep" / "b.py").write_text("x = 1\n")
    os.symlink(tmp_path / "real", tmp_path / "link")

    through_link = discover([tmp_path / "link" / "sub"], [], tmp_path)
    direct = discover([tmp_path / "real" / "sub"], [], tmp_path)

    linked = tmp_path / "link" / "sub"
    target = (tmp_path / "real" / "sub").resolve()
    assert through_link.files == (linked / "a.py", linked / "deep" / "b.py")
    assert dict(through_link.real) == {linked / "a.py": target / "a.py", linked / "deep" / "b.py": target / "deep" / "b.py"}
    assert dict(direct.real) == {path: path.resolve() for path in direct.files}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository with ignore rules at the top and in a subdirectory, and files of each kind."""
    files = {
        ".gitignore": "build/\ngen_*.py\n",
        "pkg/.gitignore": "local.py\n",
        "pkg/a.py": "", "pkg/local.py": "", "pkg/gen_x.py": "", "pkg/deep/b.py": "", "pkg/deep/local.py": "",
        "build/out.py": "", "build/sub/more.py": "", "kept/gen_tracked.py": "", "untracked.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".gitignore", "pkg/.gitignore", "pkg/a.py", "pkg/deep/b.py")
    # Tracked although an ignore rule matches it: git tracks it, so it is checked.
    _git(tmp_path, "add", "-f", "kept/gen_tracked.py")
    return tmp_path


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("start", [".", "pkg"])
def test_files_git_ignores_are_left_out_wherever_the_walk_starts(
    repository: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    monkeypatch.chdir(repository)
    scope = discover([Path(start)], [], repository)
    shown = sorted(path.relative_to(repository).as_posix() for path in scope.files)
    expected = ["kept/gen_tracked.py", "pkg/a.py", "pkg/deep/b.py", "untracked.py"]
    assert shown == [name for name in expected if start == "." or name.startswith(f"{start}/")]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_file_named_explicitly_is_checked_even_if_git_ignores_it(
    repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repository)
    assert [path.name for path in discover([Path("build/out.py")], [], repository).files] == ["out.py"]


def test_outside_a_git_repository_nothing_is_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".gitignore").write_text("*.py\n")
    (tmp_path / "a.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert [path.name for path in discover([Path(".")], [], tmp_path).files] == ["a.py"]
