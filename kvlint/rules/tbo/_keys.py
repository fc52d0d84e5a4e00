"""KV301: which keys the TBO child builder puts into the dict it builds the child from.

The builder's dict is whatever it returns as `Batch(**name)`; no variable name
is assumed. Keys come from every form the builder uses to fill it: copy loops
over string lists (inline or a module-level constant), constant subscripts,
`update`, `setdefault`, the dict's own literal or `dict(...)` binding, and
keywords of the returning call itself.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from kvlint.rules.tbo._facts import BuilderFact, Span
from kvlint.analysis.index import trailing_name
from kvlint.rules.tbo._walk import own_nodes

SpanOf = Callable[[cst.CSTNode], Span]


def find_builders(module: cst.Module, name: str) -> list[cst.FunctionDef]:
    """Module-level functions and methods of module-level classes called `name`."""
    found = []
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            found.append(statement)
        elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            found.extend(
                item
                for item in statement.body.body
                if isinstance(item, cst.FunctionDef) and item.name.value == name
            )
    return found


def builder_fact(
    module: cst.Module,
    function: cst.FunctionDef,
    batch_class: str,
    imports: dict[str, str],
    span_of: SpanOf,
) -> Optional[BuilderFact]:
    """The builder's facts; None for a same-named function that never builds a batch."""
    if not any(isinstance(n, cst.Call) and trailing_name(n.func, through_subscript=True) == batch_class for n in own_nodes(function)):
        return None
    constants = _module_string_lists(module)
    returned = _returned_call(function, batch_class)
    dict_name = _double_star_name(returned) if returned is not None else None
    keys: set[str] = set()
    anchor: Optional[cst.CSTNode] = None
    if returned is not None:
        keys.update(arg.keyword.value for arg in returned.args if arg.keyword is not None)
    if dict_name is not None:
        keys.update(_keys_set(function, dict_name, constants))
        anchor = _anchor(function, dict_name)
    anchor_line, indent = 0, ""
    if anchor is not None:
        span = span_of(anchor)
        anchor_line = span.end_line
        first = module.code.splitlines()[span.line - 1]
        indent = first[: len(first) - len(first.lstrip())]
    return BuilderFact(
        function=function.name.value,
        line=span_of(function.name).line,
        dict_name=dict_name,
        batch_param=_batch_param(function),
        keys=frozenset(keys),
        anchor_line=anchor_line,
        indent=indent,
        batch_origin=imports.get(batch_class),
    )


def _returned_call(function: cst.FunctionDef, batch_class: str) -> Optional[cst.Call]:
    for node in own_nodes(function):
        if (
            isinstance(node, cst.Return)
            and isinstance(node.value, cst.Call)
            and trailing_name(node.value.func, through_subscript=True) == batch_class
            and _double_star_name(node.value) is not None
        ):
            return node.value
    return None


def _double_star_name(call: cst.Call) -> Optional[str]:
    for arg in call.args:
        if arg.star == "**" and isinstance(arg.value, cst.Name):
            return arg.value.value
    return None


def _batch_param(function: cst.FunctionDef) -> Optional[str]:
    for param in function.params.params:
        if param.name.value not in ("self", "cls"):
            return param.name.value
    return None


def _module_string_lists(module: cst.Module) -> dict[str, list[str]]:
    """Module-level `NAME = [..]` / `(..)` of string constants (copy loops may iterate them by name)."""
    constants: dict[str, list[str]] = {}
    for line in module.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for statement in line.body:
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0].target, statement.value
            elif isinstance(statement, cst.AnnAssign) and statement.value is not None:
                target, value = statement.target, statement.value
            else:
                continue
            strings = _string_elements(value)
            if isinstance(target, cst.Name) and strings is not None:
                constants[target.value] = strings
    return constants


def _string_elements(node: cst.BaseExpression) -> Optional[list[str]]:
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    strings = [_string(element.value) for element in node.elements]
    return None if any(s is None for s in strings) else [s for s in strings if s is not None]


def _string(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _is_dict(node: cst.BaseExpression, dict_name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == dict_name


def _subscript_key(node: cst.BaseExpression, dict_name: str) -> Optional[cst.BaseExpression]:
    """`d[k]` -> k, for the builder's dict `d` and a single index."""
    if isinstance(node, cst.Subscript) and _is_dict(node.value, dict_name) and len(node.slice) == 1:
        index = node.slice[0].slice
        if isinstance(index, cst.Index):
            return index.value
    return None


def _assigned_targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    targets: list[cst.BaseExpression]
    if isinstance(node, cst.Assign):
        targets = [target.target for target in node.targets]
    elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
        targets = [node.target]
    else:
        return []
    flat: list[cst.BaseExpression] = []
    while targets:
        target = targets.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(element.value for element in target.elements)
        else:
            flat.append(target)
    return flat


def _keys_set(function: cst.FunctionDef, dict_name: str, constants: dict[str, list[str]]) -> set[str]:
    keys: set[str] = set()
    for node in own_nodes(function):
        keys.update(_loop_keys(node, dict_name, constants))
        for target in _assigned_targets(node):
            key = _subscript_key(target, dict_name)
            text = _string(key) if key is not None else None
            if text is not None:
                keys.add(text)
            if isinstance(node, cst.Assign) and _is_dict(target, dict_name):
                keys.update(_literal_keys(node.value))
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and _is_dict(node.func.value, dict_name):
            keys.update(_method_keys(node))
    return keys


def _loop_keys(node: cst.CSTNode, dict_name: str, constants: dict[str, list[str]]) -> list[str]:
    """The keys of `for key in [...]: ... d[key] = ...` (or a constant list named in the loop)."""
    if not isinstance(node, cst.For) or not isinstance(node.target, cst.Name):
        return []
    if isinstance(node.iter, cst.Name):
        strings = constants.get(node.iter.value)
    else:
        strings = _string_elements(node.iter)
    if not strings:
        return []
    variable = node.target.value
    for inner in own_nodes(node.body):
        for target in _assigned_targets(inner):
            key = _subscript_key(target, dict_name)
            if isinstance(key, cst.Name) and key.value == variable:
                return strings
    return []


def _literal_keys(node: cst.BaseExpression) -> list[str]:
    """String keys of a `{...}` literal or keywords of a `dict(...)` call."""
    if isinstance(node, cst.Dict):
        keys = [_string(element.key) for element in node.elements if isinstance(element, cst.DictElement)]
        return [key for key in keys if key is not None]
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "dict":
        names = [arg.keyword.value for arg in node.args if arg.keyword is not None]
        for arg in node.args:
            if arg.keyword is None and not arg.star:
                names.extend(_literal_keys(arg.value))
        return names
    return []


def _method_keys(call: cst.Call) -> list[str]:
    assert isinstance(call.func, cst.Attribute)
    method = call.func.attr.value
    if method == "update":
        keys = [arg.keyword.value for arg in call.args if arg.keyword is not None]
        for arg in call.args:
            if arg.keyword is None and not arg.star:
                keys.extend(_literal_keys(arg.value))
        return keys
    if method == "setdefault" and call.args:
        key = _string(call.args[0].value)
        return [key] if key is not None else []
    return []


def _anchor(function: cst.FunctionDef, dict_name: str) -> Optional[cst.SimpleStatementLine]:
    """Where a new copy goes: after the last top-level `d["k"] = ...`, else after the dict's binding."""
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    single_copy = binding = None
    for statement in body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            for target in _assigned_targets(small):
                key = _subscript_key(target, dict_name)
                if key is not None and _string(key) is not None:
                    single_copy = statement
                elif _is_dict(target, dict_name):
                    binding = statement
    return single_copy or binding
