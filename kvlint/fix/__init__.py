"""Fixing: swap each fix's target node for its new node, add the imports it
needs, repeat until the tree is stable, and write the result atomically.

This package knows how to apply a `Replacement`, not which ones to apply: the
caller (`kvlint.running.checker`, or a `codemods/` command) hands it a function that
returns the replacements the request allows on a tree, after selection and
suppressions. So fixing depends on the API and analysis layers only, and
nothing here imports the running layer or `codemods/`.
"""

from kvlint.fix.apply import FixFailed, apply_replacements
from kvlint.fix.loop import MAX_FIX_ROUNDS, fix_until_stable

__all__ = ["MAX_FIX_ROUNDS", "FixFailed", "apply_replacements", "fix_until_stable"]
