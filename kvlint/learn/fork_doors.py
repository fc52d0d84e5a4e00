"""Write doors of a tree without the mark (a fork predating the token-major pool), by what they write.

With no write-loc class, no loc reaches a mark check; what makes a method a door is
that it writes its own pool's K/V buffers at a parameter: `self.k_buffer[layer_id][loc]
= ...`, `self.v_buffer[i].index_put_((loc,), ...)`, a `.copy_` into an indexed buffer,
or a kernel handed the pool's buffer and the parameter. Its name does not matter.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from kvlint.api.contract import LOC_KEYWORDS
from kvlint.learn.doors import Door, method_params
from kvlint.learn.scope import Scope
from kvlint.learn.tree import parsed_tree

_Function = ast.FunctionDef | ast.AsyncFunctionDef
_Methods = (ast.FunctionDef, ast.AsyncFunctionDef)
# A kernel's argument that is the loc, by its name (the kernel also takes the values written, the layer, ...).
_LOC_LIKE = re.compile(r"loc|indices|slot")
_ACCESSORS = frozenset({"get_key_buffer", "get_value_buffer", "get_kv_buffer"})
# Forwarding chains longer than this are not followed.
_MAX_ROUNDS = 8

# In-place writes taking their index as an argument, and its position (`copy_` writes where its receiver's subscript says).
_INDEXED_WRITES = {"index_put_": 0, "index_copy_": 1, "scatter_": 1, "index_fill_": 1, "copy_": -1}


def doors_by_forwarding(scope: Scope, doors: dict[str, Door], hosts: tuple[str, ...]) -> list[Door]:
    """`doors` and the methods forwarding a loc-like parameter as the loc of one of them, round by round
    (`set_fused_kv_index_buffer` handing its loc to `set_kv_buffer` on the pool)."""
    found = dict(doors)
    for _round in range(_MAX_ROUNDS):
        known = tuple(sorted((name, door.index) for name, door in found.items()))
        added = False
        for path, forwarding in scope.survey(forwarding_methods, known, hosts).items():
            for name, index, line, why in forwarding:
                if name not in found:
                    found[name] = Door(name, index, path, line, why)
                    added = True
        if not added:
            break
    return sorted(found.values(), key=lambda door: door.name)


def forwarding_methods(data: bytes, doors: tuple[tuple[str, int], ...], hosts: tuple[str, ...]) -> tuple[tuple[str, int, int, str], ...]:
    """(name, loc index, line, why) of each class method of a file handing a loc-like parameter to one of `doors`."""
    index_of = dict(doors)
    if not any(f"{name}(".encode() in data for name in index_of):
        return ()
    tree = parsed_tree(data)
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)] if tree is not None else []
    found = []
    for method in (item for klass in classes if klass.name not in hosts for item in klass.body if isinstance(item, _Methods)):
        if method.name in index_of:
            continue
        params = method_params(method)
        for node in ast.walk(method):
            callee = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
            if callee not in index_of:
                continue
            assert isinstance(node, ast.Call)
            position = index_of[callee]
            passed = [node.args[position]] if position < len(node.args) else []
            passed += [keyword.value for keyword in node.keywords if keyword.arg in LOC_KEYWORDS]
            param = next((arg.id for arg in passed if isinstance(arg, ast.Name) and arg.id in params and _LOC_LIKE.search(arg.id)), None)
            if param is not None:
                found.append((method.name, params.index(param), node.lineno, f"`{param}` is forwarded to the door `{callee}`"))
                break
    return tuple(found)


def doors_by_write(scope: Scope, attributes: tuple[str, ...], hosts: tuple[str, ...]) -> list[Door]:
    """Methods writing their own pool's K/V buffers (`self.k_buffer`, ...) at a parameter (a tree without
    the mark, where nothing else tells a door): whatever their name. A host-side cache (`hosts`) writes
    CPU pages, not the device pool."""
    doors: dict[str, Door] = {}
    for path, found in scope.survey(writing_methods, attributes, hosts).items():
        for name, index, line, why in found:
            if name not in doors:
                doors[name] = Door(name, index, path, line, why)
    return sorted(doors.values(), key=lambda door: door.name)


def writing_methods(data: bytes, attributes: tuple[str, ...], hosts: tuple[str, ...]) -> tuple[tuple[str, int, int, str], ...]:
    """(name, loc index, line, why) of each class method of a file writing `self.<attribute>` at a parameter:
    `self.k_buffer[layer_id][loc] = ...`, `self.k_buffer[i].index_put_((loc,), ...)`, `.copy_` into an
    indexed buffer, or a call handed both the buffer and the parameter (a store kernel)."""
    if not any(f"self.{name}".encode() in data for name in attributes):
        return ()
    tree = parsed_tree(data)
    found = []
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)] if tree is not None else []
    methods = [item for klass in classes if klass.name not in hosts for item in klass.body if isinstance(item, _Methods)]
    for method in methods:
        params = method_params(method)
        hit = _writes_at(method, set(params), set(attributes))
        if hit is not None:
            param, line, how = hit
            found.append((method.name, params.index(param), line, f"writes `{how}` at `{param}`"))
    return tuple(found)


def _writes_at(method: _Function, params: set[str], attributes: set[str]) -> Optional[tuple[str, int, str]]:
    """(parameter, line, buffer) of the method's first write of one of its own buffers at a parameter."""
    pools = _pools(method)
    # In source order: the reason names the first write.
    for node in sorted(ast.walk(method), key=lambda node: (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                buffer = _own_buffer(target, attributes)
                index = _indexing_param(target, params)
                if buffer and index:
                    return index, node.lineno, buffer
        elif isinstance(node, ast.Call):
            func = node.func
            arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
            if isinstance(func, ast.Attribute) and func.attr in _INDEXED_WRITES:
                buffer = _own_buffer(func.value, attributes)
                position = _INDEXED_WRITES[func.attr]
                named = _names_in(node.args[position]) if 0 <= position < len(node.args) else []
                index = _indexing_param(func.value, params) or next((p for p in named if p in params), None)
                if buffer and index:
                    return index, node.lineno, buffer
            buffers = [b for b in (_own_buffer(arg, attributes, pools) for arg in arguments) if b]
            passed = next((arg.id for arg in arguments if isinstance(arg, ast.Name) and arg.id in params
                           and _LOC_LIKE.search(arg.id)), None)
            if buffers and passed:
                return passed, node.lineno, buffers[0]
    return None


def _own_buffer(node: ast.expr, attributes: set[str], pools: frozenset[str] = frozenset({"self"})) -> str:
    """`k_buffer` where `node` is `self.k_buffer`, a subscript of it, or a view of one; `get_key_buffer` for
    `pool.get_key_buffer(...)` (a view of it) where `pool` is one of `pools` (the pool itself, a sub-pool)."""
    while isinstance(node, (ast.Subscript, ast.Call, ast.Attribute)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return f"self.{node.attr}" if node.attr in attributes else ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ACCESSORS:
            owner = node.func.value
            return f"{_shown(owner)}.{node.func.attr}(...)" if _shown(owner) in pools else ""
        node = node.func if isinstance(node, ast.Call) else node.value
    return ""


def _pools(method: _Function) -> frozenset[str]:
    """`self`, its attributes and the local names given one (`main = self.main_pool`): the pool and its sub-pools."""
    names = {"self"}
    for node in ast.walk(method):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(_shown(node))
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Attribute) and _shown(node.value.value) == "self"):
            names.add(node.targets[0].id)
    return frozenset(names)


def _shown(node: ast.AST) -> str:
    return ast.unparse(node)


def _indexing_param(node: ast.expr, params: set[str]) -> Optional[str]:
    """A parameter that indexes the outermost subscript of `node` (`buffer[layer][loc]` -> `loc`)."""
    while isinstance(node, ast.Subscript):
        names = [name for name in _names_in(node.slice) if name in params]
        if names:
            return names[0]
        node = node.value
    return None


def _names_in(node: ast.AST) -> list[str]:
    return [inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name)]
