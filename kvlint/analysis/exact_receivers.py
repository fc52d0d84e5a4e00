"""The classes a door call's receiver can exactly be, read from the pool classes' own code.

`kvlint.analysis.receivers` names a receiver's class where the code names it (`self.pool =
TensorPool(...)`, an annotation), as that class or any subclass. A composite pool names none
where it builds its sub-pools from classes it was handed:

    self.full_kv_pool = full_kv_pool_class(size=size, dtype=dtype, layer_num=n, **kwargs)
    ...
    pool = self.swa_kv_pool if is_swa_layer else self.full_kv_pool
    pool.set_kv_buffer(None, loc, cache_k, cache_v)

Yet the tree says what `pool` can be (`kvlint.learn.class_facts`): the method runs on the class
and on every subclass not defining it again, each building the attribute its own way; a class
handed over and called with `size=` is one whose constructor takes `size` (the unified pools'
take a unified buffer instead); a class named is that class; an annotated one that class or a
subclass. `isinstance` tests on the way to the call narrow the set: `if not isinstance(pool,
MLATokenToKVPool): raise` leaves the MLA pools.

An exact class says which definition runs (the nearest up its bases) and whether its gate is on:
an instance whose own gate is off refuses no bare loc unless the definition hands it to another
pool that may (`kvlint.analysis.mark_needs`). Anything unread makes the answer unknown (None).
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional, Sequence, Union

from kvlint.analysis._ast_tensors import trailing
from kvlint.analysis.receivers import assigned_values, bindings
from kvlint.api.class_facts import AttributeBuild
from kvlint.api.contract import Contract
from kvlint.api.door_kinds import DoorKind, ancestors
from kvlint.api.hierarchy import subclasses

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_MAX_DEPTH = 4


class ExactReceivers:
    """The exact classes a receiver can be, inside `method` of `klass` (names; "" outside a class)."""

    def __init__(self, contract: Contract, klass: str, method: Optional[_Function]) -> None:
        self.facts = contract.facts_by_class
        self.bases = contract.door_hierarchy
        self.children = contract.door_children
        self.klass, self.method = klass, method

    def of(self, receiver: ast.expr, call: ast.Call) -> Optional[frozenset[str]]:
        found = self._classes(receiver, 0)
        if found is None:
            return None
        if isinstance(receiver, ast.Name) and self.method is not None:
            found = self._narrowed(found, receiver.id, call)
        return frozenset(found)

    def _classes(self, node: ast.expr, depth: int) -> Optional[set[str]]:
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.IfExp):
            one, other = self._classes(node.body, depth + 1), self._classes(node.orelse, depth + 1)
            return None if one is None or other is None else one | other
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
                and self.klass and self.method is not None):
            return self._attribute(node.attr)
        if isinstance(node, ast.Name) and self.method is not None:
            return self._local(node.id, depth)
        return None

    def _local(self, name: str, depth: int) -> Optional[set[str]]:
        assert self.method is not None
        values = assigned_values(self.method, name)
        if not values:
            return None
        found: set[str] = set()
        for value in values:
            classes = self._classes(value, depth + 1)
            if classes is None:
                return None
            found |= classes
        return found

    def _attribute(self, attribute: str) -> Optional[set[str]]:
        """What `self.<attribute>` can be: over every class the method runs on, what the class and
        its bases build the attribute as."""
        assert self.method is not None
        instances = self.runs_on(self.method.name)
        if instances is None:
            return None
        found: set[str] = set()
        for instance in instances:
            classes = self.held_by(instance, attribute)
            if classes is None:
                return None
            found |= classes
        return found

    def held_by(self, instance: str, attribute: str) -> Optional[set[str]]:
        """The exact classes `<attribute>` of an instance of exactly `instance` can be: what the class
        and its bases build it as."""
        builds = []
        for owner in ancestors(instance, self.bases):
            # A class the tree does not define (`ABC`) has no facts and builds nothing of the tree's.
            facts = self.facts.get(owner)
            builds += [build for build in facts.attributes if build.attribute in (attribute, "*")] if facts else []
        if not builds:
            return None
        found: set[str] = set()
        for build in builds:
            classes = self._built(build)
            if classes is None:
                return None
            found |= classes
        return found

    def runs_on(self, method: str) -> Optional[list[str]]:
        """The class and each subclass no class below it defines `method` again for: a class always
        comes before its bases in Python's method order, so such a definition runs instead. None
        where the class is not one whose facts the tree holds."""
        if self.klass not in self.facts:
            return None
        below = subclasses({self.klass}, self.bases, self.children) - {self.klass}
        return [instance for instance in sorted(below | {self.klass})
                if not any(owner in below and method in self.facts[owner].methods
                           for owner in ancestors(instance, self.bases) if owner in self.facts)]

    def _built(self, build: AttributeBuild) -> Optional[set[str]]:
        # A class the tree does not define (`Any`, a protocol, another package's pool) may be anything.
        if build.unknown or not all(name in self.facts for name in (*build.exact, *build.typed)):
            return None
        found = set(build.exact) | subclasses(set(build.typed), self.bases, self.children)
        for keywords in build.keywords:
            found |= {name for name in self.facts if self._accepts(name, keywords)}
        return found

    def _accepts(self, klass: str, keywords: tuple[str, ...]) -> bool:
        """Whether `klass(**keywords)` can build an instance: its nearest constructor takes them."""
        for owner in ancestors(klass, self.bases):
            facts = self.facts.get(owner)
            if facts is None:
                return True  # a base the tree does not define may take anything
            if facts.init_open:
                return True
            if facts.init is not None:
                return set(keywords) <= set(facts.init)
        return True

    def _narrowed(self, classes: set[str], name: str, call: ast.Call) -> set[str]:
        """`classes` as the `isinstance` tests of `name` on the way to `call` leave them."""
        assert self.method is not None
        for test, holds in _guards(self.method.body, call, name):
            tested = _isinstance_of(test, name)
            if tested is None:
                continue
            kinds, positive = tested
            family = subclasses(kinds, self.bases, self.children)
            classes = classes & family if holds == positive else classes - family
        return classes


def door_runners(contract: Contract, door: str, classes: frozenset[str]) -> dict[str, DoorKind]:
    """The classes of `classes` that have a `door`, with the definition each runs (a mixin or a
    metadata record without one fails the call, refusing nothing)."""
    defined = {kind.klass: kind for kind in contract.door_kinds if kind.name == door}
    runners = {}
    for klass in sorted(classes):
        kind = next((defined[owner] for owner in ancestors(klass, contract.door_hierarchy) if owner in defined), None)
        if kind is not None:
            runners[klass] = kind
    return runners


def _guards(body: Sequence[ast.stmt], call: ast.Call, name: str) -> Iterator[tuple[ast.expr, bool]]:
    """Each test the way to `call` passes, with whether it held there: enclosing `if`s, and in each
    block holding the way, earlier `assert`s and `if`s that leave (`if not isinstance(...): raise`),
    back to the last statement binding `name`."""
    for at, statement in enumerate(body):
        if not any(node is call for node in ast.walk(statement)):
            continue
        for before in reversed(body[:at]):
            if bindings(before, name):
                break
            if isinstance(before, ast.Assert):
                yield before.test, True
            elif isinstance(before, ast.If) and not before.orelse and _leaves(before.body):
                yield before.test, False
        if isinstance(statement, ast.If):
            inside = any(node is call for part in statement.body for node in ast.walk(part))
            if inside or any(node is call for part in statement.orelse for node in ast.walk(part)):
                yield statement.test, inside
                yield from _guards(statement.body if inside else statement.orelse, call, name)
        else:
            for block in _blocks(statement):
                yield from _guards(block, call, name)
        return


def _blocks(statement: ast.stmt) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody", "handlers"):
        value = getattr(statement, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield value
        elif isinstance(value, list):
            for handler in value:
                if isinstance(handler, ast.ExceptHandler):
                    yield handler.body


def _leaves(block: list[ast.stmt]) -> bool:
    return bool(block) and isinstance(block[-1], (ast.Raise, ast.Return, ast.Continue, ast.Break))


def _isinstance_of(test: ast.expr, name: str) -> Optional[tuple[set[str], bool]]:
    """The classes `isinstance(name, C)` (or `(C, D)`) tests, and False where the test is its `not`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _isinstance_of(test.operand, name)
        return None if inner is None else (inner[0], not inner[1])
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
            and len(test.args) == 2 and isinstance(test.args[0], ast.Name) and test.args[0].id == name):
        return None
    kinds = test.args[1]
    parts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    names = {trailing(part) for part in parts}
    return None if None in names else ({name for name in names if name}, True)
