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

from kvlint.analysis.ast_walk import children, code_units
from kvlint.api.contract import DEFAULT_KV_NAME_FALLBACK, Contract
from kvlint.rules.layout._paged_kv import FALLBACK_NAME_WORDS, HELPER_LAYOUT_NAMES

CANDIDATE_CALLS = frozenset({"view", "reshape", "contiguous", "flatten"})


class MayHoldLayoutFinding:
    """Mixed into each layout rule: its `Rule.may_flag` is `may_hold_layout_finding`."""

    @classmethod
    def may_flag(cls, data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
        return may_hold_layout_finding(data, tree, contract, helper_names)


# The three layout rules ask about the same file in a row: (tree, contract, helper names, answer).
_last_answer: list[tuple[ast.Module, Contract, frozenset[str], bool]] = []


def may_hold_layout_finding(data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
    if _last_answer and _last_answer[0][0] is tree and _last_answer[0][1] is contract and _last_answer[0][2] == helper_names:
        return _last_answer[0][3]
    unit_test = _Unit(contract, helper_names)
    answer = any(unit_test.holds(unit) for unit in _units(data, tree, contract, helper_names))
    _last_answer[:] = [(tree, contract, helper_names, answer)]
    return answer


class _Unit:
    def __init__(self, contract: Contract, helper_names: frozenset[str]) -> None:
        self.accessors = frozenset(contract.buffer_accessors)
        self.candidates = CANDIDATE_CALLS | helper_names
        self.starts = self.accessors | frozenset(contract.paged_helpers) | HELPER_LAYOUT_NAMES | helper_names
        self.kv_name = contract.kv_name_pattern

    def holds(self, unit: list[ast.AST]) -> bool:
        """Whether the unit holds both a candidate call and a start of paged KV."""
        called = has_start = False
        stack: list[ast.AST] = list(unit)
        while stack and not (called and has_start):
            node = stack.pop()
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
                called = called or name in self.candidates
                has_start = has_start or name in self.starts
            elif isinstance(node, ast.Attribute):
                has_start = has_start or node.attr in self.accessors
            elif isinstance(node, ast.Name):
                has_start = has_start or node.id in self.accessors
            elif isinstance(node, ast.arg):
                has_start = has_start or self.kv_name.match(node.arg) is not None
            stack.extend(children(node))
        return called and has_start


def _units(data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> Iterator[list[ast.AST]]:
    """Each outermost function (its nested ones included) whose text names a candidate call and a
    start (words cost far less than a walk), then the module- and class-level code."""
    call_words = _encoded(CANDIDATE_CALLS | helper_names)
    start_words = _encoded(
        {*contract.buffer_accessors, *contract.paged_helpers, *HELPER_LAYOUT_NAMES, *helper_names}
        | (set(FALLBACK_NAME_WORDS) if contract.kv_name_fallback == DEFAULT_KV_NAME_FALLBACK else set())
    )
    # A custom kv-name pattern promises no word: a parameter it matches is found by the walk alone.
    words_tell = contract.kv_name_fallback == DEFAULT_KV_NAME_FALLBACK
    for roots, text in code_units(data, tree):
        if text is None or not words_tell:
            yield roots
        elif any(word in text for word in call_words) and any(word in text for word in start_words):
            yield roots


def _encoded(words: set[str] | frozenset[str]) -> tuple[bytes, ...]:
    return tuple(word.encode() for word in words)
