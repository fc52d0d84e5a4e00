"""What one file states of the unified-memory gates: allow-sets of backend names, and refusals.

A gate is a module function that reads the unified-memory flag (`cfg.enable_unified_memory`).
Only what it states at its top level counts, after no early return but the flag's own guard
(`if not cfg.enable_unified_memory: return`) or the guard of a flag the function itself turns on
under the unified one (`if cfg.enable_unified_memory: declare(..., enable_page_major_kv_layout=True)`
then `if not cfg.enable_page_major_kv_layout: return`): a statement inside a branch, or after
another return, holds only for some configurations, and would make a wrong `latent`.

- A refusal: `assert not cfg.<flag>` (`enable_two_batch_overlap`).
- An allow-set: `assert <backends> <= <set>` (or `in`), `<backends>` bound from a call of a
  function naming backends (`set(attention_backends_of(...))`), `<set>` a set of string literals:
  a literal, `set(...)`/`frozenset(...)` of one, a union of them, or a name bound to those in the
  function (on every branch: the union of all) or at module level. Anything else (a set imported,
  computed, built from a call) is read as unreadable, and no backend is refused by it.
- The speculative algorithms admitted: `assert cfg.speculative_algorithm in (None, "EAGLE", ...)`
  (a field whose name ends in `algorithm`, against literals; `None` is no speculation).
- A draft allow-set: under a top-level `if cfg.speculative_algorithm in ("EAGLE", ...):` with no
  `else`, `assert <drafts> <= <set>` where `<drafts>` is bound from the draft's backend flag (an
  attribute ending in `draft_attention_backend`): the backends a draft may run on, under those
  algorithms only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

from kvlint.api.rule import one_line_code
from kvlint.learn.memo import remembered
from kvlint.learn.statements import statements_spelling
from kvlint.learn.tree import parsed_tree

# The engine's `--enable-unified-memory`, as a config attribute: the flag the unified pool stands behind.
UNIFIED_FLAG = "enable_unified_memory"


@dataclass(frozen=True)
class Refusal:
    flag: str
    line: int = field(compare=False)


@dataclass(frozen=True)
class AllowSet:
    """The names an allow-set admits; `names` None when the set is not readable (`why`)."""

    function: str
    names: Optional[tuple[str, ...]]
    why: str = ""
    line: int = field(compare=False, default=0)


@dataclass(frozen=True)
class AlgorithmSet:
    """The speculative algorithms the gate admits ("None": no speculation)."""

    names: tuple[str, ...]
    line: int = field(compare=False, default=0)


@dataclass(frozen=True)
class DraftAllowSet:
    """The backends a draft may run on, under the speculative algorithms `under`."""

    names: tuple[str, ...]
    under: tuple[str, ...]
    line: int = field(compare=False, default=0)


Stated = Union[Refusal, AllowSet, AlgorithmSet, DraftAllowSet]


def unified_gates(data: bytes, flag: str) -> tuple[Stated, ...]:
    """Each refusal and allow-set the file's gates state under `flag`, remembered by content."""
    if flag.encode() not in data or b"assert" not in data:
        return ()
    return tuple(remembered("unified-gates", data, (flag,), lambda: list(_gates_of(data, flag))))


def _gates_of(data: bytes, flag: str) -> Iterator[Stated]:
    # Most files naming the flag only read it: the statements spelling it, cut out and parsed
    # alone, say whether some function asserts under it, before the whole file is parsed.
    spelling = [statement for statement, _, _ in statements_spelling(data, {flag})]
    if not any(isinstance(statement, ast.FunctionDef) and _reads(statement, flag)
               and any(isinstance(inner, ast.Assert) for inner in ast.walk(statement)) for statement in spelling):
        return
    tree = parsed_tree(data)
    if tree is None:
        return
    constants = _module_sets(tree)
    for function in tree.body:
        if isinstance(function, ast.FunctionDef) and _reads(function, flag):
            yield from _stated(function, flag, constants)


def _reads(node: ast.AST, flag: str) -> bool:
    return any(isinstance(inner, ast.Attribute) and inner.attr == flag for inner in ast.walk(node))


def _stated(function: ast.FunctionDef, flag: str, constants: dict[str, Optional[frozenset[str]]]) -> Iterator[Stated]:
    # Under the flag, every top-level statement runs until a return the flag does not rule out.
    implied = _implied_flags(function, flag)
    for statement in function.body:
        guard = _guard_flag(statement)
        if guard is not None and (guard == flag or guard in implied):
            continue
        if any(isinstance(inner, ast.Return) for inner in ast.walk(statement)):
            # A return the gate's flag does not decide: what follows holds for some configurations only.
            return
        if isinstance(statement, ast.If) and not statement.orelse:
            under = algorithms_tested(statement.test)
            if under is not None:
                yield from _draft_sets(statement.body, under, function, constants)
        if not isinstance(statement, ast.Assert):
            continue
        test = statement.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Attribute):
            yield Refusal(test.operand.attr, statement.lineno)
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.LtE, ast.In)):
            if _backends_value(function, test.left):
                names, why = _set_names(test.comparators[0], function, constants)
                yield AllowSet(function.name, names, why, statement.lineno)
            elif isinstance(test.ops[0], ast.In) and (algorithms := algorithms_tested(test)) is not None:
                yield AlgorithmSet(algorithms, statement.lineno)


def algorithms_tested(test: ast.expr) -> Optional[tuple[str, ...]]:
    """The algorithms of `x.<...algorithm> in (<literals>)` or `== <literal>`, "None" for `None`."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.Eq))):
        return None
    if not (isinstance(test.left, ast.Attribute) and test.left.attr.endswith("algorithm")):
        return None
    value = test.comparators[0]
    items = value.elts if isinstance(value, (ast.Tuple, ast.List, ast.Set)) and isinstance(test.ops[0], ast.In) else [value]
    names = [item.value for item in items if isinstance(item, ast.Constant) and (item.value is None or isinstance(item.value, str))]
    return tuple(sorted(str(name) for name in names)) if names and len(names) == len(items) else None


def _draft_sets(body: list[ast.stmt], under: tuple[str, ...], function: ast.FunctionDef,
                constants: dict[str, Optional[frozenset[str]]]) -> Iterator[DraftAllowSet]:
    """The draft allow-sets asserted at the top of a branch taken under the algorithms `under`."""
    for statement in body:
        if any(isinstance(inner, ast.Return) for inner in ast.walk(statement)):
            return
        test = statement.test if isinstance(statement, ast.Assert) else None
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.LtE)):
            continue
        if _draft_value(function, test.left, 3):
            names, _why = _set_names(test.comparators[0], function, constants)
            if names is not None:
                yield DraftAllowSet(names, under, statement.lineno)


def _draft_value(function: ast.FunctionDef, value: ast.expr, depth: int) -> bool:
    """Whether `value` reads the draft's backend flag, directly or through names bound in `function`."""
    for inner in ast.walk(value):
        if isinstance(inner, ast.Attribute) and inner.attr.endswith("draft_attention_backend"):
            return True
        if isinstance(inner, ast.Name) and depth > 0:
            if any(_draft_value(function, bound, depth - 1) for bound in _bound(function, inner.id)):
                return True
    return False


def _guard_flag(statement: ast.stmt) -> Optional[str]:
    """`F` of `if not x.F: return`."""
    if not (isinstance(statement, ast.If) and not statement.orelse and len(statement.body) == 1):
        return None
    test = statement.test
    if isinstance(statement.body[0], ast.Return) and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand.attr if isinstance(test.operand, ast.Attribute) else None
    return None


def _implied_flags(function: ast.FunctionDef, flag: str) -> set[str]:
    """Flags the function turns on under `flag`: `X=True` keywords inside `if x.<flag>:`."""
    implied = set()
    for statement in function.body:
        test = statement.test if isinstance(statement, ast.If) else None
        if isinstance(test, ast.Attribute) and test.attr == flag:
            for inner in ast.walk(statement):
                if isinstance(inner, ast.keyword) and isinstance(inner.value, ast.Constant) and inner.value.value is True:
                    implied.add(str(inner.arg))
    return implied


def _backends_value(function: ast.FunctionDef, value: ast.expr) -> bool:
    """Whether `value` is (a name bound to) a call of a function naming backends."""
    if isinstance(value, ast.Name):
        bound = _bound(function, value.id)
        return bool(bound) and all(_backends_value(function, item) for item in bound)
    return any(isinstance(inner, ast.Call) and "backends" in _called(inner) for inner in ast.walk(value))


def _bound(function: ast.FunctionDef, name: str) -> list[ast.expr]:
    """The values `name` is assigned in `function`."""
    return [node.value for node in ast.walk(function) if isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == name for target in node.targets)]


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _module_sets(tree: ast.Module) -> dict[str, Optional[frozenset[str]]]:
    found: dict[str, Optional[frozenset[str]]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            found[statement.targets[0].id] = _literal_set(statement.value, {}, found)
    return found


def _set_names(value: ast.expr, function: ast.FunctionDef,
               constants: dict[str, Optional[frozenset[str]]]) -> tuple[Optional[tuple[str, ...]], str]:
    local: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    local.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            local.setdefault(node.target.id, []).append(ast.Constant(None))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            # `allowed.update(...)`: a set changed in place is not the literal it was bound to.
            local.setdefault(node.func.value.id, []).append(ast.Constant(None))
    names = _literal_set(value, local, constants)
    if names is None:
        # Quoted as a message quotes code: every reason naming this gate is one line.
        return None, f"`{one_line_code(ast.unparse(value))}` is not a set of names kvlint can read"
    return tuple(sorted(names)), ""


def _literal_set(value: ast.expr, local: dict[str, list[ast.expr]],
                 constants: dict[str, Optional[frozenset[str]]]) -> Optional[frozenset[str]]:
    """The strings of a set literal, `set(...)`/`frozenset(...)` of one, a union, or a name bound to
    those (the union of a local name's bindings); None for anything else."""
    if isinstance(value, (ast.Set, ast.Tuple, ast.List)):
        items = [item.value for item in value.elts if isinstance(item, ast.Constant) and isinstance(item.value, str)]
        return frozenset(items) if len(items) == len(value.elts) else None
    if isinstance(value, ast.Call) and _called(value) in ("set", "frozenset") and len(value.args) == 1 and not value.keywords:
        return _literal_set(value.args[0], local, constants)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):
        left, right = _literal_set(value.left, local, constants), _literal_set(value.right, local, constants)
        return None if left is None or right is None else left | right
    if isinstance(value, ast.Name):
        if value.id in local:
            parts = [_literal_set(item, {}, constants) for item in local[value.id]]
            return None if any(part is None for part in parts) else frozenset().union(*parts)  # type: ignore[arg-type]
        return constants.get(value.id)
    return None
