"""KV301 tbo-field-not-copied."""

from __future__ import annotations

from typing import Optional

from kvlint.api.config import TboConfig
from kvlint.api.contract import Contract
from kvlint.api.rule import ProjectEdit, ProjectRule, ProjectViolation, SourceFile
from kvlint.rules.tbo._assignments import scan_batch_code
from kvlint.rules.tbo._facts import BuilderFact, Default, FieldFact, FileFacts
from kvlint.rules.tbo._fields import module_classes
from kvlint.rules.tbo._keys import builder_fact, find_builders
from kvlint.rules.tbo._names import top_level_imports
from kvlint.rules.tbo._source import SourceText
from kvlint.rules.tbo._timing import SplitTiming, Timing
from kvlint.rules.tbo._tree import Tree
from kvlint.api.types import Applicability, ProjectInvalid, ProjectValid, Severity

SCALAR_TYPES = frozenset({"bool", "int", "float", "str"})


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

PREPARE_FILE = "batch_overlap/prepare.py"


def _prepare(before: str = "", after: str = "") -> str:
    return (
        "from batch_overlap.two_batch_overlap import filter_batch\n"
        "from model_executor.forward_batch_info import ForwardBatch\n\n\n"
        "def prepare(batch: ForwardBatch):\n"
        f"{before}    children = [filter_batch(batch, start=0, end=1)]\n{after}    return children\n"
    )


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

    A field whose default is not None (or that has no default) is an error. So
    is an Optional field always given, before the split, a value that cannot
    be None (a literal, a list/dict/set display or comprehension, a class
    built, arithmetic, a `torch` tensor factory): unconditionally, in the batch
    class's construction, above the split in a function that splits, or in
    what those always call. A field whose default is None is otherwise a
    warning when something in the scanned tree gives it a value (`batch.f = ...`, `setattr(batch, "f", ...)`,
    `ForwardBatch(f=...)`, the class's own `init_new`) that may run before the
    split; the message names such a place, one known to run before the split
    first. A write that only reshapes or passes on the field's own value
    (`self.f = pad(self.f)`, `ForwardBatch(f=other.f)`) gives it none. The
    remaining Optional fields are reported only in strict mode.

    "Before the split" is read from the calls that hand a batch on (a name
    annotated with the batch class, or `self` inside it). The functions that
    split are the child builder and, going up, every function calling one of
    them through a callee written down (`cls.m`, `self.m`, `batch.m`,
    `Class.m`, an imported function), a factory of the batch class that
    splits the batch it builds (`Batch.init_new(...)`) included, though its
    callers pass it no batch. In those, statements above the last call that
    splits run before it and those below after it. Before the split also runs
    the batch class's own construction (`init_new`) and everything the
    statements above the split call through written-down callees. After the
    split runs everything the statements below it reach, through any call that
    passes the batch, including calls whose callee is not written down
    (`self.model.forward(..., forward_batch)` reaches every `forward` method
    taking a batch): the model forward and attention-metadata building. What
    runs after the split also reaches the module's own helpers it calls
    without a batch kvlint can see (the forward handing its batch on inside a
    tuple, `self._core(*state)`), and the batch's own methods those helpers
    call on a parameter (`forward_batch.set_prefix_chunk_idx(i)`). A
    function reached both ways counts as before; a write no way reaches (a
    worker filling a batch before it runs the model) counts, since nothing
    shows it runs after the split, unless every constructor of the batch class
    splits the batch it builds (then whatever holds a batch got it split; a
    function building its own with `Batch(...)` still counts). A field whose
    every write runs after the split is silent.

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
    (or `--strict-tbo`) to also report Optional fields nothing sets before the
    split.
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
        # Given a value only once the batch is split: no parent carries it.
        ProjectValid(
            {BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_COPY_MARK), PREPARE_FILE: _prepare(after="    batch.spec_info = []\n")}
        ),
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
        # Always given a value that is never None before the split: every split raises.
        ProjectInvalid(
            {BATCH_FILE: _BATCH, BUILDER_FILE: _builder(_COPY_MARK), PREPARE_FILE: _prepare(before="    batch.spec_info = []\n")},
            expected=((BATCH_FILE, 11, "error"),),
        ),
    ]

    @classmethod
    def trigger_groups(cls, options: TboConfig, contract: Contract) -> tuple[tuple[str, ...], ...]:
        # The builder returns `Batch(**d)`, every assignment the rule trusts is typed
        # or built with the class, and the call graph that times those assignments
        # follows names annotated with it: files and functions without it hold nothing.
        return ((options.batch_class,),)

    @classmethod
    def whole_file_groups(cls, options: TboConfig, contract: Contract) -> tuple[tuple[str, ...], ...]:
        # Fields and builders are read from their definitions; elsewhere only
        # functions that name the batch class can assign a batch's field.
        return ((f"class {options.batch_class}", f"def {options.child_builder}"),)

    def extract(self, file: SourceFile) -> Optional[FileFacts]:
        tree, source = file.tree, SourceText(file.text)
        imports = top_level_imports(tree)
        batch_class = self.options.batch_class
        builders = (
            builder_fact(tree, function, batch_class, imports, source)
            for function in find_builders(tree, self.options.child_builder)
        )
        assignments, functions = scan_batch_code(tree, batch_class, source, imports, file.whole)
        facts = FileFacts(
            classes=tuple(module_classes(tree, imports, source, file.whole)),
            builders=tuple(builder for builder in builders if builder is not None),
            assignments=tuple(assignments),
            functions=tuple(functions),
        )
        return facts if facts.classes or facts.builders or facts.assignments or facts.functions else None

    def finish(self, facts: dict[str, FileFacts]) -> list[ProjectViolation]:
        tree = Tree(facts)
        violations: list[ProjectViolation] = []
        for builder_path, builder in tree.builders():
            batch = tree.resolve(self.options.batch_class, builder_path, builder.batch_origin)
            if batch is None:
                continue
            if builder.dict_name is None:
                violations.append(self._unreadable_builder(builder_path, builder))
                continue
            timing = SplitTiming(tree, batch, (builder_path, builder))
            for field_path, field in tree.fields(*batch):
                if field.name not in builder.keys:
                    violation = self._missing(tree, timing, field_path, field, builder_path, builder)
                    if violation is not None:
                        violations.append(violation)
        return violations

    def _missing(
        self, tree: Tree, timing: SplitTiming, field_path: str, field: FieldFact, builder_path: str, builder: BuilderFact
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
            placed = {timing_of: [(path, a) for path, a in tree.assignments(field.name) if timing.of(path, a) is timing_of]
                      for timing_of in Timing}
            before, unplaced, after = placed[Timing.BEFORE], placed[Timing.UNPLACED], placed[Timing.AFTER]
            sure = [(path, a) for path, a in before if a.never_none and timing.surely_before(path, a)]
            if sure:
                severity = Severity.ERROR
                site_path, assignment = sure[0]
                message = (
                    f"{subject} is not copied by {where}, and {site_path}:{assignment.line} always gives it "
                    f"a value that is never None (`{assignment.snippet}`) before the split: "
                    "every TBO split raises in its completeness check"
                )
            elif before or unplaced:
                site_path, assignment = (before or unplaced)[0]
                value = f"a value (`{assignment.snippet}`)"
                when = f"{value} before the split" if before else f"{value} that nothing shows to run after the split"
                message = (
                    f"{subject} is not copied by {where}, and {site_path}:{assignment.line} gives it {when}: "
                    "splitting such a batch raises in the completeness check"
                )
            elif self.options.strict:
                set_after = f"only after the split ({after[0][0]}:{after[0][1].line})" if after else "nothing scanned"
                message = (
                    f"{subject} is not copied by {where}; {set_after} sets it, "
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

    def _fix(self, tree: Tree, field: FieldFact, builder_path: str, builder: BuilderFact) -> Optional[ProjectEdit]:
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
