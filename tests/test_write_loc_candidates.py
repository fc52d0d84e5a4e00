"""Write-loc rules on CPython's tree, before LibCST: a file holding their trigger words but no door
that may receive a raw or unwrapped loc, and no unmarked write-loc construction, is not parsed for
them; one a helper with a fact makes flaggable still is."""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from kvlint.api.contract import Contract
from kvlint.api.helpers import HelperFact, HelperFacts, ParamDoor, Where
from kvlint.running.checker import check_bytes
from kvlint.running.plan import CheckRequest, helper_words
from kvlint.running.registry import all_rules

WRITE_LOC_RULES = tuple(rule for rule in all_rules() if rule.code in ("KV101", "KV102", "KV103"))
# Every trigger word of the three rules, and no finding: the batch's loc is read in one function and a
# door called in another; the write loc built there is marked; the forwarding door re-wraps its loc.
UNFLAGGABLE = """\
from m import KVWriteLoc, unwrap_write_loc


class Pool:
    def set_kv_buffer(self, layer, loc_info, k, v):
        loc, swa_loc, _ = unwrap_write_loc(loc_info)
        self.inner.set_kv_buffer(layer, KVWriteLoc(swa_loc, id_space=loc_info.id_space), k, v)


def count(forward_batch):
    return forward_batch.out_cache_loc.shape[0]


def write(pool, layer, forward_batch, k, v):
    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)
"""


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What LibCST is asked to parse."""
    sources: list[bytes] = []
    real_parse = cst.parse_module
    monkeypatch.setattr(cst, "parse_module", lambda source: sources.append(source) or real_parse(source))
    return sources


def _codes(source: str, helpers: HelperFacts = HelperFacts()) -> set[str]:
    request = CheckRequest(path="m.py", rules=WRITE_LOC_RULES, contract=Contract(), helpers=helpers)
    return {finding.code for finding in check_bytes(request, source.encode()).outcome.findings}


def test_a_file_no_write_loc_rule_may_flag_is_not_parsed_with_libcst(parsed: list[bytes]) -> None:
    assert _codes(UNFLAGGABLE) == set()
    assert parsed == []


@pytest.mark.parametrize(
    ("code", "written", "spoiled"),
    [
        ("KV101", "KVWriteLoc.for_batch(forward_batch)", "forward_batch.out_cache_loc"),
        ("KV102", "KVWriteLoc(swa_loc, id_space=loc_info.id_space)", "KVWriteLoc(swa_loc)"),
        ("KV103", "KVWriteLoc(swa_loc, id_space=loc_info.id_space)", "swa_loc"),
    ],
)
def test_one_spoiled_call_is_parsed_and_flagged(parsed: list[bytes], code: str, written: str, spoiled: str) -> None:
    assert _codes(UNFLAGGABLE.replace(written, spoiled)) == {code}
    assert len(parsed) == 1


def test_an_alias_of_the_write_loc_class_imported_in_another_function_counts() -> None:
    source = "def setup():\n    from m import KVWriteLoc as WL\n\n\ndef build(x):\n    return WL(x)\n"
    assert _codes(source) == {"KV102"}


def _fact(**known: object) -> HelperFact:
    return HelperFact(helper="Base._loc", defined=Where("eng/base.py", 2, "`_loc`"), **known)  # type: ignore[arg-type]


RAW_RETURN = Where("eng/base.py", 3, "returns `fb.out_cache_loc`")
REACHES_DOOR = ParamDoor("loc", 0, "set_kv_buffer", Where("eng/base.py", 5, "`set_kv_buffer`"), only_doors=True)
# Each door receives the raw loc only through a helper the project index resolved: without the
# helper's name, CPython's tree shows no door next to the batch's loc in these files.
THROUGH_HELPERS = {
    "door-given-a-helper's-raw-return": (
        "class Backend(Base):\n    def write(self, pool, layer, fb, k, v):\n"
        "        pool.set_kv_buffer(layer, self._loc(fb), k, v)\n",
        HelperFacts(by_call={("Backend", ("self", "_loc")): _fact(returns_raw=RAW_RETURN)}),
    ),
    "raw-loc-passed-to-a-helper's-door-parameter": (
        "class Backend(Base):\n    def write(self, layer, fb, k, v):\n"
        "        self._loc(fb.out_cache_loc, layer, k, v)\n",
        HelperFacts(by_call={("Backend", ("self", "_loc")): _fact(params=(REACHES_DOOR,))}),
    ),
    "helper-returning-the-raw-loc-in-its-own-file": (
        "class Base:\n    def _loc(self, fb):\n        return fb.out_cache_loc\n",
        HelperFacts(defined={("Base", "_loc"): _fact(
            returns_raw=RAW_RETURN, returns_only_raw_or_marked=True, callers_only_doors=True
        )}),
    ),
}


@pytest.mark.parametrize(("source", "helpers"), THROUGH_HELPERS.values(), ids=THROUGH_HELPERS.keys())
def test_a_raw_loc_through_a_helper_with_a_fact_is_flagged(source: str, helpers: HelperFacts) -> None:
    (kv101,) = (rule for rule in WRITE_LOC_RULES if rule.code == "KV101")
    names = frozenset(word.decode() for word in helper_words(helpers))
    assert not kv101.may_flag(source.encode(), ast.parse(source), Contract(), frozenset())
    assert kv101.may_flag(source.encode(), ast.parse(source), Contract(), names)
    assert _codes(source, helpers) == {"KV101"}
