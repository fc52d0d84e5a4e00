"""Whether a file could hold a layout finding, read from CPython's tree before LibCST parses it.

Every KV201-KV203 finding is a call (`.view`, `.reshape`, `.contiguous`,
`.flatten`, their `torch.` spellings, or a helper with a layout fact) whose
tensor is paged KV, and `_paged_kv` finds paged KV inside one function only,
starting from a buffer accessor (`get_key_buffer(i)`, `self.k_buffer[i]`,
`for buf in self.k_buffer`), a paged helper's call, a helper returning paged
KV, or a parameter named like a KV cache. A function holding no such call, or
no such start, holds no finding; module- and class-level code counts as one
more such unit. Names are matched, not resolved: a superset of what the rules
follow, so no finding is lost.
"""

from __future__ import annotations

import ast
from typing import Iterator

from kvlint.analysis.ast_walk import children
from kvlint.api.contract import Contract
from kvlint.rules.layout._paged_kv import HELPER_LAYOUT_NAMES

CANDIDATE_CALLS = frozenset({"view", "reshape", "contiguous", "flatten"})
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class MayHoldLayoutFinding:
    """Mixed into each layout rule: its `Rule.may_flag` is `may_hold_layout_finding`."""

    @classmethod
    def may_flag(cls, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
        return may_hold_layout_finding(tree, contract, helper_names)


def may_hold_layout_finding(tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
    accessors = frozenset(contract.buffer_accessors)
    candidates = CANDIDATE_CALLS | helper_names
    starts = accessors | frozenset(contract.paged_helpers) | HELPER_LAYOUT_NAMES | helper_names
    kv_name = contract.kv_name_pattern
    for unit in _units(tree.body):
        called = has_start = False
        stack: list[ast.AST] = list(unit)
        while stack and not (called and has_start):
            node = stack.pop()
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
                called = called or name in candidates
                has_start = has_start or name in starts
            elif isinstance(node, ast.Attribute):
                has_start = has_start or node.attr in accessors
            elif isinstance(node, ast.Name):
                has_start = has_start or node.id in accessors
            elif isinstance(node, ast.arg):
                has_start = has_start or kv_name.match(node.arg) is not None
            stack.extend(children(node))
        if called and has_start:
            return True
    return False


def _units(body: list[ast.stmt]) -> Iterator[list[ast.AST]]:
    """Each outermost function (its nested ones included), then the module- and class-level code."""
    rest: list[ast.AST] = []
    classes = list(body)
    while classes:
        statement = classes.pop()
        if isinstance(statement, _DEFINITIONS):
            yield [statement]
        elif isinstance(statement, ast.ClassDef):
            rest.extend((*statement.decorator_list, *statement.bases, *statement.keywords))
            classes.extend(statement.body)
        else:
            rest.append(statement)
    yield rest
