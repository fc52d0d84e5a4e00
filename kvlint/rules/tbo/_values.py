"""KV301: values that can never be None.

An Optional field that a parent is given before the split only *may* make
the split raise: the value written may itself be None (`batch.f = req.f`,
`batch.f = compute(...)`). Some values cannot be: a literal, a list, dict,
set or tuple display or comprehension, a class being built, arithmetic, and
a torch tensor factory (with the tensor methods that return one again). A
field written one of those ways before the split raises in every split that
ran the write.
"""

from __future__ import annotations

import ast

from kvlint.rules.tbo._names import is_none, trailing_name

_DISPLAYS = (
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.JoinedStr, ast.Lambda, ast.Compare, ast.UnaryOp, ast.BinOp,
)
# Builtins that build or count: a class (`list(...)`) or a function that always returns one.
_BUILTINS = frozenset({
    "list", "dict", "set", "frozenset", "tuple", "int", "float", "bool", "str", "bytes", "range",
    "len", "sum", "sorted", "enumerate", "zip", "abs", "round", "repr",
})
_TORCH_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace",
    "rand", "randn", "randint", "zeros_like", "ones_like", "empty_like", "full_like", "cat",
    "stack", "cumsum", "where",
})
# Tensor methods that return a tensor (or a list) whenever their receiver is one.
_TENSOR_METHODS = frozenset({
    "to", "cuda", "cpu", "long", "int", "float", "bool", "contiguous", "clone", "tolist", "view",
    "reshape", "flatten", "pin_memory", "repeat_interleave", "sum", "cumsum",
})


def never_none(value: ast.expr) -> bool:
    """Whether `value` can be seen to never evaluate to None."""
    if isinstance(value, ast.Constant):
        return not is_none(value)
    if isinstance(value, _DISPLAYS):
        return True
    if isinstance(value, ast.IfExp):
        return never_none(value.body) and never_none(value.orelse)
    if isinstance(value, ast.Call):
        return _builds(value)
    return False


def _builds(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in _BUILTINS or _is_class_name(func.id)
    if not isinstance(func, ast.Attribute):
        return False
    if _rooted_at_torch(func.value):
        return func.attr in _TORCH_FACTORIES
    if func.attr in _TENSOR_METHODS:
        return never_none(func.value)
    # `mod.Class(...)`, but not a factory on a class (`Class.build(...)` may return anything).
    return _is_class_name(func.attr) and not _is_class_name(trailing_name(func.value) or "")


def _rooted_at_torch(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "torch"


def _is_class_name(name: str) -> bool:
    """CapWords, as PEP 8 names classes: `NgramInfo`, not a constant (`MAX_LEN`) or a function."""
    return name[:1].isupper() and any(character.islower() for character in name)
