"""A file is shown relative to the working directory, as `Path.relative_to` would show it; and
relative to the configuration's root, as its per-file patterns see it, the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.paths import display_path
from kvlint.running.reading import _config_relative


@pytest.mark.parametrize(
    ("path", "cwd"),
    [
        ("/a/b/c.py", "/a"),
        ("/a/b/c.py", "/a/b/c.py"),
        ("/a/bc/c.py", "/a/b"),
        ("/x.py", "/"),
        ("/elsewhere/x.py", "/a"),
        ("rel/x.py", "/a"),
    ],
)
def test_shown_as_relative_to_shows_it(path: str, cwd: str) -> None:
    try:
        expected = Path(path).relative_to(Path(cwd)).as_posix()
    except ValueError:
        expected = Path(path).as_posix()
    assert display_path(Path(path), Path(cwd)) == expected
    assert _config_relative(Path(path), Path(cwd)) == expected
