"""A message is one line in every format: code a rule quotes is joined onto one
line and shortened in the middle, so grep, quickfix lists and CI annotators
never split a finding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CorpusRoundTrip

from kvlint.api.rule import QUOTE_WIDTH, one_line_code
from kvlint.cli import main

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "examples_check.json"

# As in sglang 0.5.23's hardware_backend/npu/attention/ascend_backend.py: one call over three lines.
# A paging view handed on (KV201) and one copied at once (KV202's alone), each over three lines.
MULTI_LINE_CALL = (
    "class AscendBackend:\n"
    "    def forward_decode(self, q, layer, forward_batch):\n"
    "        k_cache = self.token_to_kv_pool.get_key_buffer(\n"
    "            layer.layer_id\n"
    "        ).view(-1, self.page_size, layer.tp_k_head_num * layer.qk_head_dim)\n"
    "        v_cache = self.token_to_kv_pool.get_value_buffer(\n"
    "            layer.layer_id\n"
    "        ).view(-1, self.page_size, layer.tp_v_head_num * layer.v_head_dim).contiguous()\n"
    "        return k_cache, v_cache\n"
)
# Where each finding starts, and the excerpt line the text report shows under it.
STARTS = {
    "KV201": (3, "    3 |         k_cache = self.token_to_kv_pool.get_key_buffer("),
    "KV202": (6, "    6 |         v_cache = self.token_to_kv_pool.get_value_buffer("),
}


def test_a_call_broken_over_lines_is_joined_without_spaces_inside_brackets() -> None:
    assert one_line_code("pool.get_key_buffer(\n    layer.layer_id\n).view(-1, ps)") == (
        "pool.get_key_buffer(layer.layer_id).view(-1, ps)"
    )


def test_a_method_chain_broken_before_the_dot_is_joined() -> None:
    assert one_line_code("pool.get_key_buffer(layer.layer_id)\n    .view(-1, ps)") == (
        "pool.get_key_buffer(layer.layer_id).view(-1, ps)"
    )


def test_arguments_on_their_own_lines_keep_one_space_after_each_comma() -> None:
    assert one_line_code("f(\n    a,\n    b,\n)") == "f(a, b,)"


def test_a_backslash_continuation_is_joined() -> None:
    assert one_line_code("a + \\\n    b") == "a + b"


def test_code_within_the_width_is_kept_as_written() -> None:
    code = "forward_batch.out_cache_loc[:  n]"
    assert one_line_code(code) == code


def test_long_code_keeps_its_head_and_tail_around_an_ellipsis() -> None:
    code = "self.token_to_kv_pool.get_key_buffer(layer.layer_id).view(" + ", ".join(["x"] * 40) + ", tail)"
    quoted = one_line_code(code)
    assert len(quoted) == QUOTE_WIDTH
    head, tail = quoted.split("…")
    assert code.startswith(head) and code.endswith(tail)
    assert head.startswith("self.token_to_kv_pool.get_key_buffer(") and tail.endswith(", tail)")


def split_apart(findings: list[dict]) -> list[dict]:
    """The findings whose message, reach reason or fix description spans lines."""
    return [f for f in findings if "\n" in f["message"] or "\n" in f["reach_reason"]
            or (f["fix"] and "\n" in f["fix"]["description"])]


def check(*args: str) -> str:
    return CliRunner().invoke(main, ["check", "--no-cache", *args, "."], catch_exceptions=False).stdout


@pytest.fixture
def multi_line_tree(in_tmp: Path) -> list[dict]:
    """The tree with the multi-line call, and its findings as `--format json` gives them."""
    (in_tmp / "backend.py").write_text(MULTI_LINE_CALL)
    findings: list[dict] = json.loads(check("--format", "json"))["findings"]
    assert sorted(finding["code"] for finding in findings) == ["KV201", "KV202"]
    return findings


def test_a_multi_line_call_is_quoted_on_one_line_in_json(multi_line_tree: list[dict]) -> None:
    messages = {finding["code"]: finding["message"] for finding in multi_line_tree}
    assert all("\n" not in message for message in messages.values())
    assert "`self.token_to_kv_pool.get_key_buffer(layer.layer_id).view(...)`" in messages["KV201"]
    assert "`self.token_to_kv_pool.get_value_buffer(l…" in messages["KV202"]


def test_the_text_report_gives_each_finding_one_line_and_keeps_the_source_excerpt(
    multi_line_tree: list[dict],
) -> None:
    lines = check().splitlines()
    for finding in multi_line_tree:
        # The reach is a tag after the message, on the same line; its reason a line of its own below.
        line, excerpt = STARTS[finding["code"]]
        header = f"backend.py:{line}:19: {finding['code']} {finding['name']} {finding['message']} [{finding['reach']}]"
        assert header in lines
        assert lines[lines.index(header) + 1] == excerpt


def test_each_github_annotation_is_one_line(multi_line_tree: list[dict]) -> None:
    lines = check("--format", "github").splitlines()
    assert len(lines) == len(multi_line_tree)
    for line, finding in zip(lines, multi_line_tree):
        assert "%0A" not in line
        assert line.endswith(f"::{finding['code']} {finding['message']}")


def test_each_sarif_message_is_the_one_line_message(multi_line_tree: list[dict]) -> None:
    results = json.loads(check("--format", "sarif"))["runs"][0]["results"]
    assert [result["message"]["text"] for result in results] == [finding["message"] for finding in multi_line_tree]


def test_every_message_on_the_examples_is_one_line() -> None:
    # The snapshot is the live `kvlint check examples/` (test_examples_snapshot pins it).
    report = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert report["findings"]
    assert split_apart(report["findings"]) == []


@pytest.mark.corpus
def test_every_message_on_the_real_tree_is_one_line(srt_round_trip: CorpusRoundTrip) -> None:
    report = srt_round_trip.first.report
    assert split_apart(report["findings"]) == []
    assert all("\n" not in error["message"] for error in report["errors"])
    # The multi-line `.view(...).contiguous()` chains of the Ascend backend, quoted on one line.
    ascend = [
        f["message"] for f in report["findings"]
        if f["path"].endswith("npu/attention/ascend_backend.py") and f["code"] == "KV202"
    ]
    assert any("`self.token_to_kv_pool.get_key_buffer(" in message and "…" in message for message in ascend)


def test_the_json_message_is_the_rules_message_and_the_reach_has_fields_of_its_own(multi_line_tree: list[dict]) -> None:
    for finding in multi_line_tree:
        assert finding["reach"] == "unknown" and finding["reach_reason"] == "the tree states no unified-memory gate"
        assert "unknown" not in finding["message"] and "unified-memory" not in finding["message"]
