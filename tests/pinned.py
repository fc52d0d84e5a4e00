"""A kvlint.toml that pins the write-loc and paged-helper APIs, for test trees that do not define them.

Since issue 15 a fix calling an API the scanned tree lacks is unsafe unless the
contract pins it; tests that exercise the fix machinery on one-file trees pin it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

PINNED_TOML = (
    "[contract]\n"
    'write-loc-module = "sglang.srt.mem_cache.memory_pool"\n'
    'paged-helpers-module = "sglang.srt.mem_cache.layout.paged_view"\n'
)


@pytest.fixture
def pinned_tmp(in_tmp: Path) -> Path:
    """`in_tmp` with the APIs fixes call pinned in its kvlint.toml."""
    (in_tmp / "kvlint.toml").write_text(PINNED_TOML)
    return in_tmp


@pytest.fixture(autouse=True)
def pin_fixes_in_tmp(request: pytest.FixtureRequest) -> None:
    """Imported by a test module: every test there using `in_tmp` gets the pinned kvlint.toml
    (a test writing its own kvlint.toml afterwards still wins)."""
    if "in_tmp" in request.fixturenames:
        root: Path = request.getfixturevalue("in_tmp")
        (root / "kvlint.toml").write_text(PINNED_TOML)
