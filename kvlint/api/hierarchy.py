"""Closures over a class hierarchy read as class name -> base names (`class X(A, b.B):` headers)."""

from __future__ import annotations

from typing import Collection, Mapping, Optional


def subclasses(roots: Collection[str], bases: Mapping[str, Collection[str]],
               children: Optional[Mapping[str, Collection[str]]] = None) -> set[str]:
    """`roots` and every class deriving from one of them, at any depth (`children`: the hierarchy
    the other way round, `children_of(bases)`, for a caller asking many times)."""
    if children is None:
        children = children_of(bases)
    closure, pending = set(roots), list(roots)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in closure:
                closure.add(child)
                pending.append(child)
    return closure


def children_of(bases: Mapping[str, Collection[str]]) -> dict[str, set[str]]:
    """Each class's direct subclasses."""
    children: dict[str, set[str]] = {}
    for child, parents in bases.items():
        for parent in parents:
            children.setdefault(parent, set()).add(child)
    return children


def superclasses(roots: Collection[str], bases: Mapping[str, Collection[str]]) -> set[str]:
    """Every class one of `roots` derives from, at any depth (a root only where another derives from it)."""
    found: set[str] = set()
    pending = list(roots)
    while pending:
        for parent in bases.get(pending.pop(), ()):
            if parent not in found:
                found.add(parent)
                pending.append(parent)
    return found
