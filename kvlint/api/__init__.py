"""The API layer: plain data (`types`), the rule base classes (`rule`), the
target codebase's names (`contract`) and `[tool.kvlint]` (`config`).

It imports nothing else of kvlint; every other layer may import it.
"""
