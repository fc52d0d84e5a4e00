"""How kvlint's write-loc findings on a release before the mark agree with the migration that followed.

sglang 0.5.21 has a `KVWriteLoc` with no mark; 0.5.22 added the mark and marked the writes that
needed it (`KVWriteLoc.for_batch`, `for_layer`, `physical=`). kvlint run on the older release is
judged by what the newer one did, function by function (a class's method, matched by its name):

* precision side, each KV101/KV102/KV103 finding on the old release is
  - marked by the migration: the function gained a marked loc;
  - still flagged: the new release still writes it raw, and kvlint still flags it there (or
    flags the same rule in a function of that file the old release did not have: the write moved);
  - left unflagged: the new release still writes it raw and kvlint no longer flags it there
    (a door taking a tensor by design, a sub-pool never unified): false on the old release;
  - removed: the new release has no such function (its file or the function is gone);
* recall side, each function the migration changed from a raw loc to a marked one is flagged on
  the old release, or missed.

    python bench/migration_agreement.py                    # 0.5.21 -> 0.5.22
    python bench/migration_agreement.py --old 0.5.20 --new 0.5.22

Each release's `sglang/srt` is fetched once (`tests/corpus.py`). It prints the tables and every
finding left unflagged and every function missed; it asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from corpus import CorpusUnavailable, sglang_srt  # noqa: E402

_WRITE_LOC_RULES = ("KV101", "KV102", "KV103")
# A loc built with the batch's mark, as the migration wrote it.
_MARKED = re.compile(r"KVWriteLoc\.for_(?:batch|layer)\(|KVWriteLoc\([^)]*physical\s*=")
_Key = tuple[str, str]  # (class or "", function)


@lru_cache(maxsize=None)
def _functions(path: Path) -> dict[_Key, ast.AST]:
    """Each function of a file by (enclosing class, name); the first of a name wins."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError):
        return {}
    found: dict[_Key, ast.AST] = {}

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.setdefault((owner, child.name), child)
                visit(child, owner)

    visit(tree, "")
    return found


def _enclosing(path: Path, line: int) -> Optional[_Key]:
    """The innermost function of `path` holding `line`."""
    best: Optional[tuple[_Key, ast.AST]] = None
    for key, node in _functions(path).items():
        if node.lineno <= line <= (node.end_lineno or node.lineno):  # type: ignore[attr-defined]
            if best is None or node.lineno > best[1].lineno:  # type: ignore[attr-defined]
                best = (key, node)
    return best[0] if best else None


def _source(path: Path, node: Optional[ast.AST]) -> str:
    return (ast.get_source_segment(path.read_text(errors="replace"), node) or "") if node is not None else ""


def _check(srt: Path) -> list[dict]:
    root = srt.parent.parent
    result = subprocess.run([sys.executable, "-m", "kvlint", "check", "--no-cache", "--format", "json", "sglang/srt"],
                            cwd=root, capture_output=True, text=True)
    if result.returncode not in (0, 1):
        sys.exit(f"bench: kvlint check failed in {root}: {result.stderr.strip()[-500:]}")
    return [f for f in json.loads(result.stdout)["findings"] if f["code"] in _WRITE_LOC_RULES]


def _precision(old: Path, new: Path, old_findings: list[dict], new_findings: list[dict]) -> None:
    root_old, root_new = old.parent.parent, new.parent.parent
    flagged_new = {(f["path"], _enclosing(root_new / f["path"], f["line"]), f["code"]) for f in new_findings}
    moved = {(path, code) for path, key, code in flagged_new if key not in _functions(root_old / path)}
    counts: Counter[tuple[str, str]] = Counter()
    left = []
    for finding in old_findings:
        key = _enclosing(root_old / finding["path"], finding["line"])
        now = _functions(root_new / finding["path"]).get(key) if key else None
        before = _functions(root_old / finding["path"]).get(key) if key else None
        if (finding["path"], key, finding["code"]) in flagged_new or (finding["path"], finding["code"]) in moved:
            verdict = "still flagged"
        elif now is None:
            verdict = "removed"
        elif len(_MARKED.findall(_source(root_new / finding["path"], now))) > len(
                _MARKED.findall(_source(root_old / finding["path"], before))):
            verdict = "marked by the migration"
        else:
            verdict = "left unflagged"
            left.append(finding)
        counts[(finding["code"], verdict)] += 1
    print("findings on the old release, by what the new one did")
    print(f"{'rule':<6} {'marked by the migration':>24} {'still flagged':>14} {'left unflagged':>15} {'removed':>8}")
    for code in _WRITE_LOC_RULES:
        row = [counts[(code, v)] for v in ("marked by the migration", "still flagged", "left unflagged", "removed")]
        if any(row):
            print(f"{code:<6} {row[0]:>24} {row[1]:>14} {row[2]:>15} {row[3]:>8}")
    for finding in left:
        print(f"  left unflagged: {finding['code']} {finding['path']}:{finding['line']}")


def _recall(old: Path, new: Path, old_findings: list[dict]) -> None:
    root_old, root_new = old.parent.parent, new.parent.parent
    flagged = {(f["path"], _enclosing(root_old / f["path"], f["line"])) for f in old_findings}
    changed, missed = 0, []
    for path in sorted(new.rglob("*.py")):
        relative = path.relative_to(root_new).as_posix()
        before_file = root_old / relative
        if not before_file.is_file() or not _MARKED.search(path.read_text(errors="replace")):
            continue
        before_functions = _functions(before_file)
        for key, node in _functions(path).items():
            before = before_functions.get(key)
            if before is None or not _MARKED.search(_source(path, node)):
                continue
            text_before = _source(before_file, before)
            if _MARKED.search(text_before) or "out_cache_loc" not in text_before:
                continue
            changed += 1
            if (relative, key) not in flagged:
                missed.append((relative, key))
    print(f"\nfunctions the migration moved from a raw loc to a marked one: {changed}, "
          f"flagged on the old release: {changed - len(missed)}")
    for relative, (klass, name) in missed:
        print(f"  missed: {relative} {klass + '.' if klass else ''}{name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="0.5.21", help="the release before the mark (default 0.5.21)")
    parser.add_argument("--new", default="0.5.22", help="the release that added it (default 0.5.22)")
    args = parser.parse_args()
    try:
        old, new = sglang_srt(args.old), sglang_srt(args.new)
    except CorpusUnavailable as exc:
        sys.exit(f"bench: {exc}")
    old_findings, new_findings = _check(old), _check(new)
    print(f"sglang {args.old} -> {args.new}: {len(old_findings)} write-loc findings on {args.old}, "
          f"{len(new_findings)} on {args.new}\n")
    _precision(old, new, old_findings, new_findings)
    _recall(old, new, old_findings)


if __name__ == "__main__":
    main()
