"""KV301: does a write to a batch field run before the TBO split, or after it?

Only a value the parent carries when it is split reaches the completeness
check; a field filled in during the model forward or attention-metadata
building is set on the children (or on a batch that is never split) and
cannot make the split raise. The timing is read from the call graph of the
calls that hand a batch on (`_calls`):

* **The split.** The child builder, and going up, every function that calls
  one already known to split through a call whose callee is written down
  (`cls.filter_batch(...)`, `Preparer.prepare(...)`, `batch.prepare_...(...)`,
  `self._prepare_...(...)`, and a factory of the batch class that splits the
  batch it builds, `Batch.init_new(...)`, though it is passed no batch). In
  such a function the statements above the last of those calls may run
  before a split, those below it run after.
* **Before the split**: the batch class's own construction (its methods
  that build a batch, such as `init_new`) and, in the functions that split,
  the calls above the split, with every function they reach through callees
  that are written down.
* **After the split**: the calls below the split, with everything they
  reach, including calls whose callee is not written down
  (`self.model.forward(..., forward_batch)` reaches every method of that
  name that takes a batch): the model forward and attention-metadata
  building are reached this way. So are the module's own helpers such a
  function calls handing no batch the scan sees (`self._core(*state)`), and
  the batch class's methods a helper calls on a parameter
  (`forward_batch.set_prefix_chunk_idx(i)`): placing calls, which place
  nothing before the split and make no function split.

A function reached both ways counts as before. A write in a function neither
way reaches (a worker that fills a batch and then runs it) is not shown to
run after the split, so it still counts, unless every constructor of the
batch class splits the batch it builds: then whatever holds a batch got it
split, except a function building its own (`Batch(...)`), which may hand it
to a split elsewhere.

`surely_before` tells a write that runs before every split on its way: one
its function always runs (`_conditions`), in the batch class's construction
or above the split in a function that splits, or in what those always call.
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Optional

from kvlint.rules.tbo._facts import Assignment, BuilderFact, Call, CallKind, ClassFact, FunctionFact
from kvlint.rules.tbo._tree import Tree, holds_module

# (path, class name or "", function name)
Node = tuple[str, str, str]


class Timing(str, Enum):
    BEFORE = "before"
    AFTER = "after"
    # Neither the construction nor the split reaches it.
    UNPLACED = "unplaced"


class SplitTiming:
    def __init__(self, tree: Tree, batch: tuple[str, ClassFact], builder: tuple[str, BuilderFact]) -> None:
        self._tree = tree
        self._batch = batch
        self._functions: dict[Node, FunctionFact] = {}
        self._by_name: dict[str, list[Node]] = {}
        for path, facts in tree.facts.items():
            for function in facts.functions:
                node = (path, *function.key)
                self._functions[node] = function
                self._by_name.setdefault(function.key[1], []).append(node)
        # `_callees` by what decides them (not a call's source rank): the rounds of `_splitting`
        # ask about every call again, and a tree's calls repeat a few callees.
        self._callees_of: dict[tuple[object, ...], frozenset[Node]] = {}
        self._subclasses: dict[tuple[str, str], list[tuple[str, ClassFact]]] = {}
        for path, facts in tree.facts.items():
            for klass in facts.classes:
                for base_path, base in _bases(tree, path, klass):
                    self._subclasses.setdefault((base_path, base.name), []).append((path, klass))
        builder_path, builder_fact = builder
        builders = {node for node in self._by_name.get(builder_fact.function, ()) if node[0] == builder_path}
        # Function -> source rank of its last call that leads to the split (what stands above it may run
        # before a split: `if idle: prepare(b); return b` above the main path's own); the builder has none.
        self._split_at = self._splitting(builders)
        for node in builders:
            self._split_at.pop(node, None)
        splitting = set(self._split_at) | builders
        constructors = {
            node for node, function in self._functions.items()
            if function.constructs and node[1] == batch[1].name and node[0] == batch[0]
        }
        before_roots = set(constructors)
        after_roots: set[Node] = set()
        for node, split_at in self._split_at.items():
            for call in self._functions[node].calls:
                if call.order < split_at:
                    before_roots |= self._callees(node, call, dynamic=False)
                elif call.order > split_at:
                    after_roots |= self._callees(node, call, dynamic=True)
        self._before = self._reach(before_roots - splitting, splitting, dynamic=False)
        self._after = self._reach(after_roots - splitting, splitting, dynamic=True)
        # Every way the batch class builds a batch splits it: whatever else holds a batch got it split.
        self._built_split = bool(constructors) and constructors <= splitting
        self._surely_before = self._reach(self._sure_roots(constructors) - splitting, splitting, False, unconditional=True)

    def of(self, path: str, assignment: Assignment) -> Timing:
        if assignment.function is None:
            return Timing.UNPLACED
        node = (path, *assignment.function)
        split_at = self._split_at.get(node)
        if split_at is not None:
            return Timing.BEFORE if assignment.order < split_at else Timing.AFTER
        if node in self._before:
            return Timing.BEFORE
        if node in self._after:
            return Timing.AFTER
        function = self._functions.get(node)
        if self._built_split and not (function is not None and function.constructs):
            # A function that builds its own batch (`Batch(...)`) may hand it to a split elsewhere.
            return Timing.AFTER
        return Timing.UNPLACED

    def surely_before(self, path: str, assignment: Assignment) -> bool:
        """Does the write run before the split whenever the batch is split on its way: unconditionally,
        in the batch class's construction or above the split in a function that splits, or in what
        those call unconditionally (above the split)?"""
        if assignment.function is None or assignment.conditional:
            return False
        node = (path, *assignment.function)
        split_at = self._split_at.get(node)
        if split_at is not None:
            return assignment.order < split_at
        return node in self._surely_before

    def _sure_roots(self, constructors: set[Node]) -> set[Node]:
        """What runs whenever a batch is built, or split, before the split: the constructors, and the
        callees of the unconditional calls above the split in the functions that split."""
        roots = set(constructors)
        for node, split_at in self._split_at.items():
            for call in self._functions[node].calls:
                if call.order < split_at and not call.conditional:
                    roots |= self._callees(node, call, dynamic=False)
        return roots

    def _splitting(self, builders: set[Node]) -> dict[Node, int]:
        # Each call resolved once, then walked from the builders up to every function splitting through them.
        callers: dict[Node, list[tuple[Node, int]]] = {}
        for node, function in self._functions.items():
            for call in function.calls:
                if call.kind is not CallKind.DYNAMIC and not call.placing:
                    for callee in self._callees(node, call, dynamic=False):
                        callers.setdefault(callee, []).append((node, call.order))
        split_at: dict[Node, int] = {}
        known = set(builders)
        todo = list(builders)
        while todo:
            for caller, order in callers.get(todo.pop(), ()):
                if order > split_at.get(caller, -1):
                    split_at[caller] = order
                if caller not in known:
                    known.add(caller)
                    todo.append(caller)
        return split_at

    def _reach(self, roots: set[Node], stop: set[Node], dynamic: bool, unconditional: bool = False) -> set[Node]:
        """Every function reached from `roots` (through calls that always run, if `unconditional`), not
        entering the functions that split (their statements are placed by source order)."""
        seen = set(roots)
        todo = list(roots)
        while todo:
            node = todo.pop()
            for call in self._functions[node].calls:
                if unconditional and call.conditional:
                    continue
                for callee in self._callees(node, call, dynamic) - seen - stop:
                    seen.add(callee)
                    todo.append(callee)
        return seen

    def _callees(self, caller: Node, call: Call, dynamic: bool) -> frozenset[Node]:
        key, resolve = self._resolution(caller, call, dynamic)
        known = self._callees_of.get(key)
        if known is None:
            known = self._callees_of[key] = frozenset(resolve())
        return known

    def _resolution(
        self, caller: Node, call: Call, dynamic: bool
    ) -> tuple[tuple[object, ...], Callable[[], set[Node]]]:
        """How to find a call's callees, and the key of what that reads: a batch's method is the
        same whoever calls it, a dynamic call's callees the same from any module."""
        path, klass, _name = caller
        kind, name = call.kind, call.name
        if call.placing and not dynamic:
            return ("placing",), set
        if call.placing and kind is CallKind.DYNAMIC:
            # `p.m(...)` on a parameter of a helper the forward runs: the batch's own `m`, if it has one.
            kind = CallKind.BATCH
        if kind is CallKind.SELF:
            return (kind, path, klass, name), lambda: (
                self._method(path, klass, None, name) | self._overrides(path, klass, name)
            )
        if kind is CallKind.BATCH:
            batch_path, batch = self._batch
            return (kind, name), lambda: (
                self._method(batch_path, batch.name, None, name) | self._overrides(batch_path, batch.name, name)
            )
        if kind is CallKind.OWNER:
            key = (kind, path, call.owner, call.origin, name)
            return key, lambda: self._method(path, call.owner, call.origin, name)
        if kind is CallKind.NAME:
            return (kind, path, name, call.origin), lambda: self._function(path, call)
        if not dynamic:
            return (kind, name, call.batch_args, dynamic), set
        # The batch must land in a parameter typed as one: `self.model.prepare_inputs(fb, x)` does not
        # reach a `prepare_inputs(self, runner, fb)`.
        return (kind, name, call.batch_args, dynamic), lambda: {
            node for node in self._by_name.get(name, ())
            if node[1] and set(call.batch_args) & set(self._functions[node].batch_params)
        }

    def _method(self, near: str, class_name: str, origin: Optional[str], method: str) -> set[Node]:
        """The method as the class defines it, else as its bases do (depth first, left to right),
        among the functions that hand a batch on."""
        start = self._tree.resolve(class_name, near, origin) if class_name else None
        todo = [start] if start is not None else []
        seen: set[tuple[str, str]] = set()
        while todo:
            path, klass = todo.pop(0)
            if (path, klass.name) in seen:
                continue
            seen.add((path, klass.name))
            node = (path, klass.name, method)
            if node in self._functions:
                return {node}
            todo[0:0] = _bases(self._tree, path, klass)
        return set()

    def _overrides(self, near: str, class_name: str, method: str) -> set[Node]:
        """The method as the class's subclasses, at any depth, redefine it: `self.m()` may run one."""
        start = self._tree.resolve(class_name, near, None) if class_name else None
        todo = [start] if start is not None else []
        seen: set[tuple[str, str]] = set()
        found: set[Node] = set()
        while todo:
            path, klass = todo.pop()
            for sub_path, sub in self._subclasses.get((path, klass.name), ()):
                if (sub_path, sub.name) not in seen:
                    seen.add((sub_path, sub.name))
                    todo.append((sub_path, sub))
                    if (sub_path, sub.name, method) in self._functions:
                        found.add((sub_path, sub.name, method))
        return found

    def _function(self, path: str, call: Call) -> set[Node]:
        local = (path, "", call.name)
        if local in self._functions:
            return {local}
        if call.origin is None:
            return set()
        module = call.origin.lstrip(".").rsplit(".", 1)[0]
        return {node for node in self._by_name.get(call.name, ()) if not node[1] and holds_module(node[0], module)}


def _bases(tree: Tree, path: str, klass: ClassFact) -> list[tuple[str, ClassFact]]:
    found = (tree.resolve(base.name, path, base.origin) for base in klass.bases)
    return [base for base in found if base is not None]
