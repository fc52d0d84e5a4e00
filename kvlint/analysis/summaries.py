"""The summaries the project index keeps per file, as plain data (picklable, cached by content).

`kvlint.analysis.helper_summary` reads them off CPython's `ast`;
`kvlint.analysis.project_index` resolves the calls they keep as spellings.

A function, its returns and its parameters' uses are named tuples, not dataclasses: a run
after one edit loads some 300 files' summaries from the result cache (sglang/srt: 36,000 of
these), and a tuple is loaded without an instance dict and the state dict that fills it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional

from kvlint.analysis._ast_tensors import LayoutUse

Spelling = tuple[str, ...]


class Return(NamedTuple):
    line: int
    # "raw" | "marked" | "paged" | "call" | "other"
    kind: str
    # raw: the source of the raw loc; paged: the accessor's name.
    detail: str = ""
    callee: Optional[Spelling] = None
    # paged: the accessor's own result, `pool.get_key_buffer(i)`, its per-layer `(slots, ...)` form.
    direct: bool = False


class ParamUse(NamedTuple):
    """Parameter `param` is passed at `line` as a write door's loc (`door`) or to `callee`."""

    param: str
    line: int
    door: str = ""
    callee: Optional[Spelling] = None
    position: int = -1
    keyword: str = ""


class FunctionSummary(NamedTuple):
    name: str
    line: int
    # Parameters a caller passes, self/cls left out for a method.
    params: tuple[str, ...]
    returns: tuple[Return, ...]
    uses: tuple[ParamUse, ...]
    # Parameters whose every load is one of `uses`.
    only_passed: frozenset[str]
    # Parameters used as the tensor of a layout-sensitive call (a page split, a packing copy).
    layout: tuple[LayoutUse, ...] = ()
    # (line, position) of each positional argument of a call spelt as a page size (`self.page_size`).
    page_args: frozenset[tuple[int, int]] = frozenset()

    def returns_own(self) -> bool:
        """A raw loc or paged KV among its own returns (no call resolved)."""
        return any(ret.kind in ("raw", "paged") for ret in self.returns)

    def door_slots(self) -> set[tuple[str, object]]:
        """(name, position) and (name, keyword) of each parameter passed straight to a door's loc."""
        return {slot for use in self.uses if use.door for slot in self._slots(use.param)}

    def slots_passing_to(self, slots: set[tuple[str, object]]) -> set[tuple[str, object]]:
        """The slots of the parameters it passes to a call at one of `slots` (a parameter chain's link)."""
        found: set[tuple[str, object]] = set()
        for use in self.uses:
            if use.callee is None:
                continue
            at = (use.callee[-1], use.keyword or use.position)
            if at in slots:
                found |= self._slots(use.param)
        return found

    def _slots(self, param: str) -> set[tuple[str, object]]:
        slots: set[tuple[str, object]] = {(self.name, param)}
        if param in self.params:
            slots.add((self.name, self.params.index(param)))
        return slots

    def slots_of(self, param: str) -> set[tuple[str, object]]:
        """(name, position) and (name, keyword) a caller passes `param` at."""
        return self._slots(param)

    def returns_call_of(self, names: set[str]) -> bool:
        """A return of a call of one of `names` (a link of a returning chain)."""
        return any(ret.callee is not None and ret.callee[-1] in names for ret in self.returns)



@dataclass(frozen=True)
class ClassSummary:
    name: str
    line: int
    # Base classes as written: "Base", "mod.Base".
    bases: tuple[str, ...]
    methods: dict[str, FunctionSummary]


@dataclass(frozen=True)
class FileSummary:
    # local name -> absolute dotted origin ("pkg.mod.f" or "pkg.mod").
    imports: dict[str, str]
    functions: dict[str, FunctionSummary] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    # Call spellings made in each class's methods ("" for module functions): what a view resolves.
    calls: dict[str, set[Spelling]] = field(default_factory=dict)
    # (class or "", spelling) -> every such call is a write door's loc argument.
    call_uses: dict[tuple[str, Spelling], bool] = field(default_factory=dict)
    # (callee name, position or keyword, origin) of each argument of a resolvable call that is paged KV
    # of a buffer accessor (origin "") or a call's result (origin: the name of the call, a helper that
    # may return paged KV).
    tensor_args: set[tuple[str, object, str]] = field(default_factory=set)

    def all_functions(self) -> list[FunctionSummary]:
        return [*self.functions.values(), *(m for klass in self.classes.values() for m in klass.methods.values())]
