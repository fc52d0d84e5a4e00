"""Which definitions of a door a call can reach, by the classes its receiver can be.

A safe fix wraps the loc in a `KVWriteLoc`: right only when every definition the call
can reach takes one. Where one uses its loc as a tensor (a kernel, `loc.numel()`) the
wrap breaks code that works, so the fix is unsafe and the message names that
definition; where none takes a write loc, the call is no door call at all.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from typing import Optional, Union

import libcst as cst

from kvlint.analysis.index import CallSite
from kvlint.analysis.mark_needs import needs_mark, refusing_none
from kvlint.analysis.receivers import receiver_classes
from kvlint.api.contract import Contract
from kvlint.api.door_kinds import TENSOR, DoorKind, not_a_write_loc, reachable
from kvlint.api.rule import FileContext
from kvlint.rules.write_loc._loc_origin import cpython_call

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


@dataclass(frozen=True)
class DoorCall:
    """The definitions a call of a door can reach, and how its receiver was read."""

    door: str
    kinds: tuple[DoorKind, ...]
    # The receiver as written, and the classes it can be (None: unknown).
    receiver: str
    classes: Optional[frozenset[str]]

    @property
    def is_door(self) -> bool:
        """False where every definition reached takes a tensor: a raw loc is what it wants."""
        return not self.kinds or any(kind.takes != TENSOR for kind in self.kinds)

    def may_refuse(self, contract: Contract) -> bool:
        """Whether some definition reached may refuse a bare loc (`needs_mark`); True where none was learned."""
        return not self.kinds or any(needs_mark(contract, kind) for kind in self.kinds)

    def unsafe_because(self) -> Optional[str]:
        """Why wrapping the loc in a write loc may break the call, one phrase; None where it cannot."""
        bad = not_a_write_loc(self.kinds)
        if bad is None:
            return None
        if self.classes is None:
            whose = f"the class of `{self.receiver}` is unknown, so every class defining `{self.door}` counts"
        else:
            whose = f"`{self.receiver}` can be {', '.join(f'`{name}`' for name in sorted(self.classes))}"
        return f"{bad.shown()} does not take a write loc, and {whose}"


def refusal_ruled_out(ctx: FileContext, site: CallSite, door: str) -> bool:
    """Whether no class the receiver can exactly be (`kvlint.analysis.exact_receivers`) runs a
    definition of `door` that may refuse a bare loc: asked where the classes it is named as may."""
    if not ctx.contract.class_facts or not isinstance(site.call.func, cst.Attribute):
        return False
    function, call = cpython_call(ctx, site.call)
    klass = site.klass.name.value if site.klass is not None else ""
    return call is not None and refusing_none(ctx.contract, klass, function, call, door) is not None


def door_call(ctx: FileContext, site: CallSite, door: str) -> DoorCall:
    contract = ctx.contract
    func = site.call.func
    receiver = ctx.code_for(func.value) if isinstance(func, cst.Attribute) else ""
    if not any(kind.name == door for kind in contract.door_kinds):
        return DoorCall(door, (), receiver, None)
    bases = dict(contract.door_bases)
    known = set(bases) | {kind.klass for kind in contract.door_kinds}
    classes = _receiver(ctx, site, receiver, known) if receiver else None
    return DoorCall(door, reachable(contract.door_kinds, bases, door, classes), receiver, classes)


def _receiver(ctx: FileContext, site: CallSite, receiver: str, known: set[str]) -> Optional[frozenset[str]]:
    try:
        expr = ast.parse(receiver, mode="eval").body
    except SyntaxError:
        return None
    holder = site.klass if site.klass is not None else site.function
    parsed = _parsed(ctx, holder) if holder is not None else None
    klass = parsed if isinstance(parsed, ast.ClassDef) else None
    function: Optional[_Function] = None
    if site.function is not None and parsed is not None:
        name = site.function.name.value
        function = next((node for node in ast.walk(parsed) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and node.name == name), None)
    return receiver_classes(expr, function, klass, known)


def _parsed(ctx: FileContext, node: cst.CSTNode) -> Optional[ast.stmt]:
    """The CPython tree of one class or function of the file (what the receiver is read from)."""
    def parse() -> Optional[ast.stmt]:
        try:
            body = ast.parse(textwrap.dedent(ctx.source_of(node).strip("\n") + "\n")).body
        except SyntaxError:
            return None
        return body[0] if body else None
    return ctx.analysis(("door-receiver", id(node)), parse)
