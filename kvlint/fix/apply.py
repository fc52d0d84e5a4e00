"""Apply a set of replacements to one LibCST tree.

A fix names its target node by identity, so the replacements must have been
computed on the very tree passed here. Imports the new code needs are added
by LibCST's `AddImportsVisitor` (once, into the import block, never by string
editing; `kvlint.fix.imports`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import libcst as cst

from kvlint.analysis.walk import code_children
from kvlint.api.rule import Replacement
from kvlint.fix.imports import add_imports


class FixFailed(Exception):
    """A fix could not be applied (overlapping edits, a node that vanished)."""


def _swapped(module: cst.Module, replacements: Sequence[Replacement]) -> cst.Module:
    """`module` with each target swapped for its new node, rebuilding only the targets' ancestors.

    A transformer would rebuild every node of the module, most of a second for
    a backend; the targets' ancestors are a few dozen nodes.
    """
    new_of: dict[int, cst.CSTNode] = {id(fix.target): fix.new for fix in replacements}
    parent_of: dict[int, cst.CSTNode] = {}
    reached: list[cst.CSTNode] = []
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        if id(node) in new_of:
            # Not descended: a target inside another target is not reached.
            reached.append(node)
            continue
        for child in code_children(node):
            parent_of[id(child)] = node
            stack.append(child)
    if len(reached) != len(new_of):
        raise FixFailed(f"{len(new_of) - len(reached)} fix target(s) overlap another fix")
    depth_of: dict[int, tuple[int, cst.CSTNode]] = {}
    for target in reached:
        chain = []
        node = target
        while id(node) in parent_of:
            node = parent_of[id(node)]
            chain.append(node)
        for depth, ancestor in enumerate(reversed(chain)):
            depth_of[id(ancestor)] = (depth, ancestor)
    # Deepest first: each ancestor is rebuilt after every changed node below it.
    for _depth, ancestor in sorted(depth_of.values(), key=lambda entry: -entry[0]):
        new_of[id(ancestor)] = _with_children_swapped(ancestor, new_of)
    swapped = new_of[id(module)]
    assert isinstance(swapped, cst.Module)
    return swapped


def _with_children_swapped(node: cst.CSTNode, new_of: dict[int, cst.CSTNode]) -> cst.CSTNode:
    changes: dict[str, object] = {}
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        if isinstance(value, cst.CSTNode) and id(value) in new_of:
            changes[field.name] = new_of[id(value)]
        elif isinstance(value, (tuple, list)) and any(id(item) in new_of for item in value):
            changes[field.name] = type(value)(new_of.get(id(item), item) for item in value)
    return node.with_changes(**changes)


def apply_replacements(module: cst.Module, replacements: Sequence[Replacement], filename: str = "") -> cst.Module:
    """`module` with every replacement applied and the imports they need added.

    Raises `FixFailed` when a target was not reached, which happens when it
    sits inside another fix's target: one of the two would be lost.
    """
    if not replacements:
        return module
    updated = _swapped(module, replacements)
    return add_imports(updated, [(module_name, name) for fix in replacements for module_name, name in fix.imports], filename)
