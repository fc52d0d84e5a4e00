"""The codemod every kvlint fix goes through.

`RuleFixCommand` runs kvlint's rules on the tree it is handed, keeps the fixes
that survive suppressions and the allowed applicability, swaps each fix's
target node for its new node, and asks LibCST's `AddImportsVisitor` for the
imports the new code needs (added once, in the import block, never by string
editing). The fixes are computed on the very tree being transformed because
LibCST's codemod runner hands `transform_module_impl` a copy of the module.

`kvlint fix` runs this command with the selected codes; the per-rewrite
commands in this package are the same command with their own codes, for
`python -m libcst.tool codemod`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Optional

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor

if TYPE_CHECKING:
    from kvlint.checker import CheckRequest
    from kvlint.rule import Replacement


class RuleFixCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = "Apply kvlint's fixes for the given rule codes."
    # Empty: every fixable rule. Subclasses name the codes of their rewrite.
    CODES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, context: CodemodContext, request: Optional["CheckRequest"] = None) -> None:
        super().__init__(context)
        self._request = request
        self._fixes: dict[int, "Replacement"] = {}
        self.applied = 0

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        from kvlint.checker import fixable_replacements
        from kvlint.settings import codemod_request

        request = self._request or codemod_request(self.context.filename or "<stdin>", self.CODES)
        fixes = fixable_replacements(request, tree)
        self._fixes = {id(fix.target): fix for fix in fixes}
        for fix in fixes:
            for module, name in fix.imports:
                AddImportsVisitor.add_needed_import(self.context, module, name)
        result = super().transform_module_impl(tree)
        if self.applied != len(self._fixes):
            from kvlint.fixes import FixFailed

            raise FixFailed(f"{len(self._fixes) - self.applied} fix target(s) overlap another fix")
        return result

    def on_leave(
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        fix = self._fixes.get(id(original_node))
        if fix is None or fix.target is not original_node:
            return updated_node
        self.applied += 1
        return fix.new
