"""Apply a set of replacements to one LibCST tree.

A fix names its target node by identity, so the replacements must have been
computed on the very tree passed here. Imports the new code needs are added
by LibCST's `AddImportsVisitor` (once, into the import block, never by string
editing; `kvlint.fix.imports`).
"""

from __future__ import annotations

from typing import Sequence, Union

import libcst as cst

from kvlint.api.rule import Replacement
from kvlint.fix.imports import add_imports


class FixFailed(Exception):
    """A fix could not be applied (overlapping edits, a node that vanished)."""


class _Swap(cst.CSTTransformer):
    def __init__(self, replacements: Sequence[Replacement]) -> None:
        self.by_target = {id(fix.target): fix for fix in replacements}
        self.applied = 0

    # LibCST types on_leave with a per-node TypeVar; a swap returns a node of another type by design.
    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel[cst.CSTNode]]:
        fix = self.by_target.get(id(original_node))
        if fix is None or fix.target is not original_node:
            return updated_node
        self.applied += 1
        return fix.new


def apply_replacements(module: cst.Module, replacements: Sequence[Replacement], filename: str = "") -> cst.Module:
    """`module` with every replacement applied and the imports they need added.

    Raises `FixFailed` when a target was not reached, which happens when it
    sits inside another fix's target: one of the two would be lost.
    """
    if not replacements:
        return module
    swap = _Swap(replacements)
    updated = module.visit(swap)
    if swap.applied != len(swap.by_target):
        raise FixFailed(f"{len(swap.by_target) - swap.applied} fix target(s) overlap another fix")
    return add_imports(updated, [(module_name, name) for fix in replacements for module_name, name in fix.imports], filename)
