"""What a local name in a view's shape stands for: `ps = self.page_size; k.view(-1, ps, H, D)`.

The shape predicates (`_view_shape`) read spelling; a local that one assignment
binds where it is read spells what that assignment's value spells. A name with
several reaching definitions (a branch, a loop), or a parameter, is left as
written: its value is not one expression.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.analysis.dataflow import function_flow
from kvlint.api.rule import FileContext
from kvlint.rules.layout._view_shape import Bound, unbound


def bound_in(ctx: FileContext, function: Optional[cst.FunctionDef]) -> Bound:
    """The `Bound` of names read inside `function` (module level: none is followed)."""
    if function is None:
        return unbound
    flow = function_flow(ctx, function)

    def bound(name: cst.Name) -> Optional[cst.BaseExpression]:
        definitions = flow.reaching(name)
        if not definitions or len(definitions) != 1:
            return None
        (definition,) = definitions
        return definition.value if definition.kind in ("assign", "walrus") else None

    return bound
