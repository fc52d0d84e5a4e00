"""The API layer: plain data (`types`), the rule base classes (`rule`), the
target codebase's names (`contract`), `[tool.kvlint]` (`config`), the facts a
helper gives its callers (`helpers`), the rules' trigger words as tested on a
file's bytes (`triggers`) and a path as findings show it (`paths`).

It imports nothing else of kvlint; every other layer may import it.
"""
