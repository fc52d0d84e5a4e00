"""The directory walk: what it takes, what it skips and says so, and in which order."""

from __future__ import annotations

import os
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
