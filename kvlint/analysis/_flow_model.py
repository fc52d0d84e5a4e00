"""The data flow's model: a binding (`Definition`) and the state of every name at one point (`Env`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

DEFINITION_KINDS = (
    "assign",
    "augassign",
    "param",
    "for",
    "with",
    "walrus",
    "unpack",
    "import",
    "def",
    "except",
    "other",
)


@dataclass(frozen=True)
class Definition:
    kind: str
    target: cst.Name
    value: Optional[cst.BaseExpression] = None
    source: Optional[cst.BaseExpression] = None
    unpack_index: Optional[int] = None
    param: Optional[cst.Param] = None


Defs = frozenset[Definition]
# name -> definitions that may hold at this point; None is an unreachable point.
Env = Optional[dict[str, Defs]]


def merge(*envs: Env) -> Env:
    """The state where control paths join: the union of each name's definitions."""
    reachable = [env for env in envs if env is not None]
    if not reachable:
        return None
    merged: dict[str, Defs] = dict(reachable[0])
    for env in reachable[1:]:
        for name, defs in env.items():
            merged[name] = merged[name] | defs if name in merged else defs
    return merged


def copy_env(env: Env) -> Env:
    return None if env is None else dict(env)
