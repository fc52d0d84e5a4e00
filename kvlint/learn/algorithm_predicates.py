"""The speculative algorithms each predicate method of the algorithm enum holds for.

A guard over a worker's build rarely compares the algorithm's name; it calls a predicate of the
enum: `if self.is_eagle(): return EAGLEWorkerV2`. The tree states what each holds for in its body:
`def is_eagle(self): return self in (SpeculativeAlgorithm.EAGLE, SpeculativeAlgorithm.EAGLE3)`
(or `self == SpeculativeAlgorithm.DFLASH`, `self is ...`), the members named as attributes of the
class defining it. The algorithm enum is the class whose predicates name some algorithm the
unified-memory gate admits: another enum's predicates (a device's `is_cuda`) say nothing of the
algorithm. A predicate defined twice in that class, or once in another shape, is not read.
"""

from __future__ import annotations

import ast
import re
from typing import Iterable, Optional

from kvlint.learn.memo import remembered
from kvlint.learn.scope import Scope
from kvlint.learn.tree import names_spelled, parsed_tree

# The body a predicate's reading needs, looked for before the file is parsed.
_PREDICATE_BODY = re.compile(rb"return self (?:in \(|==|is )")
# A predicate's members, by its name: the algorithms it holds for.
Predicates = tuple[tuple[str, frozenset[str]], ...]


def learn_algorithm_predicates(scope: Scope, algorithms: Iterable[str]) -> Predicates:
    """The predicates of the class whose predicates name one of `algorithms` (the admitted ones)."""
    wanted = set(algorithms)
    found: dict[str, dict[str, Optional[frozenset[str]]]] = {}
    for answer in scope.survey(class_predicates, tuple(sorted(wanted - {"None"}))).values():
        for klass, method, members in answer:
            methods = found.setdefault(klass, {})
            # Defined twice (in two files, or a branch each): which one runs is not read.
            methods[method] = members if method not in methods else None
    chosen = [methods for methods in found.values()
              if any(members and members & wanted for members in methods.values())]
    if len(chosen) != 1:
        return ()
    return tuple(sorted((method, members) for method, members in chosen[0].items() if members is not None))


def class_predicates(data: bytes, algorithms: tuple[str, ...]) -> tuple[tuple[str, str, Optional[frozenset[str]]], ...]:
    """Each method of a class that tests `self` against the class's own members, as (class,
    method, members); a method of that name in another shape, members None. Only in a file that
    spells one of `algorithms`: the enum's file names its members."""
    if not names_spelled(data, algorithms) or _PREDICATE_BODY.search(data) is None:
        return ()
    return tuple(remembered("class-predicates", data, (), lambda: list(_predicates(data))))


def _predicates(data: bytes) -> list[tuple[str, str, Optional[frozenset[str]]]]:
    tree = parsed_tree(data)
    if tree is None:
        return []
    found: list[tuple[str, str, Optional[frozenset[str]]]] = []
    for klass in (node for node in tree.body if isinstance(node, ast.ClassDef)):
        methods = [node for node in klass.body if isinstance(node, ast.FunctionDef)]
        read = {method.name: _members(method, klass.name) for method in methods}
        if any(members is not None for members in read.values()):
            found.extend((klass.name, name, members) for name, members in read.items()
                         if name.startswith("is_") or members is not None)
    return found


def _members(method: ast.FunctionDef, klass: str) -> Optional[frozenset[str]]:
    """The members `method` tests `self` against, where its body is that test alone."""
    body = method.body[1:] if _is_docstring(method.body[0]) else method.body
    arguments = method.args
    if len(body) != 1 or len(arguments.args) != 1 or arguments.vararg or arguments.kwarg or arguments.kwonlyargs:
        return None
    returned = body[0].value if isinstance(body[0], ast.Return) else None
    if not (isinstance(returned, ast.Compare) and len(returned.ops) == 1
            and isinstance(returned.left, ast.Name) and returned.left.id == "self"):
        return None
    operator, value = returned.ops[0], returned.comparators[0]
    if isinstance(operator, ast.In) and isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        items = list(value.elts)
    elif isinstance(operator, (ast.Eq, ast.Is)):
        items = [value]
    else:
        return None
    members = [item.attr for item in items
               if isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == klass]
    return frozenset(members) if members and len(members) == len(items) else None


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
