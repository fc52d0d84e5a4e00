"""What KV301 learns from one file, as plain picklable data.

Workers extract these from the files they parse; `finish` joins them across
files. Nothing here holds a CST node: facts cross process boundaries.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional


class Default(str, Enum):
    """What a dataclass field holds when the constructor is not given it."""

    REQUIRED = "required"
    NONE = "none"
    # A constant or expression that is not the literal None.
    VALUE = "value"
    # `field(default_factory=...)`: never None.
    FACTORY = "factory"


@dataclass(frozen=True)
class Span:
    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class FieldFact:
    name: str
    default: Default
    # Source of the default (`"virtual"`, `field(default_factory=list)`) on one line, "" when required.
    default_text: str
    # The type a scalar check looks at: the annotation with Optional peeled off,
    # as a plain or dotted name's last part; None for generics, unions and the like.
    core_type: Optional[str]
    span: Span


@dataclass(frozen=True)
class BaseRef:
    # Trailing name as written (`mod.Base` -> "Base").
    name: str
    # Where the module imports it from ("pkg.mod.Base"), None when defined or unknown locally.
    origin: Optional[str]


@dataclass(frozen=True)
class ClassFact:
    name: str
    bases: tuple[BaseRef, ...]
    is_dataclass: bool
    # Annotated class-level fields in order; empty unless `is_dataclass`.
    fields: tuple[FieldFact, ...]


@dataclass(frozen=True)
class BuilderFact:
    """The TBO child builder: which keys its dict receives and where a copy would go."""

    function: str
    line: int
    # The dict returned as `Batch(**name)`; None when the builder returns no such call.
    dict_name: Optional[str]
    # The parameter holding the parent batch (first one that is not self/cls).
    batch_param: Optional[str]
    keys: frozenset[str]
    # Insert new copies after this line, indented like it.
    anchor_line: int
    indent: str
    # Where the builder's module imports the batch class from ("pkg.mod.ForwardBatch").
    batch_origin: Optional[str]


# The function a fact sits in: (class name or "", function name) of a module-level
# function or a method of a module-level class; a nested function counts as its outer one.
FunctionKey = tuple[str, str]


@dataclass(frozen=True)
class Assignment:
    """A place that gives a batch field a value that is not None."""

    field: str
    line: int
    snippet: str
    # None at module level.
    function: Optional[FunctionKey] = None
    # Rank in the module's source order, comparable with a `Call`'s.
    order: int = 0
    # The value can never be None (a literal, a display or comprehension, a class built, arithmetic,
    # a torch tensor factory): a parent that ran this write carries a value (`_values`).
    never_none: bool = False
    # Under a branch, loop, handler or nested function, or below an early return: the write need
    # not run whenever its function does (`_conditions`).
    conditional: bool = False


class CallKind(str, Enum):
    """How a call names its callee, which decides how far it can be resolved."""

    # `self.m(...)` / `cls.m(...)`: the enclosing class and its bases.
    SELF = "self"
    # `batch.m(...)` on a name holding a batch: the batch class and its bases.
    BATCH = "batch"
    # `f(...)`: the module's own function, else the one it imports.
    NAME = "name"
    # `Owner.m(...)` on a class name: that class.
    OWNER = "owner"
    # Any other receiver (`self.model.forward(...)`): which method runs is not written down.
    DYNAMIC = "dynamic"


@dataclass(frozen=True)
class Call:
    """A call that hands a batch on (as an argument or as the receiver), or gets one back from
    the batch class's factory (`Batch.init_new(...)`: a factory that splits splits its caller)."""

    # Rank in the module's source order (a line would cost generating the module's code).
    order: int
    kind: CallKind
    name: str
    # OWNER: the class name as written; NAME: "" (the module's own) or the import origin.
    owner: str = ""
    origin: Optional[str] = None
    # Where the batch is passed: positional indexes and keyword names.
    batch_args: tuple[int | str, ...] = ()
    # As for an `Assignment`: the call need not run whenever its function does.
    conditional: bool = False
    # Hands no batch on that the scan can see (`self._core(*state)`, `fb.set_x(...)` on a parameter
    # not typed as a batch): kept only to place what a function running after the split runs then.
    placing: bool = False


@dataclass(frozen=True)
class FunctionFact:
    """Where a function hands the batch on: KV301's call graph, for the timing of assignments."""

    key: FunctionKey
    # Its parameters annotated with the batch class, by position (`self`/`cls` not counted) and name.
    batch_params: tuple[int | str, ...]
    # It builds a batch (`Batch(...)`, `cls(...)` in the batch class).
    constructs: bool
    calls: tuple[Call, ...]


@dataclass(frozen=True)
class FileFacts:
    classes: tuple[ClassFact, ...] = ()
    builders: tuple[BuilderFact, ...] = ()
    assignments: tuple[Assignment, ...] = ()
    functions: tuple[FunctionFact, ...] = ()
