"""A door a pool calls on its base class with a bare loc it takes by design (`--prove`).

A pool of the old kind (its class and every subclass keep the tree's gate off,
`Contract.ungated_classes`) may translate the loc it was handed and pass the
bare result to its base class's door: `super().set_kv_buffer(layer,
translated, ...)`. The base door refuses an unmarked loc only when the gate is
on, and here it never is. That call is *exempt*: not proven marked (its loc
is bare), not unproven (nothing requires a mark there).

Only `super()` calls are exempt, and only when the base door writes to the
pool itself: every door it calls in turn is on `self` or `super()` and stays
in the pool too (taken from the calling class's hierarchy, as Python would
for an instance of it). A base door that hands the loc to another pool's door
(`self.full_kv_pool.set_kv_buffer(...)`) could reach a gated pool, so its
caller is not exempt.

A door call none of whose reachable definitions needs the mark is exempt too: by the
classes its receiver can be (`kvlint.analysis.receivers`; unknown, every class defining
the name), no definition reads the mark or reaches the tree's mark check, so nothing
refuses a bare loc there (an NPU indexer handing its pool the raw loc by design). In a
tree whose doors check no mark yet, only a call reaching tensor takers alone is exempt.
"""

from __future__ import annotations

import ast
from typing import Optional

from kvlint.analysis.exact_receivers import door_runners
from kvlint.analysis.mark_needs import needs_mark, refusing_none
from kvlint.analysis.proof_tree import Place, ProofTree, own_nodes
from kvlint.analysis.receivers import receiver_classes
from kvlint.api.contract import Contract
from kvlint.api.door_kinds import reachable

_MAX_DEPTH = 4


def bare_loc_taken(tree: ProofTree, contract: Contract, where: Place, call: ast.Call) -> Optional[str]:
    """Why the door call `call` inside `where` may pass a bare loc; None when it may not."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and _is_super(func.value)) or where.klass not in contract.ungated_classes:
        return None
    target = tree.resolve(where, func)
    if target is None or not _stays_in_pool(tree, contract, where, target, 0, set()):
        return None
    return (
        f"`{where.klass}` and its subclasses keep `{contract.mark_gate}` off, and `{target.name}` "
        f"({target.shown()}) writes to the pool itself: a bare loc is what it takes"
    )


def mark_not_needed(tree: ProofTree, contract: Contract, where: Place, door: str, call: ast.Call) -> Optional[str]:
    """Why no definition of `door` the call can reach needs a marked loc; None when one may."""
    if not any(kind.name == door for kind in contract.door_kinds):
        return None
    bases = dict(contract.door_bases)
    known = set(bases) | {kind.klass for kind in contract.door_kinds}
    func = call.func
    classes = None
    if isinstance(func, ast.Attribute):
        module = tree.module(where.path)
        klass = module.classes.get(where.klass) if module is not None and where.klass else None
        classes = receiver_classes(func.value, where.function, klass, known)
    reached = reachable(contract.door_kinds, bases, door, classes)
    if not reached:
        return None
    receiver = ast.unparse(func.value) if isinstance(func, ast.Attribute) else door
    if any(needs_mark(contract, kind) for kind in reached):
        return _exactly_not_needed(contract, where, door, call, receiver)
    whose = "of a class kvlint cannot tell" if classes is None else f"a {' or '.join(f'`{c}`' for c in sorted(classes))}"
    shown = "; ".join(kind.shown() for kind in reached)
    return f"`{receiver}` is {whose}, and no `{door}` it can reach checks the mark: {shown}"


def _exactly_not_needed(contract: Contract, where: Place, door: str, call: ast.Call, receiver: str) -> Optional[str]:
    """Why no class the receiver can exactly be (`kvlint.analysis.exact_receivers`) refuses a bare loc."""
    exact = refusing_none(contract, where.klass, where.function, call, door)
    if exact is None:
        return None
    runners = sorted(door_runners(contract, door, exact))
    shown = ", ".join(f"`{name}`" for name in runners[:6]) + (", ..." if len(runners) > 6 else "")
    return (f"of the classes with a `{door}`, `{receiver}` can only be {shown or 'none'} by what the pool "
            "classes build it as, and none of them refuses a bare loc: each keeps its own gate off or ignores the mark")


def _stays_in_pool(
    tree: ProofTree, contract: Contract, caller: Place, door: Place, depth: int, seen: set[Place]
) -> bool:
    if door in seen:
        return True
    if depth > _MAX_DEPTH:
        return False
    seen.add(door)
    for node in own_nodes(door.function):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in contract.door_loc_index:
            continue
        owner = node.func.value
        if not (_is_super(owner) or (isinstance(owner, ast.Name) and owner.id == "self")):
            return False
        # `self.door(...)` runs the calling class's override; `super()` the next one after the door's class.
        inner = tree.resolve(caller if isinstance(owner, ast.Name) else door, node.func)
        if inner is None or not _stays_in_pool(tree, contract, caller, inner, depth + 1, seen):
            return False
    return True


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
