"""Each runtime hazard is also a static finding, and kvlint's fix makes it run clean.

The (code, bad, fixed) table drives both sides: kvlint flags every `bad`
snippet with its code and leaves every `fixed` one alone; where kvlint has a
fix, the source it writes runs on a strict token-major pool under
`kv_layout_guard` without a refusal or a layout error.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from shim_hazard_cases import HAZARD_CASES, HazardCase
from test_shim_guard import GEOMETRY, _namespace

import runtime_shim
from kvlint.api.config import Config
from kvlint.api.contract import Contract
from kvlint.learn.contract import learn_contract
from kvlint.running.registry import rule_by_code
from kvlint.testing import fixed_source, run_source
from runtime_shim import TokenMajorMHAPool, kv_layout_guard

SHIM = Path(runtime_shim.__file__).parent
# The shim's own binding methods (`KVIndexTranslator.bind_runner_slots`, `rebind_write_loc`), learned from
# its source as from an engine's tree.
LEARNED = learn_contract(Config(), {path: path.read_bytes() for path in SHIM.glob("*.py")})
CONTRACT = Contract(
    write_loc_module="runtime_shim", paged_helpers_module="runtime_shim.paged", binding_methods=LEARNED.binding_methods
)
PARAMETERS = ("pool", "layer", "forward_batch", "k", "v", "page_size", "H", "D", "translator", "runner_slots")
IMPORTS = (
    "import torch\n"
    "from runtime_shim import ForwardBatch, KVWriteLoc, paged_kv_view, paged_row_view, paged_view\n"
    "from runtime_shim.write_loc import unwrap_write_loc\n\n\n"
)


def as_function(snippet: str) -> str:
    """The snippet as the body of a function, the unit kvlint's data flow reads; it hands back its
    locals, as the runtime twin reads the names the snippet binds."""
    return f"{IMPORTS}def step({', '.join(PARAMETERS)}):\n{textwrap.indent(snippet, '    ')}    return locals()\n"


def findings(source: str, code: str) -> list:
    rule = rule_by_code(code)
    return [f for f in run_source(source, [rule], contract=CONTRACT).findings if f.code == code]


@pytest.mark.parametrize("case", HAZARD_CASES, ids=lambda case: case.id)
def test_kvlint_flags_the_bad_snippet_with_its_code(case: HazardCase) -> None:
    assert findings(as_function(case.bad), case.code)


@pytest.mark.parametrize("case", HAZARD_CASES, ids=lambda case: case.id)
def test_kvlint_leaves_the_fixed_snippet_alone(case: HazardCase) -> None:
    assert not findings(as_function(case.fixed), case.code)


FIXABLE = [case for case in HAZARD_CASES if any(f.fix for f in findings(as_function(case.bad), case.code))]


def test_write_and_stride_hazards_have_fixes() -> None:
    assert {case.code for case in FIXABLE} >= {"KV101", "KV102", "KV201"}


@pytest.mark.parametrize("case", FIXABLE, ids=lambda case: case.id)
def test_kvlint_fix_runs_clean_on_a_strict_token_major_pool_under_the_guard(case: HazardCase) -> None:
    rule = rule_by_code(case.code)
    source = fixed_source(as_function(case.bad), [rule], contract=CONTRACT)
    assert not findings(source, case.code)
    program: dict = {}
    exec(compile(source, "<fixed>", "exec"), program)
    pool = TokenMajorMHAPool(**GEOMETRY)
    names = _namespace(pool)
    with kv_layout_guard(pool) as guard:
        program["step"](**{name: names[name] for name in PARAMETERS})
    assert guard.unmarked_writes == []


@pytest.mark.parametrize("case", FIXABLE, ids=lambda case: case.id)
def test_the_unfixed_snippet_fails_at_run_time(case: HazardCase) -> None:
    program: dict = {}
    exec(compile(as_function(case.bad), "<bad>", "exec"), program)
    pool = TokenMajorMHAPool(**GEOMETRY)
    names = _namespace(pool)
    with pytest.raises((AssertionError, RuntimeError)) as raised:
        with kv_layout_guard(pool):
            program["step"](**{name: names[name] for name in PARAMETERS})
    assert case.code in str(raised.value) or "not marked" in str(raised.value)


def test_the_shims_binding_methods_are_learned_from_its_source() -> None:
    assert LEARNED.batch_mark == "out_cache_loc_id_space"
    assert set(LEARNED.binding_methods) >= {"bind_runner_slots", "rebind_write_loc"}


WRITE_CASES = [case for case in HAZARD_CASES if case.code.startswith("KV1")]


@pytest.mark.parametrize("case", WRITE_CASES, ids=lambda case: case.id)
def test_the_function_kvlint_flags_is_refused_by_a_unified_pool_and_the_one_it_leaves_alone_is_not(
    case: HazardCase,
) -> None:
    """The very functions the static checks read, run: a fixless rule (KV103, KV105) too."""
    for snippet, refused in ((case.bad, True), (case.fixed, False)):
        program: dict = {}
        exec(compile(as_function(snippet), "<snippet>", "exec"), program)
        pool = TokenMajorMHAPool(**GEOMETRY)
        names = _namespace(pool)
        if refused:
            with pytest.raises(AssertionError, match="not marked"):
                program["step"](**{name: names[name] for name in PARAMETERS})
        else:
            program["step"](**{name: names[name] for name in PARAMETERS})
            assert int(pool.raw.count_nonzero()) > 0
