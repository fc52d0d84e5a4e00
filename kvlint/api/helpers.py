"""Facts about helpers a file calls, as the project index hands them to the rules.

The project index (`kvlint.analysis.project_index`) reads every file that
could hold one of these facts with CPython's `ast`, resolves calls across
functions and files, and gives each checked file a `HelperFacts`: for each
spelling of a call in that file (`self._kv_write_loc`, `store`, `mod.helper`)
inside each class, what the called function is known to do. A spelling the
index could not resolve is absent: no fact, never a guess.

Plain data, picklable: a worker receives it with the file's check request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Where:
    """A place in the tree: what is there, and where (display path, 1-based line)."""

    path: str
    line: int
    # What the fact rests on, as a reader would name it: "returns `fb.out_cache_loc`",
    # "`set_kv_buffer`", "`get_key_buffer`".
    what: str

    def shown(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class ParamDoor:
    """A parameter of the helper that reaches a write door's loc argument unmarked."""

    param: str
    # Positional index among the arguments a caller passes (self/cls not counted); -1: keyword only.
    position: int
    door: str
    where: Where
    # Every use of the parameter in the helper (and down the chain) is a write door's loc:
    # wrapping the caller's argument with its mark changes nothing else.
    only_doors: bool


# What a layout-sensitive use of a parameter is, by what decides it in the caller:
# a page split, `.view(-1, page_size, *row)` (KV201 on any paged KV);
PAGE_SPLIT = "page-split"
# a copy on any layout, `.contiguous()` or a `.flatten()` of every dim (KV202);
PACKS = "packs"
# a merge of dim 0 with the next, `.flatten(0, e)` or a `.reshape` that keeps neither the slot dim nor
# the row: a copy where dim 0 holds slots, a view where it holds pages (KV202 on `(slots, ...)`).
MERGES_DIM0 = "merges-dim0"


@dataclass(frozen=True)
class ParamLayout:
    """A parameter of the helper used as paged KV in a layout-sensitive call (down any chain of helpers)."""

    param: str
    # Positional index among the arguments a caller passes (self/cls not counted); -1: keyword only.
    position: int
    # PAGE_SPLIT, PACKS or MERGES_DIM0.
    kind: str
    # The `.view`/`.reshape`/... it relies on, spelt as in the helper that makes it.
    where: Where
    # A page split whose page size is another parameter: the caller's argument there must name a page size.
    page_param: str = ""
    page_position: int = -1
    # A page split at the literal page size 1 (`view(-1, 1, *row)`): on a page-split
    # `(pages, page_size, ...)` buffer the same call flattens pages to token rows, so it
    # counts only where the caller's dim 0 holds slots.
    unit_page: bool = False


@dataclass(frozen=True)
class HelperFact:
    """What one resolved helper is known to do."""

    # How a message names it: `Base._kv_write_loc`, `store_kv`.
    helper: str
    defined: Where
    # A return that may be the batch's raw loc (on some path), with the chain's last step.
    returns_raw: Optional[Where] = None
    # Every return is the batch's raw loc or an already marked loc (the helper-return fix may apply).
    returns_only_raw_or_marked: bool = False
    # A return that may be paged KV (an accessor result, a slice, a tensor-keeping call of one).
    returns_paged: Optional[Where] = None
    # Every caller in the tree passes the result straight to a write door's loc (one caller at least):
    # with `returns_only_raw_or_marked`, rewriting the helper's raw returns is safe.
    callers_only_doors: bool = False
    # Every paged return is a buffer accessor's own result: dim 0 holds slots, as for a direct call.
    returns_accessor: bool = False
    params: tuple[ParamDoor, ...] = ()
    layout: tuple[ParamLayout, ...] = ()

    def door_param(self, position: int, keyword: Optional[str]) -> Optional[ParamDoor]:
        for param in self.params:
            if keyword is not None and param.param == keyword:
                return param
            if keyword is None and param.position == position >= 0:
                return param
        return None


@dataclass(frozen=True)
class HelperFacts:
    """The facts of the helpers one file calls, by (enclosing class name or "", call spelling).

    A spelling is `("name", f)`, `("attr", module_alias, f)`, `("self", m)`, `("cls", m)` or `("super", m)`.
    """

    by_call: dict[tuple[str, tuple[str, ...]], HelperFact] = field(default_factory=dict)
    # Helpers defined in this file whose raw returns the fix rewrites, by (class name or "", name).
    defined: dict[tuple[str, str], HelperFact] = field(default_factory=dict)

    def lookup(self, klass: Optional[str], spelling: Optional[tuple[str, ...]]) -> Optional[HelperFact]:
        if spelling is None:
            return None
        return self.by_call.get((klass or "", spelling))

    def __bool__(self) -> bool:
        return bool(self.by_call or self.defined)


NO_HELPER_FACTS = HelperFacts()
