"""Reaching definitions of local names inside one function: kvlint's own light data flow.

LibCST's `ScopeProvider` would answer "where does this name come from", but on
the real `sglang/srt` tree it costs several times the parse itself (docs/ARCHITECTURE.md,
"Measured facts"). The rules only ever ask about names inside the few
functions that hold a candidate call, so this module walks exactly those
functions, once each, in a single pass with branch merging.

API
---
``function_flow(ctx, func) -> FunctionFlow``
    The flow of ``func``, built on first request and cached on the file context
    under ``("flow", id(func))``, so every rule asking about the same function
    shares one walk.

``FunctionFlow.reaching(name) -> Optional[frozenset[Definition]]``
    The definitions that may reach the use ``name`` (a `cst.Name` node read
    inside the function's own body). ``None`` means unknown: the name is never
    bound in the function (a global, builtin or closure variable), it is
    declared ``global``/``nonlocal``, or the node is not a use this function
    evaluates (it sits in a nested function or lambda body). An empty set means
    the name is local but unbound on every path to the use.

``FunctionFlow.free_reaching(nested, name) -> Optional[Defs]``
    For a function ``nested`` defined in this one that reads ``name`` without
    binding it (a closure variable): the definitions of ``name`` here that
    reach the ``def`` statement. A closure usually runs after it is defined and
    before its variables are bound again; a binding made after the ``def`` is
    not seen, so the answer may miss one, never adds one. ``None`` where
    ``name`` is not this function's local or the ``def`` is unreachable.

``Definition``
    One binding: ``kind`` (see ``DEFINITION_KINDS``), ``target`` (the bound
    `cst.Name`), ``value`` (the assigned expression for a plain assignment or
    walrus, else None), ``source`` (the whole right-hand side, e.g. the call in
    ``k, v = pool.get_kv_buffer(i)``), ``unpack_index`` (the target's position
    in an unpacked tuple, when it is fixed) and ``param`` (for parameters).

What the walk models: assignment, annotated and augmented assignment, tuple and
list unpacking (a starred target, and every target after it, has no fixed
index), ``if``/``elif``/``else`` (merge), ``for``/``while`` (iterated to a fixed
point; the body may not run; ``break``/``continue`` go where Python sends
them), ``try``/``except``/``else``/``finally`` (a handler sees every state the
``try`` body passed through), ``with ... as``, walrus (binding in the function
even from a comprehension), ``match`` captures, ``del``, imports, ``except ...
as`` (unbound after the handler). Comprehension targets do not leak. Nested
function and class bodies are not walked; the name a nested ``def``/``class``
binds is a definition of kind "def". Code after ``return``/``raise``/``break``/
``continue`` is unreachable and contributes nothing to a merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import libcst as cst

from kvlint.analysis._flow_expressions import ExpressionWalker
from kvlint.analysis._flow_targets import captures, names_in, params
from kvlint.analysis._flow_model import DEFINITION_KINDS, Definition, Defs, Env, copy_env, merge
from kvlint.api.rule import FileContext

__all__ = ["DEFINITION_KINDS", "Definition", "FunctionFlow", "function_flow", "merge"]

# Loops are iterated until nothing changes; definitions only ever grow, so a
# handful of rounds settles any real function. The cap guards pathological input.
_MAX_LOOP_ROUNDS = 8


class FunctionFlow:
    """The reaching definitions at every name read in one function's body."""

    def __init__(self, func: cst.FunctionDef) -> None:
        self.function = func
        self._uses: dict[int, tuple[str, Optional[Defs]]] = {}
        self._local_names: set[str] = set()
        self._declared_outside: set[str] = set()
        # The state at each nested `def` statement, for the closure variables its body reads.
        self._at_nested: dict[int, dict[str, Defs]] = {}
        _Walker(self).walk_function(func)

    def reaching(self, name: cst.Name) -> Optional[Defs]:
        recorded = self._uses.get(id(name))
        if recorded is None:
            return None
        text, defs = recorded
        if text in self._declared_outside or text not in self._local_names:
            return None
        return defs if defs is not None else frozenset()

    def free_reaching(self, nested: cst.FunctionDef, name: str) -> Optional[Defs]:
        env = self._at_nested.get(id(nested))
        if env is None or name in self._declared_outside or name not in self._local_names:
            return None
        return env.get(name, frozenset())

    def binds(self, name: str) -> bool:
        """Whether `name` is this function's own (bound here or declared `global`/`nonlocal`), not a closure variable."""
        return name in self._local_names or name in self._declared_outside

    def read(self, target: cst.Name) -> bool:
        """Whether the binding of `target` reaches a read of it in this scope (nested scopes are not walked)."""
        return any(defs and any(definition.target is target for definition in defs) for _, defs in self._uses.values())

    def _record_use(self, name: cst.Name, defs: Optional[Defs]) -> None:
        previous = self._uses.get(id(name))
        if previous is not None and previous[1] is not None:
            defs = previous[1] | (defs or frozenset())
        self._uses[id(name)] = (name.value, defs)


def function_flow(ctx: FileContext, func: cst.FunctionDef) -> FunctionFlow:
    """The data flow of ``func``, computed once per file context."""
    return ctx.analysis(("flow", id(func)), lambda: FunctionFlow(func))


@dataclass
class _Loop:
    breaks: list[Env]
    continues: list[Env]


class _Walker:
    """Walks statements with an explicit state; expressions go through `ExpressionWalker`."""

    def __init__(self, flow: FunctionFlow) -> None:
        self.flow = flow
        self.env: Env = {}
        self._loops: list[_Loop] = []
        # States seen inside each enclosing `try` body, for its handlers.
        self._try_states: list[list[Env]] = []
        self._expressions = ExpressionWalker(self)

    # -- definitions --------------------------------------------------------

    def define(self, definition: Definition) -> None:
        self.flow._local_names.add(definition.target.value)
        if self.env is not None:
            self.env[definition.target.value] = frozenset((definition,))

    def undefine(self, name: str) -> None:
        self.flow._local_names.add(name)
        if self.env is not None:
            self.env[name] = frozenset()

    def use(self, name: cst.Name) -> None:
        if self.env is None:
            return
        self.flow._record_use(name, self.env.get(name.value))

    def bind(
        self,
        target: cst.BaseExpression,
        kind: str,
        *,
        value: Optional[cst.BaseExpression] = None,
        source: Optional[cst.BaseExpression] = None,
        unpack_index: Optional[int] = None,
    ) -> None:
        """Bind an assignment target; attribute and subscript targets are reads, not definitions."""
        if isinstance(target, cst.Name):
            self.define(Definition(kind, target, value, source, unpack_index))
        elif isinstance(target, (cst.Tuple, cst.List)):
            element_kind = "unpack" if kind == "assign" else kind
            fixed = True
            for position, element in enumerate(target.elements):
                if isinstance(element, cst.StarredElement):
                    fixed = False
                    self.bind(element.value, element_kind, source=source)
                    continue
                nested = isinstance(element.value, (cst.Tuple, cst.List))
                index = position if fixed and not nested and unpack_index is None else None
                self.bind(element.value, element_kind, source=source, unpack_index=index)
        elif isinstance(target, cst.StarredElement):
            self.bind(target.value, kind, source=source)
        else:
            self.expression(target)

    def expression(self, node: Optional[cst.CSTNode]) -> None:
        if node is not None:
            self._expressions.walk(node)

    # -- statements ---------------------------------------------------------

    def walk_function(self, func: cst.FunctionDef) -> None:
        for param in params(func.params):
            self.define(Definition("param", param.name, param=param))
        self.block(func.body)

    def block(self, body: Union[cst.BaseSuite, Sequence[cst.BaseStatement]]) -> None:
        if isinstance(body, cst.SimpleStatementSuite):
            for small in body.body:
                self.small_statement(small)
            return
        statements: Sequence[cst.BaseStatement] = body.body if isinstance(body, cst.IndentedBlock) else body  # type: ignore[assignment]
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self.small_statement(small)
            elif isinstance(statement, cst.BaseCompoundStatement):
                self.compound_statement(statement)

    def small_statement(self, node: cst.BaseSmallStatement) -> None:
        if isinstance(node, cst.Assign):
            self.expression(node.value)
            for target in node.targets:
                self.bind(target.target, "assign", value=node.value, source=node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.expression(node.value)
                self.bind(node.target, "assign", value=node.value, source=node.value)
            else:
                self.flow._local_names.update(names_in(node.target))
        elif isinstance(node, cst.AugAssign):
            self.expression(node.value)
            self.expression(node.target)
            if isinstance(node.target, cst.Name):
                self.define(Definition("augassign", node.target, source=node.value))
        elif isinstance(node, cst.Del):
            self._delete(node.target)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            self.flow._declared_outside.update(item.name.value for item in node.names)
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            self._import(node)
        elif isinstance(node, (cst.Return, cst.Raise)):
            self.expression(node)
            self.env = None
        elif isinstance(node, cst.Break):
            if self._loops:
                self._loops[-1].breaks.append(self.env)
            self.env = None
        elif isinstance(node, cst.Continue):
            if self._loops:
                self._loops[-1].continues.append(self.env)
            self.env = None
        else:
            self.expression(node)
        for states in self._try_states:
            states.append(copy_env(self.env))

    def compound_statement(self, node: cst.BaseCompoundStatement) -> None:
        if isinstance(node, cst.If):
            self._if(node)
        elif isinstance(node, cst.For):
            self._for(node)
        elif isinstance(node, cst.While):
            self._while(node)
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self._try(node)
        elif isinstance(node, cst.With):
            for item in node.items:
                self.expression(item.item)
                if item.asname is not None:
                    self.bind(item.asname.name, "with", source=item.item)
            self.block(node.body)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._nested_definition(node)
        elif isinstance(node, cst.Match):
            self._match(node)

    def _if(self, node: cst.If) -> None:
        self.expression(node.test)
        before = copy_env(self.env)
        self.block(node.body)
        after_body = self.env
        self.env = before
        if isinstance(node.orelse, cst.If):
            self._if(node.orelse)
        elif isinstance(node.orelse, cst.Else):
            self.block(node.orelse.body)
        self.env = merge(after_body, self.env)

    def _for(self, node: cst.For) -> None:
        self.expression(node.iter)

        def body() -> None:
            self.bind(node.target, "for", source=node.iter)
            self.block(node.body)

        self._loop(body, test=None, orelse=node.orelse)

    def _while(self, node: cst.While) -> None:
        self._loop(lambda: self.block(node.body), test=node.test, orelse=node.orelse)

    def _loop(self, body: Callable[[], None], test: Optional[cst.BaseExpression], orelse: Optional[cst.Else]) -> None:
        """Iterate the loop head to a fixed point: head = entry merged with every way back to it."""
        entry = copy_env(self.env)
        head = entry
        loop = _Loop([], [])
        for _ in range(_MAX_LOOP_ROUNDS):
            loop = _Loop([], [])
            self._loops.append(loop)
            self.env = copy_env(head)
            self.expression(test)
            body()
            self._loops.pop()
            new_head = merge(entry, self.env, *loop.continues)
            if new_head == head:
                break
            head = new_head
        # Leaving normally: the test failed (or the iterator ran out) at the head.
        self.env = copy_env(head)
        self.expression(test)
        if orelse is not None:
            self.block(orelse.body)
        self.env = merge(self.env, *loop.breaks)

    def _try(self, node: Union[cst.Try, cst.TryStar]) -> None:
        states: list[Env] = [copy_env(self.env)]
        self._try_states.append(states)
        self.block(node.body)
        self._try_states.pop()
        if node.orelse is not None:
            self.block(node.orelse.body)
        ends = [self.env]
        # An exception may leave the body after any statement, so a handler
        # starts from every state the body passed through.
        handler_entry = merge(*states)
        for handler in node.handlers:
            self.env = copy_env(handler_entry)
            self.expression(handler.type)
            if handler.name is not None:
                self.bind(handler.name.name, "except", source=handler.type)
            self.block(handler.body)
            if handler.name is not None and isinstance(handler.name.name, cst.Name):
                self.undefine(handler.name.name.value)
            ends.append(self.env)
        if node.finalbody is not None:
            # `finally` also runs on the way out of an unhandled exception.
            self.env = merge(*ends, handler_entry)
            self.block(node.finalbody.body)
            if all(end is None for end in ends):
                self.env = None
        else:
            self.env = merge(*ends)

    def _nested_definition(self, node: Union[cst.FunctionDef, cst.ClassDef]) -> None:
        for decorator in node.decorators:
            self.expression(decorator.decorator)
        if isinstance(node, cst.FunctionDef):
            # Defaults and annotations are evaluated here; the body is another scope.
            for param in params(node.params):
                self.expression(param.default)
            if self.env is not None:
                self.flow._at_nested[id(node)] = dict(self.env)
        else:
            for arg in (*node.bases, *node.keywords):
                self.expression(arg.value)
        self.define(Definition("def", node.name))

    def _match(self, node: cst.Match) -> None:
        self.expression(node.subject)
        before = copy_env(self.env)
        ends: list[Env] = [before]
        for case in node.cases:
            self.env = copy_env(before)
            for capture in captures(case.pattern):
                self.define(Definition("other", capture, source=node.subject))
            self.expression(case.guard)
            self.block(case.body)
            ends.append(self.env)
        self.env = merge(*ends)

    def _delete(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.undefine(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._delete(element.value)
        else:
            self.expression(target)

    def _import(self, node: Union[cst.Import, cst.ImportFrom]) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if alias.asname is not None:
                self.bind(alias.asname.name, "import")
                continue
            bound: cst.BaseExpression = alias.name
            while isinstance(bound, cst.Attribute):
                bound = bound.value
            if isinstance(bound, cst.Name):
                self.define(Definition("import", bound))
