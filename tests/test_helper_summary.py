"""One file's summary for the project index (`kvlint.analysis.helper_summary`): its walk of a function."""

from __future__ import annotations

import ast
import pickle
from typing import Iterator

from kvlint.analysis.helper_summary import summarize
from kvlint.api.contract import Contract

# A parameter handed to a write door under each kind of node a walk must enter (with, a
# comprehension, an f-string's format spec, a dict with `**`, after a `global`, a match guard),
# and under the two it must not (a lambda, a nested function: their own summaries); a
# function-level import.
DOORS_EVERYWHERE = """\
def store(pool, layer, a, b, c, d, e, f, g):
    global COUNT
    from eng.helpers import helper
    with open(path) as handle:
        pool.set_kv_buffer(layer, a, handle, 2)
        pool.set_kv_buffer(layer, e, handle, 2)
    [pool.set_kv_buffer(layer, b, k, v) for k, v in pairs]
    print(f"{layer!r:>{pool.set_kv_buffer(layer, c, 1, 2)}}")
    merged = {**extra, "x": pool.set_kv_buffer(layer, d, 1, 2)}
    match layer:
        case [first, *rest] if pool.set_kv_buffer(layer, e, 1, 2):
            if first:
                return pool.get_key_buffer(first)
            return rest
    callback = lambda: pool.set_kv_buffer(layer, f, 1, 2)

    def inner():
        pool.set_kv_buffer(layer, g, 1, 2)

    return helper(a)
"""


def test_the_walk_reaches_a_door_call_under_every_kind_of_node_but_nested_functions() -> None:
    summary = summarize(ast.parse(DOORS_EVERYWHERE), "m", False, Contract())
    store = summary.functions["store"]
    assert {use.param for use in store.uses if use.door} == {"a", "b", "c", "d", "e"}
    assert [(ret.kind, ret.line) for ret in store.returns] == [("call", 20), ("other", 14), ("paged", 13)]
    assert summary.imports["helper"] == "eng.helpers.helper"


def _reference_order(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """What a walk over `ast.iter_child_nodes` pops, nested scopes left closed."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def test_the_walk_keeps_the_order_of_a_walk_over_iter_child_nodes() -> None:
    # The order of returns and of parameter uses is part of the summary (the first hit names
    # where a fact comes from), so the walk must visit as the generic one did.
    tree = ast.parse(DOORS_EVERYWHERE)
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    expected_returns = [node.lineno for node in _reference_order(function) if isinstance(node, ast.Return)]
    expected_calls = [
        node.lineno for node in _reference_order(function)
        if isinstance(node, ast.Call) and any(isinstance(arg, ast.Name) and arg.id in {"a", "b", "c", "d", "e"} for arg in node.args)
    ]
    store = summarize(tree, "m", False, Contract()).functions["store"]
    assert [ret.line for ret in store.returns] == expected_returns
    assert [use.line for use in store.uses if use.door or use.callee == ("name", "helper")] == expected_calls


# A helper called in two classes and a module function, straight into a door's loc and not.
CALLS = """\
def loc(fb):
    return helper(fb)


class A:
    def write(self, pool, layer, fb, k, v):
        pool.set_kv_buffer(layer, self._loc(fb), k, v)
        pool.set_kv_buffer(layer, helper(fb), k, v)


class B:
    def write(self, pool, layer, fb, k, v):
        pool.set_kv_buffer(layer, self._loc(fb), k, v)
        return helper(fb)
"""


def test_call_uses_say_whether_every_call_of_a_spelling_is_a_doors_loc() -> None:
    summary = summarize(ast.parse(CALLS), "m", False, Contract())
    assert summary.call_uses == {
        ("", ("name", "helper")): False,
        ("A", ("self", "_loc")): True,
        ("B", ("self", "_loc")): True,
        ("", ("attr", "pool", "set_kv_buffer")): False,
    }


def test_a_files_summary_holds_each_call_spelling_once_also_when_loaded_again() -> None:
    # Loading the cached summaries is most of the index's time in a run after one edit: an
    # equal spelling kept as one object is pickled once and loaded as one object.
    summary = pickle.loads(pickle.dumps(summarize(ast.parse(CALLS), "m", False, Contract())))
    helper = ("name", "helper")
    seen = [spelling for spellings in summary.calls.values() for spelling in spellings if spelling == helper]
    seen += [spelling for _klass, spelling in summary.call_uses if spelling == helper]
    seen += [use.callee for function in summary.all_functions() for use in function.uses if use.callee == helper]
    seen += [ret.callee for function in summary.all_functions() for ret in function.returns if ret.callee == helper]
    assert len(seen) == 9 and all(spelling is seen[0] for spelling in seen)
    empty = [set_ for function in summary.all_functions() for set_ in (function.only_passed, function.page_args) if not set_]
    assert len(empty) == 3 and all(set_ is empty[0] for set_ in empty)
