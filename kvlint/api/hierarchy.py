"""Closures over a class hierarchy read as class name -> base names (`class X(A, b.B):` headers)."""

from __future__ import annotations

from typing import Collection, Mapping


def subclasses(roots: Collection[str], bases: Mapping[str, Collection[str]]) -> set[str]:
    """`roots` and every class deriving from one of them, at any depth."""
    children: dict[str, set[str]] = {}
    for child, parents in bases.items():
        for parent in parents:
            children.setdefault(parent, set()).add(child)
    closure, pending = set(roots), list(roots)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in closure:
                closure.add(child)
                pending.append(child)
    return closure


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
