"""Kill rates of the migration's undone sites on a real tree: `kvlint check`, `--prove`, and a spelling check.

Every mutant of `tests/mutation.py` (a factory call back to the raw loc, a
factory call replaced by a call the tree does not define, a constructor's mark
dropped; line numbers kept) is run through the plain check (the raw kinds
only: an unresolved call is no known-bad spelling), `--prove`, and
`bench/ast_baseline.py`'s check with the tree's mark keyword. The table gives,
by how the undone loc reaches its door, how many mutants each check fails on.

    python bench/prove_mutants.py [TREE]     # default: the pinned sglang/srt
"""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from corpus import CorpusUnavailable, sglang_srt  # noqa: E402
from mutation import Checks, mutants  # noqa: E402

RAW_KINDS = ("raw", "unmarked")


def main() -> int:
    try:
        root = Path(sys.argv[1]) if len(sys.argv) > 1 else sglang_srt()
    except CorpusUnavailable as exc:
        sys.exit(f"bench: {exc}")
    with tempfile.TemporaryDirectory() as scratch:
        checks = Checks(root, Path(scratch) / "cache")
        total: Counter[str] = Counter()
        killed: Counter[tuple[str, str]] = Counter()
        raw_total: Counter[str] = Counter()
        for mutant in mutants(checks.sources, checks.contract):
            total[mutant.how] += 1
            killed[(mutant.how, "prove")] += checks.prove_kills(mutant)
            killed[(mutant.how, "spelling")] += checks.spelling_kills(mutant, Path(scratch) / "mutant.py")
            if mutant.kind in RAW_KINDS:
                raw_total[mutant.how] += 1
                killed[(mutant.how, "plain")] += checks.plain_kills(mutant)
            print(f"{mutant.label}", file=sys.stderr)
    print(f"{'how the loc reaches the door':<30}{'mutants':>8}{'--prove':>10}{'plain (raw kinds)':>20}{'spelling':>10}")
    for how in sorted(total):
        plain = f"{killed[(how, 'plain')]}/{raw_total[how]}"
        print(f"{how:<30}{total[how]:>8}{killed[(how, 'prove')]:>10}{plain:>20}{killed[(how, 'spelling')]:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
