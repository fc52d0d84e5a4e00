"""What a rule is: its identity, its documentation, its examples, and its check.

A rule knows nothing of reporters, the CLI, caching or workers. It reads a
`FileContext` and calls `ctx.report`; the engine turns those reports into
`Finding` objects. Shared analyses (the call index, the data flow) live on the
context and are computed once per file, whatever the number of rules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Optional, TypeVar

from kvlint.api.contract import Contract
from kvlint.api.helpers import NO_HELPER_FACTS, HelperFacts
from kvlint.api.types import Applicability, Invalid, ProjectInvalid, ProjectValid, Severity, Valid

if TYPE_CHECKING:
    # Annotations only: importing the rule base classes must not load LibCST.
    import libcst as cst

T = TypeVar("T")

DOC_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety")

# Longest code a message quotes: a whole line of a report with the path and the rule's words around it.
QUOTE_WIDTH = 80


def one_line_code(code: str, width: int = QUOTE_WIDTH) -> str:
    """`code` as a message quotes it: one line, shortened in the middle with `…` where longer than `width`.

    A message is one line in every format: grep, editors' quickfix lists and
    CI annotators split a finding at a newline. A multi-line expression's
    lines are joined with one space, none after an opening bracket or before a
    closing bracket or a leading `.` (a method chain broken over lines).
    """
    text = ""
    for line in code.splitlines():
        line = line.strip().removesuffix("\\").rstrip()
        if not line:
            continue
        if text and not (text.endswith(("(", "[", "{")) or line.startswith((")", "]", "}", "."))):
            text += " "
        text += line
    if len(text) <= width:
        return text
    head = width // 2
    return text[:head] + "…" + text[len(text) - (width - head - 1):]


@dataclass(frozen=True)
class Replacement:
    """A fix as the rule computes it: swap `target` for `new` and add `imports`."""

    target: cst.CSTNode
    new: cst.CSTNode
    applicability: Applicability
    description: str
    # (module, name) pairs the new code needs, added once with LibCST's import visitor.
    imports: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Violation:
    """What a per-file rule flags: a node of LibCST's tree, the message, and maybe a fix."""

    code: str
    node: cst.CSTNode
    message: str
    fix: Optional[Replacement] = None


# The analysis key of `FileContext.whole_tree`: a caller holding that tree already sets it.
WHOLE_TREE = "whole-ast"


@dataclass
class FileContext:
    """One parsed file, as the rules see it."""

    path: str
    module: cst.Module
    contract: Contract
    violations: list[Violation] = field(default_factory=list)
    _analyses: dict[object, Any] = field(default_factory=dict)
    current_code: str = ""
    # What the project index knows of the helpers this file calls (`kvlint.api.helpers`).
    helpers: HelperFacts = NO_HELPER_FACTS
    # The text `module` was parsed from, where the caller has it: a line read from it costs
    # less than generating the module's code again.
    source: Optional[str] = None
    # The whole file's bytes where `module` is a skeleton of it (`kvlint.running.fragment`): an analysis
    # that follows a value across the file (KV102's loc origins) reads them with CPython's parser.
    whole_data: Optional[bytes] = None

    def report(self, node: cst.CSTNode, message: str, fix: Optional[Replacement] = None) -> None:
        self.violations.append(Violation(self.current_code, node, message, fix))

    def analysis(self, key: object, build: Callable[[], T]) -> T:
        """A per-file analysis shared by every rule that asks for the same key."""
        if key not in self._analyses:
            self._analyses[key] = build()
        result: T = self._analyses[key]
        return result

    def drop_analyses(self) -> None:
        """Forget the shared analyses once every rule has run. Some refer back to this context (the
        paged-KV tracker), and that cycle kept the file's whole LibCST tree alive until the
        collector's next pass, which then walked all of it."""
        self._analyses.clear()

    def code_for(self, node: cst.CSTNode) -> str:
        """The node's source as a message quotes it (`one_line_code`); compare nodes with `source_of`."""
        return one_line_code(self.module.code_for_node(node))

    def source_of(self, node: cst.CSTNode) -> str:
        """The node's source exactly as written."""
        return self.module.code_for_node(node)

    def text(self) -> str:
        """The text `module` was parsed from."""
        return self.module.code if self.source is None else self.source

    def whole_tree(self) -> ast.Module:
        """CPython's tree of the whole file, where `module` may be a skeleton of it (its lines are the
        skeleton's, so a position in one is the same in the other); parsed once per check."""
        return self.analysis(WHOLE_TREE, lambda: ast.parse(self.whole_data if self.whole_data is not None else self.text()))


class Rule:
    """Base class of every per-file rule.

    Subclasses set the class attributes and implement `check`. The docstring
    must have the sections in `DOC_SECTIONS`; a test enforces it, and `kvlint
    explain` prints it.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    fix_applicability: ClassVar[Optional[Applicability]] = None
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        """Word groups a file must contain (one word of every group) to be worth parsing.

        A rule that can flag code lacking these words is a bug: a test runs
        every INVALID example through the prefilter.
        """
        raise NotImplementedError

    @classmethod
    def may_flag(cls, data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
        """Whether a file that passed the trigger words (its bytes, CPython's tree) could hold a finding.

        LibCST parses a file only for the rules that answer yes. `helper_names`:
        the helpers with a fact the file calls or defines. A rule that can flag
        code this says no to is a bug: a test runs every INVALID example through it.
        """
        return True

    def check(self, ctx: FileContext) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class SourceFile:
    """One file as a project rule reads it: CPython's tree of it, which the checker has
    already, so a file no per-file rule inspects is never parsed with LibCST."""

    path: str
    text: str
    tree: ast.Module
    contract: Contract
    # False: only the parts the rule's trigger words select count (see `ProjectRule.whole_file_groups`).
    whole: bool = True


@dataclass(frozen=True)
class ProjectEdit:
    """A project rule's fix: insert `text` as new line(s) after line `after_line` of `path`."""

    path: str
    after_line: int
    text: str
    applicability: Applicability
    description: str


@dataclass(frozen=True)
class ProjectViolation:
    """What a project rule flags: a place in one file (CPython's positions), the message, and maybe an edit."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    message: str
    severity: Severity
    # The flagged source text; part of the fingerprint, so moving lines does not change it.
    snippet: str
    fix: Optional[ProjectEdit] = None
    # First line of the statement holding the flagged code, when not `line`: a suppression may sit there.
    statement_line: Optional[int] = None


class ProjectRule:
    """A rule that needs facts from several files at once (e.g. KV301).

    The engine calls `extract` on every file that passes the rule's prefilter,
    in whichever worker read it (so facts must be picklable), then `finish`
    once with the facts of all of them. `extract` reads CPython's tree, which
    the checker parses for every file anyway, and per-file rules never know a
    project rule exists.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    fix_applicability: ClassVar[Optional[Applicability]] = None
    # Multi-file examples; `tests/test_rule_examples.py` runs them in-process.
    VALID: ClassVar[list[ProjectValid]] = []
    INVALID: ClassVar[list[ProjectInvalid]] = []

    def __init__(self, options: Any) -> None:
        self.options = options

    @classmethod
    def trigger_groups(cls, options: Any, contract: Contract) -> tuple[tuple[str, ...], ...]:
        raise NotImplementedError

    @classmethod
    def whole_file_groups(cls, options: Any, contract: Contract) -> tuple[tuple[str, ...], ...]:
        """Word groups of files `extract` must see whole.

        In any other file passing `trigger_groups`, only the module-level
        statements, the headers of classes and the functions that pass them
        count (`SourceFile.whole` is False): facts then come from the code that
        names what the rule is about, and an edit elsewhere keeps them. By
        default every file is read whole.
        """
        return cls.trigger_groups(options, contract)

    def extract(self, file: SourceFile) -> Any:
        """Picklable facts about one file, or None when it holds nothing of interest."""
        raise NotImplementedError

    def finish(self, facts: dict[str, Any]) -> list[ProjectViolation]:
        raise NotImplementedError
