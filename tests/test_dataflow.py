"""Reaching definitions: each test reads what reaches the name passed to `sink(...)`."""

from __future__ import annotations

import textwrap
from typing import Optional

import libcst as cst
import libcst.matchers as m

from kvlint.api.contract import Contract
from kvlint.analysis.closures import closure_reaching
from kvlint.analysis.dataflow import Definition, FunctionFlow, function_flow
from kvlint.analysis.index import module_index
from kvlint.api.rule import FileContext


def _flow_and_sink(source: str) -> tuple[cst.Module, FunctionFlow, cst.Name]:
    module = cst.parse_module(textwrap.dedent(source))
    func = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    sinks = m.findall(func, m.Call(func=m.Name("sink")))
    assert len(sinks) == 1, "a test source has exactly one sink(...)"
    name = sinks[0].args[0].value  # type: ignore[attr-defined]
    assert isinstance(name, cst.Name)
    return module, FunctionFlow(func), name


def reaching(source: str) -> Optional[frozenset[Definition]]:
    _, flow, name = _flow_and_sink(source)
    return flow.reaching(name)


def described(source: str) -> Optional[set[tuple[str, str]]]:
    """(kind, value source or "-") for each reaching definition."""
    module, flow, name = _flow_and_sink(source)
    defs = flow.reaching(name)
    if defs is None:
        return None
    return {(d.kind, "-" if d.value is None else module.code_for_node(d.value)) for d in defs}


def test_plain_assignment_reaches_its_use() -> None:
    assert described("def f(fb):\n    loc = fb.out_cache_loc\n    sink(loc)\n") == {("assign", "fb.out_cache_loc")}


def test_reassignment_kills_the_first_definition() -> None:
    src = "def f(fb, t):\n    loc = fb.out_cache_loc\n    loc = t(loc)\n    sink(loc)\n"
    assert described(src) == {("assign", "t(loc)")}


def test_if_else_branches_merge() -> None:
    src = """
    def f(fb, c):
        if c:
            loc = fb.out_cache_loc
        elif c > 1:
            loc = fb.a
        else:
            loc = fb.b
        sink(loc)
    """
    assert described(src) == {("assign", "fb.out_cache_loc"), ("assign", "fb.a"), ("assign", "fb.b")}


def test_if_without_else_keeps_the_earlier_definition() -> None:
    src = "def f(fb, c):\n    loc = fb.a\n    if c:\n        loc = fb.b\n    sink(loc)\n"
    assert described(src) == {("assign", "fb.a"), ("assign", "fb.b")}


def test_returning_branch_contributes_nothing() -> None:
    src = "def f(fb, c):\n    loc = fb.a\n    if c:\n        loc = fb.b\n        return\n    sink(loc)\n"
    assert described(src) == {("assign", "fb.a")}


def test_augmented_assignment_is_its_own_definition() -> None:
    src = "def f(fb):\n    loc = fb.a\n    loc += 1\n    sink(loc)\n"
    assert described(src) == {("augassign", "-")}


def test_annotated_assignment() -> None:
    assert described("def f(fb):\n    loc: int = fb.a\n    sink(loc)\n") == {("assign", "fb.a")}


def test_tuple_unpacking_records_source_and_index() -> None:
    src = "def f(pool):\n    k, v = pool.get_kv_buffer(0)\n    sink(v)\n"
    (definition,) = reaching(src) or ()
    assert definition.kind == "unpack"
    assert definition.unpack_index == 1
    assert isinstance(definition.source, cst.Call)
    assert definition.value is None


def test_starred_unpacking_has_no_fixed_index_after_the_star() -> None:
    src = "def f(xs):\n    a, *rest, last = xs\n    sink(last)\n"
    (definition,) = reaching(src) or ()
    assert definition.unpack_index is None


def test_for_loop_body_may_not_run() -> None:
    src = "def f(fb, xs):\n    loc = fb.a\n    for x in xs:\n        loc = x\n    sink(loc)\n"
    assert described(src) == {("assign", "fb.a"), ("assign", "x")}


def test_loop_fixpoint_carries_a_late_definition_back_to_the_top() -> None:
    src = """
    def f(fb, xs):
        loc = fb.a
        for x in xs:
            sink(loc)
            loc = x
    """
    assert described(src) == {("assign", "fb.a"), ("assign", "x")}


def test_while_loop_and_break() -> None:
    src = """
    def f(fb, c):
        loc = fb.a
        while c:
            loc = fb.b
            break
        sink(loc)
    """
    assert described(src) == {("assign", "fb.a"), ("assign", "fb.b")}


def test_for_target_is_a_definition() -> None:
    assert described("def f(xs):\n    for x in xs:\n        sink(x)\n") == {("for", "-")}


def test_try_handler_sees_every_state_of_the_body() -> None:
    src = """
    def f(fb, t):
        loc = fb.a
        try:
            loc = t(loc)
            loc = fb.b
        except ValueError:
            sink(loc)
    """
    assert described(src) == {("assign", "fb.a"), ("assign", "t(loc)"), ("assign", "fb.b")}


def test_except_as_name_is_unbound_after_the_handler() -> None:
    src = "def f():\n    try:\n        pass\n    except E as e:\n        pass\n    sink(e)\n"
    assert reaching(src) == frozenset()


def test_with_as_binds_with_its_source() -> None:
    src = "def f(lock):\n    with lock() as held:\n        sink(held)\n"
    assert described(src) == {("with", "-")}


def test_walrus_binds_in_the_function() -> None:
    src = "def f(fb):\n    if (loc := fb.out_cache_loc) is not None:\n        sink(loc)\n"
    assert described(src) == {("walrus", "fb.out_cache_loc")}


def test_comprehension_targets_do_not_leak() -> None:
    src = "def f(fb, xs):\n    loc = fb.a\n    ys = [loc for loc in xs]\n    sink(loc)\n"
    assert described(src) == {("assign", "fb.a")}


def test_del_unbinds() -> None:
    assert reaching("def f(fb):\n    loc = fb.a\n    del loc\n    sink(loc)\n") == frozenset()


def test_parameter_is_a_definition_with_its_param() -> None:
    (definition,) = reaching("def f(loc):\n    sink(loc)\n") or ()
    assert definition.kind == "param"
    assert definition.param is not None and definition.param.name.value == "loc"


def test_global_builtin_and_nonlocal_are_unknown() -> None:
    assert reaching("def f():\n    sink(GLOBAL)\n") is None
    assert reaching("def f():\n    global loc\n    loc = 1\n    sink(loc)\n") is None


def test_nested_def_binds_its_name_but_its_body_is_another_scope() -> None:
    src = "def f():\n    def helper():\n        loc = 1\n    sink(helper)\n"
    assert described(src) == {("def", "-")}
    assert reaching("def f():\n    def helper():\n        loc = 1\n    sink(loc)\n") is None


def test_uses_inside_a_lambda_body_are_unknown() -> None:
    module = cst.parse_module("def f(fb):\n    loc = fb.a\n    g = lambda: loc\n")
    func = module.body[0]
    assert isinstance(func, cst.FunctionDef)
    lam = m.findall(func, m.Lambda())[0]
    assert isinstance(lam, cst.Lambda) and isinstance(lam.body, cst.Name)
    assert FunctionFlow(func).reaching(lam.body) is None


def test_match_capture_is_a_definition() -> None:
    src = "def f(x):\n    match x:\n        case [first, *_]:\n            sink(first)\n"
    assert described(src) == {("other", "-")}


def test_conditional_expression_value_is_kept_whole() -> None:
    src = "def f(fb, layer):\n    loc = fb.a if layer.x else fb.b\n    sink(loc)\n"
    assert described(src) == {("assign", "fb.a if layer.x else fb.b")}


def test_function_flow_is_cached_per_function() -> None:
    module = cst.parse_module("def f(loc):\n    return loc\n")
    func = module.body[0]
    assert isinstance(func, cst.FunctionDef)
    ctx = FileContext("x.py", module, Contract())
    assert function_flow(ctx, func) is function_flow(ctx, func)



def closure_reached(source: str) -> Optional[tuple[set[tuple[str, str]], str]]:
    """What reaches the one `sink(name)`, read in the innermost function holding it (a closure's
    body too), with the name of the function the definitions are in."""
    module = cst.parse_module(textwrap.dedent(source))
    ctx = FileContext("x.py", module, Contract())
    (site,) = module_index(ctx).calls("sink")
    name = site.call.args[0].value
    assert isinstance(name, cst.Name) and site.function is not None
    reached = closure_reaching(ctx, name, site.function)
    if reached is None:
        return None
    defs, owner = reached
    return {(d.kind, "-" if d.value is None else module.code_for_node(d.value)) for d in defs}, owner.name.value


def test_a_closure_variable_is_answered_by_the_function_that_binds_it() -> None:
    src = """
    def outer(pool, k_cache):
        kv = pool.get_kv_buffer(0)
        def inner(x):
            sink(kv)
        return inner
    """
    assert closure_reached(src) == ({("assign", "pool.get_kv_buffer(0)")}, "outer")
    assert closure_reached(src.replace("sink(kv)", "sink(k_cache)")) == ({("param", "-")}, "outer")


def test_a_closure_sees_what_reaches_its_def_statement() -> None:
    src = """
    def outer(pool, flag):
        kv = pool.a
        if flag:
            kv = pool.b
        def inner():
            sink(kv)
        kv = pool.c
        return inner
    """
    assert closure_reached(src) == ({("assign", "pool.a"), ("assign", "pool.b")}, "outer")


def test_closures_nest_and_the_nearest_binding_wins() -> None:
    src = """
    def outer(pool):
        kv = pool.a
        def middle():
            def inner():
                sink(kv)
            return inner
        return middle
    """
    assert closure_reached(src) == ({("assign", "pool.a")}, "outer")
    shadowed = src.replace("        def middle():\n", "        def middle():\n            kv = pool.m\n")
    assert closure_reached(shadowed) == ({("assign", "pool.m")}, "middle")


def test_a_name_the_closure_binds_or_declares_is_not_followed_out() -> None:
    own = "def outer(pool):\n    kv = pool.a\n    def inner():\n        kv = pool.i\n        sink(kv)\n"
    assert closure_reached(own) == ({("assign", "pool.i")}, "inner")
    declared = "def outer(pool):\n    kv = pool.a\n    def inner():\n        global kv\n        sink(kv)\n"
    assert closure_reached(declared) is None
    unbound = "def outer(pool):\n    def inner():\n        sink(kv)\n"
    assert closure_reached(unbound) is None
