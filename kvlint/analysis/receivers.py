"""The classes a call's receiver can be, as far as the tree says (CPython's `ast`).

`self` is the enclosing class; `self.<attribute>` the classes the class builds it
as (`self.pool = TensorPool(...)`) or annotates it with (`self.pool: Optional[P]`);
a plain name the classes its parameter annotation names, or its assignments build
(`pool = P(...)`, `pool = self.pool`). Anything else, or a class the caller does
not know, is unknown (None): then every class defining the method counts.
"""

from __future__ import annotations

import ast
from typing import Collection, Optional, Union

from kvlint.api.identity_memo import IdentityMemo

_Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def receiver_classes(
    receiver: ast.expr, function: Optional[_Function], klass: Optional[ast.ClassDef], known: Collection[str]
) -> Optional[frozenset[str]]:
    """The classes (among `known`) `receiver` can be inside `function` of `klass`; None when unknown."""
    found = _classes(receiver, function, klass, 0)
    if not found or not all(name in known for name in found):
        return None
    return frozenset(found)


def _classes(receiver: ast.expr, function: Optional[_Function], klass: Optional[ast.ClassDef], depth: int) -> set[str]:
    if depth > 3:
        return set()
    if isinstance(receiver, ast.Name) and receiver.id == "self" and klass is not None:
        return {klass.name}
    attribute = self_attribute(receiver)
    if attribute and klass is not None:
        return dict(attribute_classes(klass)).get(attribute, set())
    if isinstance(receiver, ast.Name) and function is not None:
        return _name_classes(receiver.id, function, klass, depth)
    return set()


def _name_classes(name: str, function: _Function, klass: Optional[ast.ClassDef], depth: int) -> set[str]:
    args = function.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.arg == name:
            return annotated_classes(arg.annotation) if arg.annotation is not None else set()
    found: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            named = annotated_classes(node.annotation)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            named = _value_classes(node.value, function, klass, depth)
        elif isinstance(node, (ast.For, ast.With, ast.NamedExpr, ast.AugAssign)) and name in _bound_by(node):
            return set()
        else:
            continue
        if not named:
            # One assignment kvlint cannot read leaves the name unknown.
            return set()
        found |= named
    return found


def _value_classes(value: ast.expr, function: _Function, klass: Optional[ast.ClassDef], depth: int) -> set[str]:
    if isinstance(value, ast.Call):
        built = _trailing(value.func)
        return {built} if built and built[:1].isupper() else set()
    return _classes(value, function, klass, depth + 1)


def _bound_by(node: ast.AST) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.For):
        targets = [node.target]
    elif isinstance(node, ast.With):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    elif isinstance(node, (ast.NamedExpr, ast.AugAssign)):
        targets = [node.target]
    return {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}


def attribute_classes(klass: ast.ClassDef) -> list[tuple[str, set[str]]]:
    """Each `self.<attribute>` of a class's methods built as `C(...)`, annotated `C` / `Optional[C]`,
    assigned a parameter of its method annotated so (and never rebound there) or a value its method
    asserts `isinstance(value, C)`, with those classes
    (an attribute also given anything else is left out: unknown). Kept for the last few classes
    asked: a rule asks once per door call, and a backend class runs to thousands of lines."""
    return _ATTRIBUTES.get(klass, lambda: _attribute_classes(klass))


_ATTRIBUTES: IdentityMemo[ast.ClassDef, list[tuple[str, set[str]]]] = IdentityMemo(8)


def _attribute_classes(klass: ast.ClassDef) -> list[tuple[str, set[str]]]:
    found: dict[str, set[str]] = {}
    unknown: set[str] = set()
    annotated: set[str] = set()
    for method in (node for node in ast.walk(klass) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))):
        assigned: list[tuple[str, ast.expr]] = []
        rebound: set[str] = set()
        for node in ast.walk(method):
            if isinstance(node, ast.AnnAssign):
                attribute = self_attribute(node.target)
                if attribute:
                    annotated.add(attribute)
                    found.setdefault(attribute, set()).update(annotated_classes(node.annotation))
                elif isinstance(node.target, ast.Name):
                    rebound.add(node.target.id)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    attribute = self_attribute(target)
                    if attribute:
                        assigned.append((attribute, node.value))
                    else:
                        rebound |= {name.id for name in ast.walk(target) if isinstance(name, ast.Name)}
            rebound |= _bound_by(node)
        parameters = _annotated_parameters(method, rebound) if assigned else {}
        asserted = _asserted_classes(method) if assigned else {}
        for attribute, value in assigned:
            built = _value_named(value, parameters) or asserted.get(ast.dump(value), set())
            if built:
                found.setdefault(attribute, set()).update(built)
            else:
                unknown.add(attribute)
    # An annotation states the attribute's class whatever else assigns it; an assignment alone does not.
    return [(attribute, classes) for attribute, classes in sorted(found.items())
            if classes and (attribute in annotated or attribute not in unknown)]


def _asserted_classes(method: _Function) -> dict[str, set[str]]:
    """The classes `assert isinstance(value, C)` (or `(C, D)`) states of each value in `method`, by the
    value's tree: `self.kv_pool = runner.token_to_kv_pool` after asserting that is a `MiniMaxSparseKVPool`."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(method):
        test = node.test if isinstance(node, ast.Assert) else None
        if not (isinstance(test, ast.Call) and _trailing(test.func) == "isinstance" and len(test.args) == 2):
            continue
        value, kinds = test.args
        parts = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        names = {_trailing(part) for part in parts}
        if all(name and name[:1].isupper() for name in names):
            found.setdefault(ast.dump(value), set()).update(name for name in names if name)
    return found


def _value_named(value: ast.expr, parameters: dict[str, set[str]]) -> set[str]:
    """The classes an assigned value is by its own text: a constructor call, or an annotated parameter."""
    if isinstance(value, ast.Call):
        built = _trailing(value.func)
        return {built} if built and built[:1].isupper() else set()
    if isinstance(value, ast.Name):
        return parameters.get(value.id, set())
    return set()


def _annotated_parameters(function: _Function, rebound: set[str]) -> dict[str, set[str]]:
    """The parameters of `function` annotated with classes, but those the body rebinds."""
    args = function.args
    every = (*args.posonlyargs, *args.args, *args.kwonlyargs)
    typed = {arg.arg: annotated_classes(arg.annotation) for arg in every if arg.annotation is not None}
    return {name: classes for name, classes in typed.items() if classes and name not in rebound}


def annotated_classes(annotation: ast.expr) -> set[str]:
    """The classes an annotation names: `C`, `m.C`, `"C"`, `Optional[C]`, `Union[C, D]`, `C | None`."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return set()
    if isinstance(annotation, ast.Subscript) and _trailing(annotation.value) in ("Optional", "Union"):
        inner = annotation.slice
        parts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return {name for part in parts for name in annotated_classes(part)}
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return annotated_classes(annotation.left) | annotated_classes(annotation.right)
    name = _trailing(annotation)
    return {name} if name and name != "None" and name[:1].isupper() else set()


def self_attribute(target: ast.expr) -> str:
    """`attribute` for `self.attribute`, else ""."""
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    return ""


def _trailing(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def assigned_values(method: _Function, name: str) -> Optional[list[ast.expr]]:
    """The values `method` assigns the local `name` (`name = value`); None where it is a parameter or
    is bound any other way too (unpacked, a loop, `with`, `except ... as`, an import)."""
    args = method.args
    if name in {arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
        return None
    values: list[ast.expr] = []
    simple = 0
    for node in ast.walk(method):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            values.append(node.value)
            simple += sum(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    return values if bindings(method, name) == simple else None


def bindings(root: ast.AST, name: str) -> int:
    """How many places below `root` bind `name`, in any form (a target, `except ... as`, an import,
    a definition, `global`)."""
    count = 0
    for node in ast.walk(root):
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            count += 1
        elif isinstance(node, ast.ExceptHandler) and node.name == name:
            count += 1
        elif isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            count += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            count += node is not root
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            count += 1
    return count

