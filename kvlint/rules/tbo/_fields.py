"""KV301: the classes of a module, and the fields of its dataclasses.

Only what `dataclasses.fields()` would return counts as a field: annotated
class-level names of a class decorated `@dataclass`, minus `ClassVar`,
`InitVar` and the `KW_ONLY` marker. A plain mixin's annotations are class
attributes, not fields, so the completeness check never sees them.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from kvlint.api.contract import NOT_FIELD_ANNOTATIONS
from kvlint.analysis.index import is_none, trailing_name

from kvlint.rules.tbo._facts import BaseRef, ClassFact, Default, FieldFact
from kvlint.rules.tbo._lines import LineFinder



def module_classes(module: cst.Module, imports: dict[str, str], lines: LineFinder) -> list[ClassFact]:
    """Every top-level class, with fields for the dataclasses."""
    classes = []
    for statement in module.body:
        if not isinstance(statement, cst.ClassDef):
            continue
        is_dataclass = any(_is_dataclass_decorator(d.decorator) for d in statement.decorators)
        bases = tuple(
            BaseRef(name, imports.get(name))
            for name in (trailing_name(arg.value, through_subscript=True) for arg in statement.bases if arg.keyword is None)
            if name is not None
        )
        fields = tuple(_fields(module, statement, lines)) if is_dataclass else ()
        classes.append(ClassFact(statement.name.value, bases, is_dataclass, fields))
    return classes


def _is_dataclass_decorator(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call):
        node = node.func
    return trailing_name(node, through_subscript=True) == "dataclass"


def _fields(module: cst.Module, klass: cst.ClassDef, lines: LineFinder) -> list[FieldFact]:
    fields = []
    body = klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ()
    for line in body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for statement in line.body:
            if not isinstance(statement, cst.AnnAssign) or not isinstance(statement.target, cst.Name):
                continue
            annotation = statement.annotation.annotation
            if trailing_name(annotation, through_subscript=True) in NOT_FIELD_ANNOTATIONS:
                continue
            default, default_text = _default(module, statement.value)
            fields.append(
                FieldFact(
                    name=statement.target.value,
                    annotation=module.code_for_node(annotation),
                    default=default,
                    default_text=default_text,
                    core_type=_core_type(annotation),
                    span=lines.span(statement, klass),
                )
            )
    return fields


def _default(module: cst.Module, value: Optional[cst.BaseExpression]) -> tuple[Default, str]:
    if value is None:
        return Default.REQUIRED, ""
    text = module.code_for_node(value)
    if is_none(value):
        return Default.NONE, text
    if isinstance(value, cst.Call) and trailing_name(value.func, through_subscript=True) == "field":
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == "default":
                return (Default.NONE if is_none(arg.value) else Default.VALUE), text
            if arg.keyword is not None and arg.keyword.value == "default_factory":
                return Default.FACTORY, text
        return Default.REQUIRED, text
    return Default.VALUE, text


def _core_type(annotation: cst.BaseExpression) -> Optional[str]:
    """The annotation's type once Optional is peeled off, if it is a bare name."""
    if isinstance(annotation, cst.SimpleString):
        text = annotation.evaluated_value
        if not isinstance(text, str):
            return None
        try:
            annotation = cst.parse_expression(text)
        except (cst.ParserSyntaxError, TypeError):
            return None
    inner = _optional_inner(annotation)
    if inner is not None:
        annotation = inner
    if isinstance(annotation, (cst.Name, cst.Attribute)):
        return trailing_name(annotation, through_subscript=True)
    return None


def _optional_inner(annotation: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`Optional[X]`, `Union[X, None]` and `X | None` -> X; None for anything else."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        sides = [annotation.left, annotation.right]
    elif isinstance(annotation, cst.Subscript) and trailing_name(annotation.value, through_subscript=True) in ("Optional", "Union"):
        sides = [
            element.slice.value for element in annotation.slice if isinstance(element.slice, cst.Index)
        ]
        if trailing_name(annotation.value, through_subscript=True) == "Optional":
            return sides[0] if len(sides) == 1 else None
    else:
        return None
    rest = [side for side in sides if not is_none(side)]
    return rest[0] if len(rest) == 1 and len(sides) == 2 else None
