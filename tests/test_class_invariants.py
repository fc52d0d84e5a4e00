"""No finding in a branch the class's constructor rules out (`kvlint.analysis.class_invariants`).

The shape is the XPU backend of two engine forks: `__init__` asserts `self.use_mla is False`,
and each forward keeps an MLA branch under `if not self.use_mla: ... else: ...`.
"""

from __future__ import annotations

import pytest

from kvlint.api.types import Applicability
from kvlint.rules.layout.stride_silent_view import StrideSilentView
from kvlint.rules.write_loc.bare_write_loc import BareWriteLoc
from kvlint.testing import fixed_source, run_source

BACKEND = """\
class XPUBackend:
    def __init__(self, runner):
        self.use_mla = runner.use_mla
{init_tail}
    def forward(self, layer, forward_batch, k, v, k_rope):
        pool = forward_batch.token_to_kv_pool
        if {test}:
            pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
        else:
            pool.set_mla_kv_buffer(layer, forward_batch.out_cache_loc, k, k_rope)
            kv_cache = pool.get_key_buffer(layer.layer_id)
            return kv_cache.view(-1, self.page_size, 1, 576)
{methods}"""

ASSERTED = "        assert self.use_mla is False, 'no MLA yet'\n"


def backend(init_tail: str = ASSERTED, test: str = "not self.use_mla", methods: str = "", extra: str = "") -> str:
    return BACKEND.format(init_tail=init_tail, test=test, methods=methods) + extra


def lines(source: str) -> list[tuple[str, str]]:
    """Each finding's code and the call its line holds."""
    outcome = run_source(source, [BareWriteLoc, StrideSilentView])
    text = source.splitlines()
    return sorted((finding.code, text[finding.line - 1].strip().split("(")[0]) for finding in outcome.findings)


LIVE = [("KV101", "pool.set_kv_buffer")]
MLA = [("KV101", "pool.set_mla_kv_buffer"), ("KV201", "return kv_cache.view")]
EVERY = sorted(LIVE + MLA)


@pytest.mark.parametrize("test", [
    "not self.use_mla", "self.use_mla is False", "self.use_mla == False", "self.use_mla is not True",
    "not self.use_mla or self.other", "not (self.use_mla and self.other)",
])
def test_the_branch_the_constructor_rules_out_is_not_reported(test: str) -> None:
    assert lines(backend(test=test)) == LIVE


@pytest.mark.parametrize("init_tail", [
    "        assert not self.use_mla\n",
    "        assert (\n            self.use_mla is False\n        ), 'no MLA yet'\n",
])
def test_each_spelling_of_the_assert_counts(init_tail: str) -> None:
    assert lines(backend(init_tail=init_tail)) == LIVE


@pytest.mark.parametrize("init_tail,methods,extra", [
    # Nothing asserted.
    ("", "", ""),
    # Under a branch of the constructor, the assert need not run.
    ("        if runner.strict:\n            assert self.use_mla is False\n", "", ""),
    # Bound again after the assert.
    (ASSERTED + "        self.use_mla = runner.force_mla\n", "", ""),
    # Bound by another method, or by a name kvlint cannot read.
    (ASSERTED, "\n    def enable_mla(self):\n        self.use_mla = True\n", ""),
    (ASSERTED, "\n    def load(self, name, value):\n        setattr(self, name, value)\n", ""),
    # A subclass in the file may skip the assert or bind the flag after it.
    (ASSERTED, "", "\n\nclass MLABackend(XPUBackend):\n    def __init__(self, runner):\n        self.use_mla = True\n"),
], ids=["none", "conditional", "rebound", "other-method", "setattr", "subclass"])
def test_an_assert_that_may_not_hold_rules_nothing_out(init_tail: str, methods: str, extra: str) -> None:
    assert lines(backend(init_tail=init_tail, methods=methods, extra=extra)) == EVERY


def test_an_assert_of_truth_alone_does_not_decide_an_identity_test() -> None:
    source = backend(init_tail="        assert not self.use_mla\n", test="self.use_mla is False")
    assert lines(source) == EVERY


def test_a_positive_assert_rules_out_the_other_branch() -> None:
    source = backend(init_tail="        assert self.use_mla\n")
    assert lines(source) == MLA


def test_an_undecided_test_rules_nothing_out() -> None:
    assert lines(backend(test="not self.use_mla and self.other")) == EVERY


def test_fix_leaves_the_dead_branch_alone() -> None:
    source = backend()
    fixed = fixed_source(source, [BareWriteLoc], fix=Applicability.UNSAFE)
    assert "set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch)" in fixed
    assert "set_mla_kv_buffer(layer, forward_batch.out_cache_loc" in fixed
