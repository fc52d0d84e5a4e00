"""KV301: which keys the TBO child builder puts into the dict it builds the child from.

The builder's dict is whatever it returns as `Batch(**name)`; no variable name
is assumed. Keys come from every form the builder uses to fill it: copy loops
over string lists (inline or a module-level constant), constant subscripts,
`update`, `setdefault`, the dict's own literal or `dict(...)` binding, and
keywords of the returning call itself.
"""

from __future__ import annotations

import ast
from typing import Optional

from kvlint.rules.tbo._facts import BuilderFact
from kvlint.rules.tbo._names import string_value, trailing_name
from kvlint.rules.tbo._source import SourceText
from kvlint.analysis.ast_walk import FUNCTIONS, Function, own_nodes



def find_builders(tree: ast.Module, name: str) -> list[Function]:
    """Module-level functions and methods of module-level classes called `name`."""
    found: list[Function] = []
    for statement in tree.body:
        if isinstance(statement, FUNCTIONS) and statement.name == name:
            found.append(statement)
        elif isinstance(statement, ast.ClassDef):
            found.extend(item for item in statement.body if isinstance(item, FUNCTIONS) and item.name == name)
    return found


def builder_fact(
    tree: ast.Module, function: Function, batch_class: str, imports: dict[str, str], source: SourceText
) -> Optional[BuilderFact]:
    """The builder's facts; None for a same-named function that never builds a batch."""
    if not any(isinstance(n, ast.Call) and trailing_name(n.func) == batch_class for n in own_nodes(function)):
        return None
    returned = _returned_call(function, batch_class)
    dict_name = _double_star_name(returned) if returned is not None else None
    keys: set[str] = set()
    anchor: Optional[ast.stmt] = None
    if returned is not None:
        keys.update(keyword.arg for keyword in returned.keywords if keyword.arg is not None)
    if dict_name is not None:
        keys.update(_keys_set(function, dict_name, _module_string_lists(tree)))
        anchor = _anchor(function, dict_name)
    anchor_line, indent = 0, ""
    if anchor is not None:
        anchor_line = anchor.end_lineno or anchor.lineno
        first = source.line(anchor.lineno)
        indent = first[: len(first) - len(first.lstrip())]
    return BuilderFact(
        function=function.name,
        line=function.lineno,
        dict_name=dict_name,
        batch_param=_batch_param(function),
        keys=frozenset(keys),
        anchor_line=anchor_line,
        indent=indent,
        batch_origin=imports.get(batch_class),
    )


def _returned_call(function: Function, batch_class: str) -> Optional[ast.Call]:
    for node in own_nodes(function):
        if (
            isinstance(node, ast.Return)
            and isinstance(node.value, ast.Call)
            and trailing_name(node.value.func) == batch_class
            and _double_star_name(node.value) is not None
        ):
            return node.value
    return None


def _double_star_name(call: ast.Call) -> Optional[str]:
    for keyword in call.keywords:
        if keyword.arg is None and isinstance(keyword.value, ast.Name):
            return keyword.value.id
    return None


def _batch_param(function: Function) -> Optional[str]:
    for param in function.args.args:
        if param.arg not in ("self", "cls"):
            return param.arg
    return None


def _module_string_lists(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level `NAME = [..]` / `(..)` of string constants (copy loops may iterate them by name)."""
    constants: dict[str, list[str]] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        strings = _string_elements(value)
        if isinstance(target, ast.Name) and strings is not None:
            constants[target.id] = strings
    return constants


def _string_elements(node: ast.expr) -> Optional[list[str]]:
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    strings = [string_value(element) for element in node.elts]
    return None if any(s is None for s in strings) else [s for s in strings if s is not None]


def _is_dict(node: ast.expr, dict_name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == dict_name


def _subscript_key(node: ast.expr, dict_name: str) -> Optional[ast.expr]:
    """`d[k]` -> k, for the builder's dict `d` and a single index."""
    if isinstance(node, ast.Subscript) and _is_dict(node.value, dict_name):
        if not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            return node.slice
    return None


def _assigned_targets(node: ast.AST) -> list[ast.expr]:
    targets: list[ast.expr]
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(element.value if isinstance(element, ast.Starred) else element for element in target.elts)
        else:
            flat.append(target)
    return flat


def _keys_set(function: Function, dict_name: str, constants: dict[str, list[str]]) -> set[str]:
    keys: set[str] = set()
    for node in own_nodes(function):
        keys.update(_loop_keys(node, dict_name, constants))
        for target in _assigned_targets(node):
            text = string_value(_subscript_key(target, dict_name))
            if text is not None:
                keys.add(text)
            if isinstance(node, ast.Assign) and _is_dict(target, dict_name):
                keys.update(_literal_keys(node.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_dict(node.func.value, dict_name):
            keys.update(_method_keys(node, node.func.attr))
    return keys


def _loop_keys(node: ast.AST, dict_name: str, constants: dict[str, list[str]]) -> list[str]:
    """The keys of `for key in [...]: ... d[key] = ...` (or a constant list named in the loop)."""
    if not isinstance(node, (ast.For, ast.AsyncFor)) or not isinstance(node.target, ast.Name):
        return []
    strings = constants.get(node.iter.id) if isinstance(node.iter, ast.Name) else _string_elements(node.iter)
    if not strings:
        return []
    variable = node.target.id
    for statement in node.body:
        for inner in own_nodes(statement):
            for target in _assigned_targets(inner):
                key = _subscript_key(target, dict_name)
                if isinstance(key, ast.Name) and key.id == variable:
                    return strings
    return []


def _literal_keys(node: ast.expr) -> list[str]:
    """String keys of a `{...}` literal or keywords of a `dict(...)` call."""
    if isinstance(node, ast.Dict):
        keys = [string_value(key) for key in node.keys if key is not None]
        return [key for key in keys if key is not None]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        names = [keyword.arg for keyword in node.keywords if keyword.arg is not None]
        for arg in node.args:
            if not isinstance(arg, ast.Starred):
                names.extend(_literal_keys(arg))
        return names
    return []


def _method_keys(call: ast.Call, method: str) -> list[str]:
    if method == "update":
        keys = [keyword.arg for keyword in call.keywords if keyword.arg is not None]
        for arg in call.args:
            if not isinstance(arg, ast.Starred):
                keys.extend(_literal_keys(arg))
        return keys
    if method == "setdefault" and call.args:
        key = string_value(call.args[0])
        return [key] if key is not None else []
    return []


def _anchor(function: Function, dict_name: str) -> Optional[ast.stmt]:
    """Where a new copy goes: after the last top-level `d["k"] = ...`, else after the dict's binding.

    Of statements sharing a line (`a = 1; d["k"] = v`), the last one: a copy goes after the line.
    """
    single_copy = binding = None
    for statement in function.body:
        for target in _assigned_targets(statement):
            key = _subscript_key(target, dict_name)
            if key is not None and string_value(key) is not None:
                single_copy = statement
            elif _is_dict(target, dict_name):
                binding = statement
    chosen = single_copy or binding
    if chosen is None:
        return None
    return [statement for statement in function.body if statement.lineno == chosen.lineno][-1]
