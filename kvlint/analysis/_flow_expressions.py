"""The expression half of the data flow: name reads and walrus bindings, in evaluation order.

Not a `CSTVisitor`: LibCST's `visit` rebuilds every node it passes through (a new node, validated,
for each one), which made this walk most of the data flow's cost. Children are read with
`code_children`, in field order, which is evaluation order for every expression node but the two
visited here by hand: a keyword argument (its keyword is no read) and `a if test else b`.
"""

from __future__ import annotations

import weakref
from typing import Callable, Iterable, Optional, Protocol, Union, cast

import libcst as cst

from kvlint.analysis._flow_model import Env, copy_env, merge
from kvlint.analysis._flow_targets import for_clauses, names_in, params
from kvlint.analysis.walk import code_children

# A string: the rules import this module before LibCST is loaded (`kvlint.running.deferred_libcst`).
_Comprehension = Union["cst.ListComp", "cst.SetComp", "cst.GeneratorExp", "cst.DictComp"]
_Visit = Callable[["ExpressionWalker", "cst.CSTNode"], None]
# The `visit_<node class>` method for each node class, None where the children are walked alike.
_VISITS: dict[type, Optional[_Visit]] = {}


class _FunctionNames(Protocol):
    _local_names: set[str]


class StatementWalker(Protocol):
    """What an expression's walk needs of the statement walk it serves (`dataflow`'s): the state of
    every name, where to record a read, how to bind a target, and the function's local names."""

    env: Env

    @property
    def flow(self) -> _FunctionNames: ...

    def use(self, name: cst.Name) -> None: ...

    def bind(
        self,
        target: cst.BaseExpression,
        kind: str,
        *,
        value: Optional[cst.BaseExpression] = None,
        source: Optional[cst.BaseExpression] = None,
        unpack_index: Optional[int] = None,
    ) -> None: ...


class ExpressionWalker:
    """Records name reads and walrus bindings inside one expression, in evaluation order."""

    def __init__(self, walker: StatementWalker) -> None:
        # Weak: the walker keeps this one, and the cycle kept a function's flow, and through it the
        # file's LibCST tree, alive until the collector's next pass.
        self.walker = cast(StatementWalker, weakref.proxy(walker))

    def walk(self, node: cst.CSTNode) -> None:
        kind = type(node)
        try:
            visit = _VISITS[kind]
        except KeyError:
            visit = _VISITS[kind] = getattr(ExpressionWalker, f"visit_{kind.__name__}", None)
        if visit is not None:
            visit(self, node)
            return
        for child in code_children(node):
            self.walk(child)

    def visit_Name(self, node: cst.Name) -> None:
        self.walker.use(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        # `.attr` is not a variable read.
        self.walk(node.value)

    def visit_Arg(self, node: cst.Arg) -> None:
        # A keyword's name is not a variable read.
        self.walk(node.value)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.walk(node.value)
        self.walker.bind(node.target, "walrus", value=node.value, source=node.value)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.walk(node.test)
        self._either(node.body, node.orelse)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self.walk(node.left)
        self._either(node.right, None)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        for param in params(node.params):
            if param.default is not None:
                self.walk(param.default)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comprehension(node, (node.elt,))

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._comprehension(node, (node.elt,))

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comprehension(node, (node.elt,))

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._comprehension(node, (node.key, node.value))

    def _either(self, first: cst.BaseExpression, second: Optional[cst.BaseExpression]) -> None:
        """Evaluate one of two branches (a missing one does nothing) and merge."""
        before = copy_env(self.walker.env)
        self.walk(first)
        after_first = self.walker.env
        self.walker.env = before
        if second is not None:
            self.walk(second)
        self.walker.env = merge(after_first, self.walker.env)

    def _comprehension(self, node: _Comprehension, results: Iterable[cst.BaseExpression]) -> None:
        """Comprehension targets live in their own scope; a walrus inside still binds here."""
        walker = self.walker
        targets = {name for clause in for_clauses(node.for_in) for name in names_in(clause.target)}
        saved = {name: walker.env.get(name) for name in targets} if walker.env is not None else {}
        local_before = set(walker.flow._local_names)
        for clause in for_clauses(node.for_in):
            self.walk(clause.iter)
            walker.bind(clause.target, "for", source=clause.iter)
            for condition in clause.ifs:
                self.walk(condition.test)
        for result in results:
            self.walk(result)
        if walker.env is not None:
            for name in targets:
                previous = saved.get(name)
                if previous is None:
                    walker.env.pop(name, None)
                else:
                    walker.env[name] = previous
        walker.flow._local_names = local_before | (walker.flow._local_names - targets)
