"""KV301 tbo-field-not-copied."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Optional, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from kvlint.api.config import TboConfig
from kvlint.api.contract import Contract
from kvlint.analysis.index import top_level_imports
from kvlint.api.rule import FileContext, ProjectEdit, ProjectRule, ProjectViolation
from kvlint.rules.tbo._assignments import non_none_assignments
from kvlint.rules.tbo._facts import Assignment, BuilderFact, ClassFact, Default, FieldFact, FileFacts, Span
from kvlint.rules.tbo._fields import module_classes
from kvlint.rules.tbo._keys import builder_fact, find_builders
from kvlint.rules.tbo._lines import LineFinder
from kvlint.api.types import Applicability, ProjectInvalid, ProjectValid, Severity

SCALAR_TYPES = frozenset({"bool", "int", "float", "str"})
ENUM_BASES = frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})


BATCH_FILE = "model_executor/forward_batch_info.py"
BUILDER_FILE = "batch_overlap/two_batch_overlap.py"
DRAFT_FILE = "speculative/draft.py"
_BATCH = """\
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class ForwardBatch:
    out_cache_loc: torch.Tensor
    out_cache_loc_id_space: str = "virtual"
    spec_info: Optional[object] = None
"""
_COPY_MARK = '    output_dict["out_cache_loc_id_space"] = batch.out_cache_loc_id_space\n'
_SET_SPEC = '    output_dict["spec_info"] = None\n'
_DRAFT = """\
from model_executor.forward_batch_info import ForwardBatch


def draft(batch: ForwardBatch, info):
    batch.spec_info = info
"""


def _builder(*copies: str) -> str:
    return (
        "from model_executor.forward_batch_info import ForwardBatch\n\n\n"
        "def filter_batch(batch, *, start, end):\n"
        "    output_dict = dict()\n"
        '    output_dict["out_cache_loc"] = batch.out_cache_loc[start:end]\n'
        + "".join(copies)
        + "    return ForwardBatch(**output_dict)\n"
    )


class TboFieldNotCopied(ProjectRule):
    """A batch field the two-batch-overlap child builder neither copies nor sets.

    ## What it does
    Reads the batch dataclass (`ForwardBatch`, `[tool.kvlint.tbo] batch-class`)
    and the TBO child builder (`filter_batch`, `child-builder`), wherever they
    sit in the scanned tree, and flags every dataclass field (inherited ones
    included) that the builder never puts into the dict it builds each child
    from. The builder's keys come from its copy loops (`for key in [...]`, or
    a module-level list it iterates), `d["k"] = ...`, `d.update(dict(k=...))`,
    `d.update({"k": ...})`, `d.setdefault("k", ...)` and the dict's own
    literal, where `d` is whatever the builder returns as `ForwardBatch(**d)`.

    A field whose default is not None (or that has no default) is an error. A
    field whose default is None is a warning when something in the scanned
    tree gives it a value (`batch.f = ...`, `setattr(batch, "f", ...)`,
    `ForwardBatch(f=...)`, the class's own `init_new`); the message names one
    such place. The remaining Optional fields are reported only in strict mode.

    ## Why is this bad?
    The builder ends with a completeness check: for every field of the batch,
    a parent value that is not None and is missing from the child's dict
    raises. A new non-Optional field that is not copied therefore breaks every
    split: the token-major change added `out_cache_loc_id_space: str =
    "virtual"` without copying it, and `--enable-two-batch-overlap` raised on
    the first split while five existing tests were red unnoticed. The check
    only fires where TBO runs; this rule fires on every commit. Even without
    the check, a child rebuilt from defaults would lose the parent's value.

    ## Example
    ```python
    @dataclass
    class ForwardBatch:
        out_cache_loc: torch.Tensor
        out_cache_loc_id_space: str = "virtual"

    def filter_batch(batch, *, start, end):
        output_dict = dict()
        output_dict["out_cache_loc"] = batch.out_cache_loc[start:end]
        ...
        return ForwardBatch(**output_dict)
    ```

    ## Use instead
    ```python
    def filter_batch(batch, *, start, end):
        output_dict = dict()
        output_dict["out_cache_loc"] = batch.out_cache_loc[start:end]
        output_dict["out_cache_loc_id_space"] = batch.out_cache_loc_id_space
        ...
        return ForwardBatch(**output_dict)
    ```

    ## Fix safety
    Unsafe. For a scalar field (`bool`, `int`, `float`, `str`, an `Enum`, or
    Optional of one) the fix copies the parent's value into the child's dict
    after the builder's last single-key copy. Whether a child should inherit
    the parent's value is still the author's call (a per-child count must be
    recomputed, not copied). Tensors and containers get no fix: how each child
    slices them is the author's decision.

    ## Options
    `[tool.kvlint.tbo]`: `batch-class`, `child-builder`, and `strict = true`
    (or `--strict-tbo`) to also report Optional fields nothing sets.
    """

    code = "KV301"
    name = "tbo-field-not-copied"
    severity = Severity.ERROR
    fix_applicability = Applicability.UNSAFE
    options: TboConfig

    VALID = [
        ProjectValid({BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_COPY_MARK, _SET_SPEC)}),
        # An Optional field nothing gives a value is None in every parent: silent unless strict.
        ProjectValid({BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_COPY_MARK)}),
        ProjectValid({BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_COPY_MARK, _SET_SPEC), DRAFT_FILE: _DRAFT}),
    ]
    INVALID = [
        # The seed's bug: a field with a non-None default is not copied.
        ProjectInvalid(
            {BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_SET_SPEC)},
            expected=((BATCH_FILE, 10, "error"),),
            expected_fix=(BUILDER_FILE, _builder(_SET_SPEC, _COPY_MARK)),
        ),
        # Optional, and given a value before the split somewhere in the tree.
        ProjectInvalid(
            {BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_COPY_MARK), DRAFT_FILE: _DRAFT},
            expected=((BATCH_FILE, 11, "warning"),),
        ),
        ProjectInvalid(
            {BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_COPY_MARK)},
            expected=((BATCH_FILE, 11, "warning"),),
            options={"strict": True},
        ),
    ]

    @classmethod
    def trigger_groups(cls, options: TboConfig, contract: Contract) -> tuple[tuple[str, ...], ...]:
        # The builder returns `Batch(**d)` and every assignment the rule trusts is
        # typed or built with the class, so files without its name hold nothing;
        # once the class's fields are known, only code assigning one is read.
        if not contract.batch_fields:
            return ((options.batch_class,),)
        assigns = tuple(f".{name}{op}" for name in contract.batch_fields for op in (" =", "=", ":"))
        defines = tuple(word for group in cls.whole_file_groups(options, contract) for word in group)
        return ((options.batch_class,), (f"{options.batch_class}(", "setattr(", *assigns, *defines))

    @classmethod
    def whole_file_groups(cls, options: TboConfig, contract: Contract) -> tuple[tuple[str, ...], ...]:
        # Fields and builders are read from their definitions; elsewhere only
        # functions that name the batch class can assign a batch's field.
        return ((f"class {options.batch_class}", f"def {options.child_builder}"),)

    def extract(self, ctx: FileContext) -> Optional[FileFacts]:
        module = ctx.module
        lines = LineFinder(module)
        imports = top_level_imports(module)
        # Builders are one or two files: their fix anchors get exact positions.
        spans = _LazySpans(module)
        builders = (
            builder_fact(module, function, self.options.batch_class, imports, spans)
            for function in find_builders(module, self.options.child_builder)
        )
        facts = FileFacts(
            classes=tuple(module_classes(module, imports, lines)),
            builders=tuple(builder for builder in builders if builder is not None),
            assignments=tuple(non_none_assignments(module, self.options.batch_class, lines)),
        )
        return facts if facts.classes or facts.builders or facts.assignments else None

    def finish(self, facts: dict[str, FileFacts]) -> list[ProjectViolation]:
        tree = _Tree(facts)
        violations: list[ProjectViolation] = []
        for builder_path, builder in tree.builders():
            batch = tree.resolve(self.options.batch_class, builder_path, builder.batch_origin)
            if batch is None:
                continue
            if builder.dict_name is None:
                violations.append(self._unreadable_builder(builder_path, builder))
                continue
            for field_path, field in tree.fields(*batch):
                if field.name not in builder.keys:
                    violation = self._missing(tree, field_path, field, builder_path, builder)
                    if violation is not None:
                        violations.append(violation)
        return violations

    def _missing(
        self, tree: _Tree, field_path: str, field: FieldFact, builder_path: str, builder: BuilderFact
    ) -> Optional[ProjectViolation]:
        subject = f"`{self.options.batch_class}.{field.name}`"
        where = f"`{builder.function}` ({builder_path}:{builder.line})"
        if field.default is Default.REQUIRED:
            severity = Severity.ERROR
            message = f"{subject} is a required field that {where} does not copy: every TBO split raises in its completeness check"
        elif field.default is not Default.NONE:
            severity = Severity.ERROR
            message = (
                f"{subject} (default {field.default_text}, never None) is not copied by {where}: "
                "every TBO split raises in its completeness check"
            )
        else:
            severity = Severity.WARNING
            site = tree.first_assignment(field.name)
            if site is not None:
                site_path, assignment = site
                message = (
                    f"{subject} is not copied by {where}, and {site_path}:{assignment.line} gives it a value "
                    f"(`{assignment.snippet}`): splitting such a batch raises in the completeness check"
                )
            elif self.options.strict:
                message = (
                    f"{subject} is not copied by {where}; nothing scanned sets it, "
                    "but a parent that carries a value would raise in the completeness check"
                )
            else:
                return None
        fix = self._fix(tree, field, builder_path, builder)
        if fix is None:
            message += "; no fix: how each child slices a tensor or container is the author's decision"
        return ProjectViolation(
            path=field_path,
            line=field.span.line,
            column=field.span.column,
            end_line=field.span.end_line,
            end_column=field.span.end_column,
            message=message,
            severity=severity,
            snippet=f"{self.options.batch_class}.{field.name}",
            fix=fix,
        )

    def _fix(self, tree: _Tree, field: FieldFact, builder_path: str, builder: BuilderFact) -> Optional[ProjectEdit]:
        scalar = field.core_type in SCALAR_TYPES or field.core_type in tree.enums
        if not scalar or not builder.anchor_line or builder.batch_param is None:
            return None
        copy = f'{builder.dict_name}["{field.name}"] = {builder.batch_param}.{field.name}'
        return ProjectEdit(
            path=builder_path,
            after_line=builder.anchor_line,
            text=builder.indent + copy,
            applicability=Applicability.UNSAFE,
            description=f"copy the parent's value: `{copy}`",
        )

    def _unreadable_builder(self, path: str, builder: BuilderFact) -> ProjectViolation:
        return ProjectViolation(
            path=path,
            line=builder.line,
            column=1,
            end_line=builder.line,
            end_column=1,
            message=(
                f"cannot tell which fields `{builder.function}` copies: it does not return "
                f"`{self.options.batch_class}(**<dict>)`, so KV301 checks nothing here"
            ),
            severity=Severity.WARNING,
            snippet=builder.function,
        )


@dataclass
class _Tree:
    """The facts of all files, with name resolution across them."""

    facts: dict[str, FileFacts]

    def named(self, name: str) -> list[tuple[str, ClassFact]]:
        return [(path, klass) for path, file in self.facts.items() for klass in file.classes if klass.name == name]

    def builders(self) -> list[tuple[str, BuilderFact]]:
        return [(path, builder) for path, file in sorted(self.facts.items()) for builder in file.builders]

    def resolve(self, name: str, near: str, origin: Optional[str]) -> Optional[tuple[str, ClassFact]]:
        """The class `name` as seen from file `near`: the same file, then the module
        its import names, then the closest directory."""
        candidates = self.named(name)
        if not candidates:
            return None

        def score(candidate: tuple[str, ClassFact]) -> tuple[bool, bool, int]:
            path = candidate[0]
            return (path == near, _module_matches(path, origin), _shared_prefix(path, near))

        return max(candidates, key=score)

    def fields(self, path: str, klass: ClassFact, seen: frozenset[str] = frozenset()) -> list[tuple[str, FieldFact]]:
        """Fields in `dataclasses.fields()` order: dataclass ancestors first, redefinitions in place."""
        merged: dict[str, tuple[str, FieldFact]] = {}
        for base in reversed(klass.bases):
            found = self.resolve(base.name, path, base.origin)
            if found is not None and found[1].name not in seen:
                merged.update((f.name, (p, f)) for p, f in self.fields(*found, seen | {klass.name}))
        merged.update((field.name, (path, field)) for field in klass.fields)
        return list(merged.values())

    def first_assignment(self, field: str) -> Optional[tuple[str, Assignment]]:
        sites = [
            (path, assignment)
            for path, file in self.facts.items()
            for assignment in file.assignments
            if assignment.field == field
        ]
        return min(sites, key=lambda site: (site[0], site[1].line), default=None)

    @cached_property
    def enums(self) -> set[str]:
        """Names of classes that derive, through classes in the tree, from an Enum."""
        bases = {klass.name: {b.name for b in klass.bases} for file in self.facts.values() for klass in file.classes}
        enums = set(ENUM_BASES)
        grew = True
        while grew:
            found = {name for name, parents in bases.items() if name not in enums and parents & enums}
            enums |= found
            grew = bool(found)
        return enums


def _module_matches(path: str, origin: Optional[str]) -> bool:
    """Does `path` (a/b/mod.py) hold the module `origin` imports from (a.b.mod.Name, .mod.Name)?"""
    if not origin:
        return False
    module = origin.lstrip(".").rsplit(".", 1)[0]
    stem = path[:-3] if path.endswith(".py") else path
    return stem.replace("\\", "/").endswith(module.replace(".", "/"))


def _shared_prefix(left: str, right: str) -> int:
    count = 0
    for a, b in zip(left.split("/"), right.split("/")):
        if a != b:
            break
        count += 1
    return count


class _LazySpans:
    """Positions of nodes, computed for the whole module only when first asked for."""

    def __init__(self, module: cst.Module) -> None:
        self._module = module
        self._positions: Optional[Mapping[cst.CSTNode, CodeRange]] = None

    def __call__(self, node: cst.CSTNode) -> Span:
        if self._positions is None:
            self._positions = MetadataWrapper(self._module, unsafe_skip_copy=True).resolve(PositionProvider)
        start, end = self._positions[node].start, self._positions[node].end
        return Span(start.line, start.column + 1, end.line, end.column + 1)
