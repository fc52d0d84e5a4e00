"""The base of every kvlint codemod command: a thin LibCST command over kvlint's fixing.

A command finds the fixes `kvlint fix` would apply to the file it is handed,
limited to its own rule codes (`kvlint.running.plan.codemod_request`: the same
configuration, selection, `ignore` and `per-file-ignores`), and applies them
with `kvlint.fix.apply_replacements`. The fixes are computed on the very tree
being transformed, because LibCST's runner hands `transform_module_impl` a copy.

This package imports kvlint; nothing in kvlint imports it.
"""

from __future__ import annotations

from typing import ClassVar

import libcst as cst
from libcst.codemod import CodemodCommand

from kvlint.running.checker import fixable_replacements
from kvlint.fix import apply_replacements
from kvlint.running.plan import codemod_request


class RuleFixCommand(CodemodCommand):
    DESCRIPTION = "Apply kvlint's safe fixes for the given rule codes."
    # Empty: every fixable rule. Subclasses name the codes of their rewrite.
    CODES: ClassVar[tuple[str, ...]] = ()

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        filename = self.context.filename or "<stdin>"
        request = codemod_request(filename, self.CODES)
        return apply_replacements(tree, fixable_replacements(request, tree), filename)
