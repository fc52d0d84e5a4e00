"""The target codebase's API: the names the rules look for and the fixes write.

Values come from `[tool.kvlint.contract]`; a value left at "auto" is filled in
by `kvlint.learn.contract` from the scanned tree, falling back to the seed's spelling.
`sources` records where each value came from, for `kvlint contract`.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any, Callable, Mapping

from kvlint.api.class_facts import ClassFacts
from kvlint.api.door_kinds import DoorKind
from kvlint.api.hierarchy import children_of
from kvlint.api.identity_memo import IdentityMemo
from kvlint.api.reach import Admission

AUTO = "auto"

# The spelling of the token-major review thread; used when nothing says otherwise.
SEED_DEFAULTS: dict[str, str] = {
    "mark": "id_space",
    "batch-mark": "out_cache_loc_id_space",
    "layer-factory": "for_layer",
    "write-loc-module": "sglang.srt.mem_cache.memory_pool",
    "paged-helpers-module": "sglang.srt.mem_cache.layout.paged_view",
}

DEFAULT_WRITE_DOORS: dict[str, int] = {"set_kv_buffer": 1, "set_mla_kv_buffer": 1, "_set_kv_buffer": 2}
DEFAULT_BUFFER_ACCESSORS: tuple[str, ...] = (
    "get_key_buffer",
    "get_value_buffer",
    "get_kv_buffer",
    "k_buffer",
    "v_buffer",
    "kv_buffer",
)
DEFAULT_KV_NAME_FALLBACK = r"^(k|v|kv|key|value)_cache(_raw)?$"
# Host-side caches: their buffers are CPU pages, never views of the device pool.
DEFAULT_HOST_CACHE_CLASSES: tuple[str, ...] = ("HostKVCache",)

# The spellings of the mark keyword: the review thread's, and upstream SGLang's.
MARK_SPELLINGS: tuple[str, ...] = ("id_space", "physical")

# The paged-view helpers a tree may define, in the order fixes prefer them.
PAGED_HELPERS: tuple[str, ...] = ("paged_view", "paged_row_view", "paged_kv_view")

# Annotations in a dataclass body that declare no field (`x: ClassVar[int] = 0`).
NOT_FIELD_ANNOTATIONS = frozenset({"ClassVar", "InitVar", "KW_ONLY"})

# How a source learned from the installed engine's files begins.
ENGINE_SOURCE = "learned from engine "

# Keywords a write door accepts its loc under, besides the positional slot.
LOC_KEYWORDS: tuple[str, ...] = ("loc", "loc_info")


@dataclass(frozen=True)
class Contract:
    """The target codebase's names kvlint checks against: configured, learned from the tree, or these defaults."""

    write_loc_class: str = "KVWriteLoc"
    mark: str = SEED_DEFAULTS["mark"]
    batch_mark: str = SEED_DEFAULTS["batch-mark"]
    batch_factory: str = "for_batch"
    layer_factory: str = SEED_DEFAULTS["layer-factory"]
    write_loc_module: str = SEED_DEFAULTS["write-loc-module"]
    # The write-loc class's fields before the mark, in order: how a fix turns
    # positional `KVWriteLoc(loc, swa, full)` arguments into factory keywords.
    write_loc_fields: tuple[str, ...] = ("loc", "swa_loc", "full_loc")
    paged_helpers_module: str = SEED_DEFAULTS["paged-helpers-module"]
    # Which of paged_view / paged_row_view / paged_kv_view the helpers module defines.
    paged_helpers: tuple[str, ...] = PAGED_HELPERS
    loc_attributes: tuple[str, ...] = ("out_cache_loc",)
    # Batch attributes the write-loc class's own factories wrap without the mark: locs the engine
    # leaves unmarked by design (`encoder_out_cache_loc`, which nothing translates). Learned only.
    unmarked_loc_attributes: tuple[str, ...] = ()
    write_doors: tuple[tuple[str, int], ...] = tuple(DEFAULT_WRITE_DOORS.items())
    # Configured on top of the learned doors: name -> loc index added, names removed.
    add_write_doors: tuple[tuple[str, int], ...] = ()
    remove_write_doors: tuple[str, ...] = ()
    # Why each door is one: "PATH:LINE: `loc` reaches the mark check `unwrap_write_loc`", "default", "config ...".
    # What `kvlint contract` shows, like `sources`: no check reads it, so a line moved in a pool file
    # leaves the contract's identity (and every result cached under it) as it was.
    door_reasons: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # Each class's definition of each door, and what it takes (`kvlint.api.door_kinds`): a call is a
    # door call by the classes its receiver can be. Empty where nothing was learned (a tree without
    # the mark, a contract built in code): every call of a door's name is one, as before.
    door_kinds: tuple[DoorKind, ...] = ()
    # The hierarchy (class -> bases) of the classes defining doors, above and below them.
    door_bases: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # What those classes' own code says of their instances (`kvlint.learn.class_facts`): the
    # classes a receiver can exactly be, where the tree names none (`kvlint.analysis.exact_receivers`).
    class_facts: tuple[ClassFacts, ...] = ()
    # Functions that return their loc argument with its mark kept (the tree's translate helpers):
    # `--prove` takes a call of one as proven when its first argument is.
    mark_keeping: tuple[str, ...] = ()
    buffer_accessors: tuple[str, ...] = DEFAULT_BUFFER_ACCESSORS
    kv_name_fallback: str = DEFAULT_KV_NAME_FALLBACK
    # The batch class's field names, learned from its definition (empty: not found).
    # KV301 reads a file only where one of them is assigned.
    batch_fields: tuple[str, ...] = ()
    # Classes whose own methods work on their own allocation (`self.k_buffer[i]` in a
    # pool's method is the pool's storage, not a view handed out), with their subclasses.
    pool_classes: tuple[str, ...] = ()
    # Host-side cache classes (and, learned, their subclasses): their buffers are not pool views.
    host_cache_classes: tuple[str, ...] = DEFAULT_HOST_CACHE_CLASSES
    # Pool classes that allocate page-split buffers `(pages, page_size, ...)`, with their
    # subclasses: a buffer of one has pages, not slots, in dim 0 (`kvlint.learn.pools`).
    page_split_pools: tuple[str, ...] = ()
    # The classes those pools derive from (learned alongside): a value typed as one may be either kind.
    page_split_bases: tuple[str, ...] = ()
    # Per backend class, the page-split pools it never meets: every place building one and every
    # place building the other are tied to disjoint backends or platforms (`kvlint.learn.pool_pairing`).
    page_split_apart: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Backend classes that can meet page-split pools and no other device pool (`kvlint.learn.pool_pairing`).
    page_split_only: tuple[str, ...] = ()
    # Backend classes only ever built for backends whose page size the engine forces above 1, with
    # those backends and where (`kvlint.learn.page_pins`): their paging views run on whole pages.
    page_pinned_classes: tuple[tuple[str, str], ...] = ()
    # The tree's predicate telling whether a write loc is marked physical/kernel
    # (`write_loc_is_physical(loc)`); "" when the tree defines none.
    mark_predicate: str = ""
    # Whether the tree's write doors check the mark (refuse an unmarked loc).
    door_checks_mark: bool = False
    # The class attribute a pool sets to make its doors refuse an unmarked loc
    # (`requires_physical_write_loc`), read by the tree's mark check; "" when there is none.
    mark_gate: str = ""
    # Pool classes that, with every subclass in the tree, keep that gate off: their doors
    # take a bare loc by design, so `--prove` counts a call on `self`/`super()` there as exempt.
    ungated_classes: tuple[str, ...] = ()
    # Pool classes whose own instances keep that gate off (a subclass may turn it on for its own).
    gate_off_classes: tuple[str, ...] = ()
    # The batch class (`[tool.kvlint.tbo] batch-class`) and its two-batch-overlap child builder: KV105
    # leaves the engine's own constructions of a batch (the class's methods, the builder) alone.
    batch_class: str = "ForwardBatch"
    child_builder: str = "filter_batch"
    # Functions that set a batch's mark on one of their parameters, directly or through another
    # (`KVLocPlan.bind`, `bind_replay`, `bind_runner_slots`): a call of one handed a batch binds it.
    binding_methods: tuple[str, ...] = ()
    # Contract keys whose API learning looked for in the scanned tree and did not find
    # (and the configuration does not pin): a fix calling that API is not safe there.
    missing: tuple[str, ...] = ()
    # The engine package the tree imports without defining the write-loc class (`sglang`): its
    # installed copy was looked for (`kvlint.learn.installed_engine`). "" where it was not.
    engine_package: str = ""
    # The installed copy read: "sglang 0.5.22 at /.../site-packages/sglang"; "" where none was found.
    engine: str = ""
    # How it was found, or where kvlint looked for it, for `kvlint contract`.
    engine_search: str = field(default="", compare=False)
    # What the engine admits on the unified pool (`kvlint.learn.admission`). Reach is decided after
    # checking (`kvlint.running.reach`), so no cached result depends on it.
    admission: Admission = field(default_factory=Admission, compare=False)
    # Where each value came from: "default", "config", "learned from PATH:LINE", or
    # "learned from engine PACKAGE/PATH:LINE" (the installed engine's source).
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def __reduce__(self) -> tuple[Callable[[bytes], Contract], tuple[bytes]]:
        # A contract goes to a worker with every file it checks: its bytes are made once here, and a
        # worker builds each contract it is sent once (`_shipped`). Cached properties stay behind.
        return _shipped, (_bytes_of(self),)

    @cached_property
    def door_hierarchy(self) -> Mapping[str, tuple[str, ...]]:
        """`door_bases` as class -> bases, and its `children`: built once, asked at every door call."""
        return dict(self.door_bases)

    @cached_property
    def door_children(self) -> Mapping[str, set[str]]:
        return children_of(self.door_hierarchy)

    @cached_property
    def facts_by_class(self) -> Mapping[str, ClassFacts]:
        return {facts.name: facts for facts in self.class_facts}

    @cached_property
    def door_loc_index(self) -> Mapping[str, int]:
        return dict(self.write_doors)

    @cached_property
    def kv_name_pattern(self) -> re.Pattern[str]:
        return re.compile(self.kv_name_fallback)

    def source_of(self, key: str) -> str:
        return dict(self.sources).get(key, "default")

    def origin(self, key: str) -> str:
        """"found" (learned from the tree), "engine" (learned from the installed engine), "pinned"
        (configured) or "fallback" (the seed's spelling)."""
        source = self.source_of(key)
        if source.startswith(ENGINE_SOURCE):
            return "engine"
        if source.startswith("learned"):
            return "found"
        if source.startswith("config"):
            return "pinned"
        return "fallback"

    @property
    def engine_not_found(self) -> bool:
        """The tree imports an engine kvlint looked for and could not find: its API is assumed."""
        return bool(self.engine_package) and not self.engine

    def has(self, key: str) -> bool:
        """Whether the API behind `key` may be called: the tree defines it, the configuration
        pins it, or nobody looked (a contract built in code, as rule examples are)."""
        return key not in self.missing

    def with_overrides(self, overrides: Mapping[str, str]) -> "Contract":
        """A copy with config-style keys (``"mark"``, ``"batch-mark"``) replaced."""
        changes: dict[str, Any] = {}
        value: Any
        for key, value in overrides.items():
            name = key.replace("-", "_")
            if isinstance(getattr(self, name, None), tuple) and isinstance(value, str):
                # A comma list where the field is a tuple (rule examples spell overrides as strings).
                value = tuple(part.strip() for part in value.split(",") if part.strip())
            elif isinstance(getattr(self, name, None), bool) and isinstance(value, str):
                value = value.lower() in ("1", "true", "yes")
            changes[name] = value
        return replace(self, **changes)


# The bytes of the contracts pickled lately.
_PICKLED: IdentityMemo[Contract, bytes] = IdentityMemo(4)
# The contracts unpickled lately, by their bytes.
_UNPICKLED: dict[bytes, Contract] = {}


def _bytes_of(contract: Contract) -> bytes:
    return _PICKLED.get(contract, lambda: pickle.dumps({item.name: getattr(contract, item.name) for item in fields(contract)},
                                                       protocol=pickle.HIGHEST_PROTOCOL))


def _shipped(data: bytes) -> Contract:
    if data not in _UNPICKLED:
        if len(_UNPICKLED) >= 4:
            _UNPICKLED.clear()
        _UNPICKLED[data] = Contract(**pickle.loads(data))
    return _UNPICKLED[data]
