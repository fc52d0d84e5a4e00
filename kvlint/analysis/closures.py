"""Reaching definitions past a function's own scope: the closure variables a nested function reads.

`kvlint.analysis.dataflow` answers for one function and leaves a name it never
binds unknown. A function defined inside another reads such a name from the
enclosing function (`k_cache` bound there, paged in a nested `def` handed to a
kernel wrapper); the enclosing function's flow says what reaches the nested
`def` statement (`FunctionFlow.free_reaching`), through any depth of nesting.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.analysis.dataflow import function_flow
from kvlint.analysis._flow_model import Defs
from kvlint.analysis.index import module_index
from kvlint.api.rule import FileContext


def closure_reaching(ctx: FileContext, name: cst.Name, func: cst.FunctionDef) -> Optional[tuple[Defs, cst.FunctionDef]]:
    """The definitions reaching `name`, read in `func`, with the function they are in."""
    flow = function_flow(ctx, func)
    defs = flow.reaching(name)
    if defs is not None:
        return defs, func
    enclosing = module_index(ctx).enclosing
    inner = func
    while not flow.binds(name.value) and id(inner) in enclosing:
        outer = enclosing[id(inner)]
        flow = function_flow(ctx, outer)
        defs = flow.free_reaching(inner, name.value)
        if defs is not None:
            return defs, outer
        inner = outer
    return None
