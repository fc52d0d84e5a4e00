"""KV301: the classes of a module, and the fields of its dataclasses.

Only what `dataclasses.fields()` would return counts as a field: annotated
class-level names of a class decorated `@dataclass`, minus `ClassVar`,
`InitVar` and the `KW_ONLY` marker. A plain mixin's annotations are class
attributes, not fields, so the completeness check never sees them.
"""

from __future__ import annotations

import ast
from typing import Optional

from kvlint.api.contract import NOT_FIELD_ANNOTATIONS
from kvlint.api.rule import one_line_code
from kvlint.rules.tbo._facts import BaseRef, ClassFact, Default, FieldFact
from kvlint.rules.tbo._names import is_none, string_value, trailing_name
from kvlint.rules.tbo._source import SourceText


def module_classes(tree: ast.Module, imports: dict[str, str], source: SourceText, whole: bool) -> list[ClassFact]:
    """Every top-level class, with fields for the dataclasses when the file is read `whole`."""
    classes = []
    for statement in tree.body:
        if not isinstance(statement, ast.ClassDef):
            continue
        is_dataclass = any(_is_dataclass_decorator(decorator) for decorator in statement.decorator_list)
        written = (base.value if isinstance(base, ast.Starred) else base for base in statement.bases)
        bases = tuple(BaseRef(name, imports.get(name)) for name in map(trailing_name, written) if name is not None)
        fields = tuple(_fields(statement, source)) if is_dataclass and whole else ()
        classes.append(ClassFact(statement.name, bases, is_dataclass, fields))
    return classes


def _is_dataclass_decorator(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    return trailing_name(node) == "dataclass"


def _fields(klass: ast.ClassDef, source: SourceText) -> list[FieldFact]:
    fields = []
    for statement in klass.body:
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        if trailing_name(statement.annotation) in NOT_FIELD_ANNOTATIONS:
            continue
        default, default_text = _default(source, statement.value)
        fields.append(
            FieldFact(
                name=statement.target.id,
                default=default,
                default_text=default_text,
                core_type=_core_type(statement.annotation),
                span=source.span(statement),
            )
        )
    return fields


def _default(source: SourceText, value: Optional[ast.expr]) -> tuple[Default, str]:
    if value is None:
        return Default.REQUIRED, ""
    # Quoted in a message, which is one line.
    text = one_line_code(source.code_with_parentheses(value))
    if is_none(value):
        return Default.NONE, text
    if isinstance(value, ast.Call) and trailing_name(value.func) == "field":
        for keyword in value.keywords:
            if keyword.arg == "default":
                return (Default.NONE if is_none(keyword.value) else Default.VALUE), text
            if keyword.arg == "default_factory":
                return Default.FACTORY, text
        return Default.REQUIRED, text
    return Default.VALUE, text


def _core_type(annotation: ast.expr) -> Optional[str]:
    """The annotation's type once Optional is peeled off, if it is a bare name."""
    text = string_value(annotation)
    if text is not None:
        try:
            annotation = ast.parse(text.strip(), mode="eval").body
        except (SyntaxError, ValueError):
            return None
    inner = _optional_inner(annotation)
    if inner is not None:
        annotation = inner
    if isinstance(annotation, (ast.Name, ast.Attribute)):
        return trailing_name(annotation)
    return None


def _optional_inner(annotation: ast.expr) -> Optional[ast.expr]:
    """`Optional[X]`, `Union[X, None]` and `X | None` -> X; None for anything else."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [annotation.left, annotation.right]
    elif isinstance(annotation, ast.Subscript) and trailing_name(annotation.value) in ("Optional", "Union"):
        index = annotation.slice
        sides = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        if trailing_name(annotation.value) == "Optional":
            return sides[0] if len(sides) == 1 else None
    else:
        return None
    rest = [side for side in sides if not is_none(side)]
    return rest[0] if len(rest) == 1 and len(sides) == 2 else None
