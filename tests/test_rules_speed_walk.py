"""The shared walks the rules stand on read the same nodes, in the same order, as LibCST's own machinery.

`code_children` reads dataclass fields directly, `build_index` skips names, and the data flow's
expression walker walks `code_children` instead of LibCST's visitor; each is checked here against
what LibCST itself says, on source with every kind of code in every kind of place.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Optional

import libcst as cst
import libcst.matchers as m
import pytest

from kvlint.analysis.dataflow import FunctionFlow
from kvlint.analysis.index import build_index
from kvlint.analysis.walk import code_children
from code_nodes import code_nodes

SOURCE = textwrap.dedent(
    '''\
    """Doc."""
    from __future__ import annotations
    import os.path as osp, sys
    from .pkg import (a as b, c)

    @decorate(make(1), key=value())
    class Outer(Base[gen()], metaclass=meta()):
        x: int = field(default=lambda: inner())

        @staticmethod
        def method(self, p: hint() = default(), *args, q=kw(), **kwargs) -> ret():
            y = [call(v) for v in items() if test(v)]
            z = {k: f(k) for k in keys()}
            s = {g(t) for t in h()}
            w = (i(u) for u in j())
            if (n := first()) and second(n):
                other = n[idx():upper():step()] if cond() else alt()
            elif more():
                pass
            else:
                del x[del_index()]
            for t in loop():
                obj.attr.meth(t, *star(), **dstar())
            while spin():
                break
            try:
                risky()
            except (Err(), Other) as err:
                handle(err)
            else:
                fine()
            finally:
                done()
            with ctx() as cm, ctx2():
                use(cm)
            async def nested():
                await later(-neg(), not pos(), a + b(), c < d() <= e())
            class Inner:
                def deep(self):
                    return f"{fmt(1)!r:>{width()}}" "tail" + yielded()
            assert check(), message()
            raise Boom() from cause()
            match subject():
                case [1, *rest] if guard():
                    matched()
            return (yield val())

    top = level()[0].chain()(again())
    '''
)


def _module() -> cst.Module:
    return cst.parse_module(SOURCE)


def test_code_children_are_the_node_values_of_the_code_fields_in_field_order() -> None:
    module = _module()
    for node in code_nodes(module):
        expected: list[cst.CSTNode] = []
        for field in dataclasses.fields(node):
            if "whitespace" in field.name or field.name in _PUNCTUATION:
                continue
            value = getattr(node, field.name)
            if isinstance(value, cst.CSTNode):
                expected.append(value)
            elif isinstance(value, (tuple, list)):
                expected.extend(item for item in value if isinstance(item, cst.CSTNode))
        assert [id(child) for child in code_children(node)] == [id(child) for child in expected], type(node).__name__


_PUNCTUATION = {
    "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "leading_lines", "lines_after_decorators",
    "header", "footer", "comma", "semicolon", "colon", "equal", "dot", "operator", "asynchronous",
}  # fmt: skip

# Where a node's fields come in another order than its source text; the expression walker visits
# `Arg` and `IfExp` by hand, a `Slice`'s colons hold no code, and the rest are statements or their parts.
_NOT_IN_SOURCE_ORDER = {"Arg", "IfExp", "Slice", "FunctionDef", "ClassDef", "ExceptHandler", "ImportFrom", "MatchCase"}


def test_code_children_come_in_source_order_but_where_the_walkers_say() -> None:
    module = _module()
    for node in code_nodes(module):
        children = code_children(node)
        ids = {id(child) for child in children}
        in_source = [id(child) for child in node.children if id(child) in ids]
        if type(node).__name__ not in _NOT_IN_SOURCE_ORDER:
            assert [id(child) for child in children] == in_source, type(node).__name__


class _Calls(cst.CSTVisitor):
    """What the index should hold, by LibCST's own visitor: each call with its innermost function and class."""

    def __init__(self) -> None:
        self.calls: list[tuple[cst.Call, Optional[cst.FunctionDef], Optional[cst.ClassDef]]] = []
        self.functions: list[tuple[cst.FunctionDef, Optional[cst.ClassDef]]] = []
        self.classes: list[cst.ClassDef] = []
        self._function: list[Optional[cst.FunctionDef]] = [None]
        self._class: list[Optional[cst.ClassDef]] = [None]

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append((node, self._function[-1], self._class[-1]))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append((node, self._class[-1]))
        self._function.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._function.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node)
        self._class.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._class.pop()


def test_the_index_holds_every_call_with_its_function_and_class() -> None:
    module = _module()
    index = build_index(module)
    expected = _Calls()
    module.visit(expected)

    def key(site: tuple[cst.Call, Optional[cst.CSTNode], Optional[cst.CSTNode]]) -> tuple[int, int, int]:
        return id(site[0]), id(site[1]), id(site[2])

    indexed = [(site.call, site.function, site.klass) for sites in index.calls_by_name.values() for site in sites]
    # Every call of something named (not `f()()`), with the scope LibCST's visitor sees it in.
    named = [site for site in expected.calls if isinstance(site[0].func, (cst.Name, cst.Attribute))]
    assert len(named) < len(expected.calls)
    assert sorted(map(key, indexed)) == sorted(map(key, named))
    # Each name's calls in the order of a plain walk down the code fields.
    in_walk_order = [node for node in _preorder(module) if isinstance(node, cst.Call)]
    for name, sites in index.calls_by_name.items():
        assert [id(site.call) for site in sites] == [id(call) for call in in_walk_order if _callee(call) == name], name
    assert [(id(f), id(k)) for f, k in index.functions] == [(id(f), id(k)) for f, k in expected.functions]
    assert [id(k) for k in index.classes] == [id(k) for k in expected.classes]
    assert index.imports == {"annotations": "__future__.annotations", "osp": "os.path", "sys": "sys", "b": ".pkg.a", "c": ".pkg.c"}


def _preorder(node: cst.CSTNode) -> list[cst.CSTNode]:
    return [node, *(below for child in code_children(node) for below in _preorder(child))]


def _callee(call: cst.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    return func.attr.value if isinstance(func, cst.Attribute) else None


def _flow_of(source: str) -> tuple[FunctionFlow, cst.Module]:
    module = cst.parse_module(textwrap.dedent(source))
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    return FunctionFlow(function), module


def _reaching_sink(source: str) -> Optional[set[tuple[str, str]]]:
    flow, module = _flow_of(source)
    (sink,) = m.findall(module, m.Call(func=m.Name("sink")))
    name = sink.args[0].value  # type: ignore[attr-defined]
    defs = flow.reaching(name)
    if defs is None:
        return None
    return {(d.kind, "-" if d.value is None else module.code_for_node(d.value)) for d in defs}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # Arguments left to right: the read comes before the walrus.
        ("def f(fb):\n    loc = fb.b\n    g(sink(loc), (loc := fb.a))\n", {("assign", "fb.b")}),
        ("def f(fb):\n    loc = fb.b\n    g((loc := fb.a), sink(loc))\n", {("walrus", "fb.a")}),
        # A conditional expression's test runs first, though it is written second.
        ("def f(fb):\n    loc = fb.b\n    y = sink(loc) if (loc := fb.a) else None\n", {("walrus", "fb.a")}),
        # A subscript's value before its index; a call's callee before its arguments.
        ("def f(fb):\n    loc = fb.b\n    x[(loc := fb.a)][sink(loc)]\n", {("walrus", "fb.a")}),
        ("def f(fb):\n    loc = fb.b\n    (loc := fb.a).g(sink(loc))\n", {("walrus", "fb.a")}),
        # The right operand of `and` may not run: both definitions may reach.
        ("def f(fb):\n    loc = fb.b\n    y = c and (loc := fb.a)\n    sink(loc)\n", {("assign", "fb.b"), ("walrus", "fb.a")}),
    ],
)
def test_the_expression_walk_reads_in_evaluation_order(source: str, expected: set[tuple[str, str]]) -> None:
    assert _reaching_sink(source) == expected


def test_keywords_and_attribute_names_are_not_reads() -> None:
    flow, module = _flow_of("def f(loc, attr):\n    g(loc=1).attr\n")
    keyword = m.findall(module, m.Arg(keyword=m.Name("loc")))[0].keyword  # type: ignore[attr-defined]
    attribute = m.findall(module, m.Attribute(attr=m.Name("attr")))[0].attr  # type: ignore[attr-defined]
    assert flow.reaching(keyword) is None
    assert flow.reaching(attribute) is None
