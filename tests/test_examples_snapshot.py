"""`kvlint check --format json examples/` is pinned whole: every finding, position,
message, fingerprint and fix. A refactor must leave it byte-for-byte the same.

After an intended change in behaviour (or in examples/), regenerate it from the
repository root with::

    kvlint check --no-cache --format json examples/ > tests/snapshots/examples_check.json
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from click.testing import CliRunner

from kvlint.cli import main

REPO = Path(__file__).resolve().parent.parent
SNAPSHOT = REPO / "tests" / "snapshots" / "examples_check.json"


def test_findings_on_examples_match_the_snapshot() -> None:
    with contextlib.chdir(REPO):
        result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", "examples/"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout) == json.loads(SNAPSHOT.read_text(encoding="utf-8"))
