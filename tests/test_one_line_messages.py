"""A message is one line in every format: code a rule quotes is joined onto one
line and shortened in the middle, so grep, quickfix lists and CI annotators
never split a finding."""

from __future__ import annotations

from kvlint.api.rule import QUOTE_WIDTH, one_line_code


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
