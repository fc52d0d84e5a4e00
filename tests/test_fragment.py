"""Parsing only the functions the rules can flag changes no finding."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from corpus import CorpusCheck, CorpusRoundTrip

from kvlint.running.checker import CheckRequest, check_bytes
from kvlint.api.contract import Contract
from kvlint.running.fragment import skeleton
from kvlint.api.triggers import encode_groups, passes
from kvlint.running.registry import all_rules
from kvlint.api.rule import Rule
from kvlint.api.types import Applicability

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FILE_RULES = tuple(rule for rule in all_rules() if issubclass(rule, Rule))
GROUPS = [encode_groups(rule.trigger_groups(Contract())) for rule in FILE_RULES]
WRITE_DOOR = [encode_groups([["set_kv_buffer"]])]


def cut(source: str, groups: list = WRITE_DOOR) -> str:
    data = source.encode()
    result = skeleton(data, ast.parse(data), groups)
    return source if result is None else result.decode()


def test_wanted_function_is_kept_whole_and_others_become_headers() -> None:
    source = (
        "import torch\n"
        "from m import KVWriteLoc\n"
        "\n"
        "\n"
        "class Backend:\n"
        '    """Docs."""\n'
        "\n"
        "    page_size = 16\n"
        "\n"
        "    @staticmethod\n"
        "    def helper(x):\n"
        "        y = x + 1\n"
        "        return y\n"
        "\n"
        "    def forward(self, pool, layer, fb, k, v):\n"
        "        pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
        + "".join(f"\ndef filler_{i}(a):\n    return a * {i}\n" for i in range(12))
    )
    result = cut(source)
    assert result.count("\n") == source.count("\n")
    lines = result.splitlines()
    assert lines[:2] == ["import torch", "from m import KVWriteLoc"]
    assert lines[4] == "class Backend:" and lines[5] == "" and lines[7] == ""
    assert lines[9:13] == ["    @staticmethod", "    def helper(x):", "        pass", ""]
    assert lines[14:16] == source.splitlines()[14:16]
    assert "def filler_3(a):\n    pass" in result
    compile(result, "cut.py", "exec")


@pytest.mark.parametrize(
    "source",
    [
        "def stub(a) -> int: ...\n",
        "@overload\ndef f(\n    a: int,\n) -> int: ...\n",
        "class Empty: pass\n",
        "class A:\n    @contextmanager\n    def m(self):\n        @contextmanager\n        def inner():\n            yield\n        return inner\n",
        "class Outer:\n    class Inner:\n        x = 1\n\n        def m(self):\n            return 1\n",
    ],
)
def test_awkward_definitions_stay_valid_python(source: str) -> None:
    padded = source + "".join(f"\ndef filler_{i}(a):\n    return a * {i}\n" for i in range(20))
    result = cut(padded)
    assert result.count("\n") == padded.count("\n")
    compile(result, "cut.py", "exec")


def test_a_word_imported_under_an_alias_counts_as_the_word() -> None:
    groups = [encode_groups([["KVWriteLoc"]])]
    source = "from m import KVWriteLoc as WL\n\n\ndef write(loc):\n    return WL(loc)\n" + "".join(
        f"\ndef filler_{i}(a):\n    return a * {i}\n" for i in range(20)
    )
    assert "    return WL(loc)" in cut(source, groups)


def test_a_file_that_is_mostly_wanted_is_parsed_whole() -> None:
    data = b"def f(pool, layer, loc, k, v):\n    pool.set_kv_buffer(layer, loc, k, v)\n"
    assert skeleton(data, ast.parse(data), WRITE_DOOR) is None


def _same_findings_as_whole_file(path: Path, display: str) -> None:
    data = path.read_bytes()
    rules = tuple(rule for rule, groups in zip(FILE_RULES, GROUPS) if passes(data, groups))
    if not rules:
        return
    request = CheckRequest(path=display, rules=rules, contract=Contract())
    # Reporting unused suppressions reads every comment, so it parses the file whole.
    whole = CheckRequest(path=display, rules=rules, contract=Contract(), report_unused_ignores=True)
    whole_findings = tuple(f for f in check_bytes(whole, data).outcome.findings if f.code != "KV001")
    assert check_bytes(request, data).outcome.findings == whole_findings, display


def test_examples_give_the_same_findings_cut_or_whole() -> None:
    for path in sorted(EXAMPLES.rglob("*.py")):
        _same_findings_as_whole_file(path, path.relative_to(EXAMPLES).as_posix())


@pytest.mark.corpus
def test_real_corpus_gives_the_same_findings_cut_or_whole(
    srt_round_trip: CorpusRoundTrip, srt_whole_check: CorpusCheck
) -> None:
    # The session's cold check cuts files; --report-unused-ignores parses every
    # file whole, for the file rules and the project rule alike. Its own KV001
    # findings are the only difference allowed.
    # The whole check's configuration lies outside the tree, which makes its folder the project root:
    # fingerprints name files relative to the root, so they differ; nothing else may.
    cut = [{**f, "fingerprint": ""} for f in srt_round_trip.first.report["findings"]]
    whole = [{**f, "fingerprint": ""} for f in srt_whole_check.report["findings"] if f["code"] != "KV001"]
    assert len(cut) > 100
    assert whole == cut


def _kv301_findings(root: Path, fix: Applicability | None) -> list:
    from kvlint.api.config import Config
    from kvlint.running.engine import RunOptions, run

    options = RunOptions(paths=(root,), select=("KV301",), strict_tbo=True, fix=fix, jobs=2)
    return run(Config(), options).findings


def test_project_rule_gives_the_same_findings_from_cut_files() -> None:
    assert _kv301_findings(EXAMPLES, None)
    assert _kv301_findings(EXAMPLES, None) == _kv301_findings(EXAMPLES, Applicability.UNSAFE)


def test_a_fix_parses_the_whole_file_only_where_the_skeleton_shows_something_to_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import libcst as cst

    parsed: list[bytes] = []
    real_parse = cst.parse_module

    def recording_parse(source: bytes) -> cst.Module:
        parsed.append(source)
        return real_parse(source)

    monkeypatch.setattr(cst, "parse_module", recording_parse)
    filler = "".join(f"def filler_{i}(a):\n    return a * {i}\n\n\n" for i in range(20))
    # KV101 may flag it (a door and the batch's loc in one function), and finds nothing to fix.
    unflagged = "def write(pool, fb, loc):\n    n = fb.out_cache_loc\n    pool.set_kv_buffer(layer, loc, k, v)\n\n\n"
    bare = "def write(pool, fb):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n\n\n"
    request = CheckRequest(path="m.py", rules=FILE_RULES, contract=Contract(), fix=Applicability.UNSAFE)

    clean = (filler + unflagged).encode()
    assert check_bytes(request, clean).outcome.fixed_source is None
    assert len(parsed) == 1 and b"return a * 3" not in parsed[0]

    parsed.clear()
    flagged = (filler + bare).encode()
    fixed = check_bytes(request, flagged).outcome.fixed_source
    assert fixed is not None and b"return a * 3" in fixed and b"for_batch" in fixed
    assert b"return a * 3" not in parsed[0] and parsed[1] == flagged
