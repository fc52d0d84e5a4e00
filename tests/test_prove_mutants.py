"""Sound, and tested as such (issue 20 item 4): every migration site of the real tree undone, one at a time.

Each mutant (`tests/mutation.py`) undoes one site of sglang/srt in memory,
keeping line numbers: a factory call back to the raw loc, a factory call
replaced by a call of a function the tree does not define, a mark dropped.
The plain check must catch every raw one (a raw loc is at most one helper
away from its door); `--prove` must catch every one. The unmutated tree is
loaded once; the raw mutants at a door's own argument are checked together,
one check per file (each must be caught at its own line); any other mutant
re-checks only its own file (and, when it changed what a helper returns, the
files calling that helper), and re-proves with every other file's parse shared.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from mutation import ALIAS, DOOR_ARGUMENT, HELPER_ARGUMENT, HELPER_RETURN, Checks, Mutant, mutants

pytestmark = [pytest.mark.corpus, pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")]


def test_every_undone_migration_site_fails_the_check(srt: Path, tmp_path: Path) -> None:
    checks = Checks(srt, tmp_path / "cache")
    found = list(mutants(checks.sources, checks.contract))
    # Not vacuous: every kind of mutant, and every way a loc reaches a door, is exercised.
    assert {mutant.kind for mutant in found} == {"raw", "unresolved", "unmarked"}
    assert {mutant.how for mutant in found} == {DOOR_ARGUMENT, ALIAS, HELPER_ARGUMENT, HELPER_RETURN}
    raw = [mutant for mutant in found if mutant.kind in ("raw", "unmarked")]
    # A door's own argument: one check per file with all of them, each killed at its own line.
    at_doors: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in raw:
        if mutant.how == DOOR_ARGUMENT:
            at_doors[mutant.path].append(mutant)
    killed = {id(mutant) for path, edits in at_doors.items() for mutant in checks.plain_killed_at_their_lines(path, edits)}
    survivors = [m for m in raw if id(m) not in killed and (m.how == DOOR_ARGUMENT or not checks.plain_kills(m))]
    assert [mutant.label for mutant in survivors] == []
    assert [mutant.label for mutant in found if not checks.prove_kills(mutant)] == []
