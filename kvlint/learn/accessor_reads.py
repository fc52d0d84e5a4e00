"""How a pool class's buffer accessors take their tensor, read from the class's code.

A pool's accessor either reads the pool's own attributes (`return self.k_buffer[layer_id -
self.start_layer]`) or hands the question to a pool it holds:

    def _pool_for(self, layer_id):
        return self.dense_pool if layer_id in self._dense_layer_ids else self.main_pool

    def get_kv_buffer(self, layer_id):
        return self._pool_for(layer_id).get_kv_buffer(layer_id)

Every use of an accessor name on a receiver other than `self` is such a hand-over; its receiver
must be a `self.<attribute>`, one of the class's methods returning only those, or a local bound
only to those, else the read is unknown. A method of its own whose result it uses
(`return self._get_key_buffer(layer_id)`) is read too, as each class defining it does: which
definition runs is the instance's class's to say (`kvlint.analysis.own_buffers`); so is an accessor
it calls on `super()`. One whose result it drops (`self._wait_for_layer(layer_id)`) cannot hand a
tensor over.
"""

from __future__ import annotations

import ast
from typing import Optional, Sequence

from kvlint.analysis.ast_walk import FUNCTIONS, Function, own_nodes
from kvlint.analysis.receivers import assigned_values, self_attribute
from kvlint.api.class_facts import AccessorRead

_DEPTH = 3


def accessor_reads(klass: ast.ClassDef, accessors: frozenset[str]) -> tuple[AccessorRead, ...]:
    """How each method `klass` defines hands over the `accessors` (which of them matter is for the
    whole tree to say: the accessors, and the methods those are read through)."""
    defined = {item.name: item for item in klass.body if isinstance(item, FUNCTIONS)}
    return tuple(_Reader(defined, accessors).read(name) for name in sorted(defined))


def held_attributes(methods: dict[str, Function], receiver: ast.expr, method: Function) -> tuple[Optional[set[str]], set[str]]:
    """The `self.<attribute>`s `receiver` may be inside `method` of a class defining `methods` (None where
    it may be anything else too), and the class's methods whose returns said so."""
    reader = _Reader(methods, frozenset())
    return reader.held(receiver, method, 0), reader.through


class _Reader:
    def __init__(self, methods: dict[str, Function], accessors: frozenset[str]) -> None:
        self.methods, self.accessors = methods, accessors
        # The methods of the class whose returns named the pools of the read under way.
        self.through: set[str] = set()

    def read(self, name: str) -> AccessorRead:
        method = self.methods[name]
        self.through = set()
        pools: set[str] = set()
        helpers: set[str] = set()
        inherited: set[str] = set()
        unknown = False
        nodes = list(own_nodes(method))
        dropped = {id(statement.value) for statement in nodes if isinstance(statement, ast.Expr)}
        for node in nodes:
            if isinstance(node, ast.Attribute) and node.attr in self.accessors and _is_super(node.value):
                inherited.add(node.attr)
            elif isinstance(node, ast.Attribute) and node.attr in self.accessors and not _is_self(node.value):
                held = self.held(node.value, method, 0)
                unknown = unknown or held is None
                pools |= held or set()
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_self(node.func.value)
                  and node.func.attr not in self.accessors and id(node) not in dropped):
                # Which definition runs depends on the instance's class: resolved there, by name.
                helpers.add(node.func.attr)
        return AccessorRead(name, tuple(sorted(pools)), tuple(sorted(helpers)), tuple(sorted(inherited)),
                            tuple(sorted(self.through)), unknown)

    def held(self, receiver: ast.expr, method: Function, depth: int) -> Optional[set[str]]:
        """The `self.<attribute>`s `receiver` may be, inside `method`; None where it may be anything else."""
        if depth > _DEPTH:
            return None
        if self_attribute(receiver):
            return {self_attribute(receiver)}
        if isinstance(receiver, ast.IfExp):
            one, other = self.held(receiver.body, method, depth + 1), self.held(receiver.orelse, method, depth + 1)
            return None if one is None or other is None else one | other
        if (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and _is_self(receiver.func.value)
                and receiver.func.attr in self.methods):
            helper = self.methods[receiver.func.attr]
            self.through.add(helper.name)
            returns = [node.value for node in own_nodes(helper) if isinstance(node, ast.Return)]
            return self._all_held(returns, helper, depth)
        if isinstance(receiver, ast.Name):
            values = assigned_values(method, receiver.id)
            return self._all_held(values, method, depth) if values is not None else None
        return None

    def _all_held(self, values: Sequence[Optional[ast.expr]], method: Function, depth: int) -> Optional[set[str]]:
        found: set[str] = set()
        for value in values:
            held = self.held(value, method, depth + 1) if value is not None else None
            if held is None:
                return None
            found |= held
        return found if values else None


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"
