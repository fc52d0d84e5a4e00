"""The expression half of the data flow: name reads and walrus bindings, in evaluation order."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Iterable, Optional, Union, cast

import libcst as cst

from kvlint.analysis._flow_model import copy_env, merge
from kvlint.analysis._flow_targets import for_clauses, names_in, params

if TYPE_CHECKING:
    from kvlint.analysis.dataflow import _Walker

_Comprehension = Union[cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp]


class ExpressionWalker(cst.CSTVisitor):
    """Records name reads and walrus bindings inside one expression, in evaluation order."""

    def __init__(self, walker: _Walker) -> None:
        # Weak: the walker keeps this one, and the cycle kept a function's flow, and through it the
        # file's LibCST tree, alive until the collector's next pass.
        self.walker = cast("_Walker", weakref.proxy(walker))

    def visit_Name(self, node: cst.Name) -> bool:
        self.walker.use(node)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        # `.attr` is not a variable read.
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        # A keyword's name is not a variable read.
        node.value.visit(self)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        node.value.visit(self)
        self.walker.bind(node.target, "walrus", value=node.value, source=node.value)
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        node.test.visit(self)
        self._either(node.body, node.orelse)
        return False

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> bool:
        node.left.visit(self)
        self._either(node.right, None)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        for param in params(node.params):
            if param.default is not None:
                param.default.visit(self)
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return self._comprehension(node, (node.elt,))

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return self._comprehension(node, (node.elt,))

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return self._comprehension(node, (node.elt,))

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return self._comprehension(node, (node.key, node.value))

    def _either(self, first: cst.BaseExpression, second: Optional[cst.BaseExpression]) -> None:
        """Evaluate one of two branches (a missing one does nothing) and merge."""
        before = copy_env(self.walker.env)
        first.visit(self)
        after_first = self.walker.env
        self.walker.env = before
        if second is not None:
            second.visit(self)
        self.walker.env = merge(after_first, self.walker.env)

    def _comprehension(self, node: _Comprehension, results: Iterable[cst.BaseExpression]) -> bool:
        """Comprehension targets live in their own scope; a walrus inside still binds here."""
        walker = self.walker
        targets = {name for clause in for_clauses(node.for_in) for name in names_in(clause.target)}
        saved = {name: walker.env.get(name) for name in targets} if walker.env is not None else {}
        local_before = set(walker.flow._local_names)
        for clause in for_clauses(node.for_in):
            clause.iter.visit(self)
            walker.bind(clause.target, "for", source=clause.iter)
            for condition in clause.ifs:
                condition.test.visit(self)
        for result in results:
            result.visit(self)
        if walker.env is not None:
            for name in targets:
                previous = saved.get(name)
                if previous is None:
                    walker.env.pop(name, None)
                else:
                    walker.env[name] = previous
        walker.flow._local_names = local_before | (walker.flow._local_names - targets)
        return False
