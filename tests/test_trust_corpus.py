"""Issue 15 on the real tree: judged precision, and every import a fix adds resolves.

Reuses the session's round trip (tests/conftest.py): `first.report` is the cold
whole-tree check, `before`/`after_fix` the tree's files around `kvlint fix --unsafe`.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from corpus import CorpusRoundTrip

pytestmark = [pytest.mark.corpus, pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")]

JUDGED = json.loads((Path(__file__).parent / "fixtures" / "judged" / "sglang_srt.json").read_text())["findings"]
# The tree is `sglang/srt`; its own files import it as `sglang.srt.<path>`.
TREE_PACKAGE = ("sglang", "srt")


@pytest.mark.parametrize("judged", JUDGED, ids=lambda j: f"{j['code']}-{j['path']}:{j['line']}")
def test_judged_finding_is_reported_as_judged(srt_round_trip: CorpusRoundTrip, judged: dict) -> None:
    found = [
        finding
        for finding in srt_round_trip.first.report["findings"]
        if (finding["code"], finding["path"], finding["line"]) == (judged["code"], judged["path"], judged["line"])
    ]
    if not judged["verdict"] and judged.get("still_reported"):
        # A false positive kvlint cannot yet tell apart: recorded so its precision counts it.
        assert len(found) == 1, f"no longer reported ({judged['why']}): drop still_reported from the record"
        return
    if not judged["verdict"]:
        assert found == [], f"judged false ({judged['why']}) but reported: {found[0]['message']}"
        return
    assert len(found) == 1, f"judged true ({judged['why']}) but not reported"
    if "message_has" in judged:
        assert judged["message_has"] in found[0]["message"], (judged["why"], found[0]["message"])
    if "safe_fix" in judged:
        fix = found[0]["fix"]
        is_safe = fix is not None and fix["applicability"] == "safe"
        assert is_safe == judged["safe_fix"], (judged["why"], fix)


# The rules whose every finding on the tree carries a verdict: their precision is the record's.
WHOLLY_JUDGED = ("KV101", "KV102", "KV201", "KV202", "KV301")


def test_every_write_loc_and_layout_finding_on_the_tree_is_judged(srt_round_trip: CorpusRoundTrip) -> None:
    judged = {(j["code"], j["path"], j["line"]) for j in JUDGED}
    unjudged = sorted(
        (finding["code"], finding["path"], finding["line"])
        for finding in srt_round_trip.first.report["findings"]
        if finding["code"] in WHOLLY_JUDGED and (finding["code"], finding["path"], finding["line"]) not in judged
    )
    assert unjudged == [], "read the code around each and record its verdict in tests/fixtures/judged/sglang_srt.json"


def _from_imports(source: bytes) -> set[tuple[str, str]]:
    tree = ast.parse(source)
    return {
        (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
        for alias in node.names
    }


def _resolves(tree: Path, module: str) -> bool:
    parts = tuple(module.split("."))
    if parts[: len(TREE_PACKAGE)] != TREE_PACKAGE:
        return False
    path = tree.joinpath(*parts[len(TREE_PACKAGE) :])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_import_a_fix_adds_resolves_to_a_file_of_the_tree(srt_round_trip: CorpusRoundTrip) -> None:
    rt = srt_round_trip
    added = {
        (name, module, imported)
        for name, after in rt.after_fix.items()
        if after != rt.before[name]
        for module, imported in _from_imports(after) - _from_imports(rt.before[name])
    }
    assert added, "the round trip's fixes added no import: nothing was checked"
    unresolved = sorted(entry for entry in added if not _resolves(rt.tree, entry[1]))
    assert unresolved == []
