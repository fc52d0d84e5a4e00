"""KV102 unmarked-write-loc."""

from __future__ import annotations

import ast
from typing import Optional

import libcst as cst

from kvlint.api.contract import MARK_SPELLINGS, Contract
from kvlint.api.rule import FileContext, Replacement, Rule
from kvlint.analysis.index import module_index
from kvlint.rules.write_loc._api_words import (
    api_gaps,
    gap_message,
    lost_mark_phrase,
    mark_stated,
    mark_unnamed,
    with_gaps,
)
from kvlint.rules.write_loc._raw_loc import (
    RawLoc,
    factory_for,
    keyword_argument,
    mark_argument,
    raw_loc,
    unfit_form_clause,
    with_commas,
)
from kvlint.api.types import Applicability, Invalid, Severity, Valid
from kvlint.rules.write_loc._candidates import encoded, file_units
from kvlint.rules.write_loc._built_loc_origins import second_locs_checked, unmarked_by_design


# Upstream's contract: its `for_layer` wraps a cross-attention layer's encoder loc unmarked.
_ENCODER = {"unmarked-loc-attributes": "encoder_out_cache_loc"}


class UnmarkedWriteLoc(Rule):
    """A `KVWriteLoc(...)` built without the mark keyword carries no id space.

    ## What it does
    Flags a call of the write-loc class (`KVWriteLoc(...)`, also under an
    import alias or as `memory_pool.KVWriteLoc(...)`) that does not pass the
    mark keyword (`id_space`, or `physical` in upstream SGLang's spelling).
    In a tree whose write-loc class has no mark field yet, it flags such a call
    only where it wraps a batch's raw loc: that is what the migration marks
    (`for_batch`, `for_layer`); any other loc's author states its id space once
    the class has a keyword for it.

    ## Why is this bad?
    The mark's default is the untranslated id space, so an unmarked write loc
    says "virtual" whatever its ids are. A unified pool's write door refuses it
    (a false positive when the ids were in fact translated), or, with the check
    off, writes through ids nobody vouched for.

    ## Example
    ```python
    loc = KVWriteLoc(forward_batch.out_cache_loc, self.forward_metadata.swa_out_cache_loc)
    ```

    ## Use instead
    ```python
    loc = KVWriteLoc.for_batch(forward_batch, swa_loc=self.forward_metadata.swa_out_cache_loc)
    ```

    ## Fix safety
    Safe when the loc is a batch's raw loc, directly or through local aliases:
    `for_batch(fb, ...)` builds the same write loc and adds the batch's own
    mark; positional sub-pool locs become keywords in the class's field order.
    The cross-attention idiom becomes `for_layer(fb, layer, ...)`; a slice of the
    batch loc gets `<mark>=fb.<batch mark>`. Any other loc has no fix: only its
    author knows which id space it is in, so the message asks for the mark.

    Where neither the scanned tree, nor the installed engine it imports, nor
    the configuration states the write-loc class, its mark keyword is not
    known: either spelling states the mark, the fix is unsafe, and the message
    says which spelling kvlint assumed and how to tell it otherwise.

    ## Options
    `write-loc-class`, `write-loc-module`, `mark`, `batch-mark`,
    `batch-factory`, `layer-factory`, `loc-attributes` in `[tool.kvlint.contract]`;
    `engine-path` in `[tool.kvlint]` for a tree built on an installed engine.
    """

    code = "KV102"
    name = "unmarked-write-loc"
    severity = Severity.ERROR
    fix_applicability = Applicability.SAFE

    VALID = [
        Valid("KVWriteLoc.for_batch(forward_batch, swa_loc=swa)"),
        Valid('KVWriteLoc(loc, id_space="kernel")'),
        Valid('KVWriteLoc(forward_batch.encoder_out_cache_loc, id_space="virtual")'),
        Valid("KVWriteLoc(cache_loc, physical=False)", contract={"mark": "physical"}),
        Valid("KVWriteLoc(cache_loc, physical=True)", contract={"mark": "physical"}),
        Valid("KVWriteLoc(*parts, **marked)"),
        Valid("OtherLoc(forward_batch.out_cache_loc)"),
        # Before the class has a mark, a loc not the batch's has nothing to state yet.
        Valid("from m import KVWriteLoc\nloc = KVWriteLoc(ctx_cache_loc)\n", contract={"missing": "mark"}),
        # The class's own factory builds it through `cls`.
        Valid(
            "class KVWriteLoc:\n"
            "    @classmethod\n"
            "    def for_batch(cls, fb):\n"
            "        return cls(fb.out_cache_loc, id_space=fb.out_cache_loc_id_space)\n"
        ),
        # A loc the engine's own factory wraps unmarked by design (upstream `for_layer`: nothing
        # translates a cross-attention layer's encoder loc), directly, through a parameter the
        # file's calls pass one, or through a runner's static buffer filled in place from one.
        Valid("KVWriteLoc(fb.encoder_out_cache_loc, swa)", contract=_ENCODER),
        Valid(
            "def store(pool, layer, loc, k, v):\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc(loc), k, v)\n\n\n"
            "def forward(pool, layer, fb, k, v):\n"
            "    store(pool, layer, fb.encoder_out_cache_loc, k, v)\n",
            contract=_ENCODER,
        ),
        Valid(
            "class Runner:\n"
            "    def replay(self, fb, n):\n"
            "        self.encoder_cache_loc[:n].copy_(fb.encoder_out_cache_loc)\n"
            "        loc = self.encoder_cache_loc[:n]\n"
            "        return KVWriteLoc(loc)\n",
            contract=_ENCODER,
        ),
    ]
    INVALID = [
        Invalid(
            "from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n\n\n"
            "def write(self, forward_batch):\n"
            "    self.forward_metadata.swa_out_cache_loc = self.translator.write_ids(forward_batch, SWA)\n"
            "    return KVWriteLoc(forward_batch.out_cache_loc, self.forward_metadata.swa_out_cache_loc)\n",
            expected_replacement="from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n\n\n"
            "def write(self, forward_batch):\n"
            "    self.forward_metadata.swa_out_cache_loc = self.translator.write_ids(forward_batch, SWA)\n"
            "    return KVWriteLoc.for_batch(forward_batch, swa_loc=self.forward_metadata.swa_out_cache_loc)\n",
            line=6,
            column=12,
        ),
        # Through a local alias, with the extras (the plan's write ids) as keywords and positionals.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, translator):\n"
            "    cache_loc = fb.out_cache_loc\n"
            "    swa, full = translator.write_ids(fb, SWA), translator.write_ids(fb)\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc(cache_loc, swa, full_loc=full))\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, fb, translator):\n"
            "    cache_loc = fb.out_cache_loc\n"
            "    swa, full = translator.write_ids(fb, SWA), translator.write_ids(fb)\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(fb, swa_loc=swa, full_loc=full))\n",
        ),
        # The cross-attention idiom becomes for_layer.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(self, pool, layer, forward_batch):\n"
            "    self.swa_loc = forward_batch.kv_loc_plan.write_ids(self.translator, kind=SWA)\n"
            "    cache_loc = (\n"
            "        forward_batch.encoder_out_cache_loc\n"
            "        if layer.is_cross_attention\n"
            "        else forward_batch.out_cache_loc\n"
            "    )\n"
            "    return KVWriteLoc(cache_loc, self.swa_loc)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(self, pool, layer, forward_batch):\n"
            "    self.swa_loc = forward_batch.kv_loc_plan.write_ids(self.translator, kind=SWA)\n"
            "    cache_loc = (\n"
            "        forward_batch.encoder_out_cache_loc\n"
            "        if layer.is_cross_attention\n"
            "        else forward_batch.out_cache_loc\n"
            "    )\n"
            "    return KVWriteLoc.for_layer(forward_batch, layer, swa_loc=self.swa_loc)\n",
        ),
        # Under an import alias and through the module, in the physical spelling.
        Invalid(
            "from m import KVWriteLoc as WL\nloc = WL(fb.out_cache_loc)\n",
            expected_replacement="from m import KVWriteLoc as WL\nloc = WL.for_batch(fb)\n",
            contract={"mark": "physical", "batch-mark": "out_cache_loc_is_physical"},
        ),
        Invalid(
            "from sglang.srt.mem_cache import memory_pool\nloc = memory_pool.KVWriteLoc(loc=fb.out_cache_loc)\n",
            expected_replacement="from sglang.srt.mem_cache import memory_pool\n"
            "loc = memory_pool.KVWriteLoc.for_batch(fb)\n",
        ),
        # A slice keeps its ids and gains the batch's mark.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(fb, n, translator):\n"
            "    swa = translator.write_ids(fb, SWA)[:n]\n"
            "    return KVWriteLoc(fb.out_cache_loc[:n], swa)\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(fb, n, translator):\n"
            "    swa = translator.write_ids(fb, SWA)[:n]\n"
            "    return KVWriteLoc(fb.out_cache_loc[:n], swa, physical=fb.out_cache_loc_is_physical)\n",
            contract={"mark": "physical", "batch-mark": "out_cache_loc_is_physical"},
        ),
        # A loc of unknown origin: reported, not fixed.
        Invalid("from m import KVWriteLoc\nloc = KVWriteLoc(ctx_cache_loc)\n"),
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(self, fb):\n"
            "    loc = self._translate(fb.out_cache_loc)\n"
            "    return KVWriteLoc(loc)\n"
        ),
        # A second loc translated apart from the batch's plan states its own mark: no fix folds it in.
        Invalid(
            "from m import KVWriteLoc\n\n\nclass Backend:\n"
            "    def init_forward_metadata(self, fb):\n"
            "        self.swa_out_cache_loc = self.pool.translate_loc_from_full_to_swa(fb.out_cache_loc)\n\n"
            "    def forward(self, layer, fb, k, v):\n"
            "        self.pool.set_kv_buffer(layer, KVWriteLoc(fb.out_cache_loc, self.swa_out_cache_loc), k, v)\n"
        ),
        # An encoder loc where the engine does not say it leaves one unmarked (no factory wraps it so).
        Invalid("from m import KVWriteLoc\nloc = KVWriteLoc(fb.encoder_out_cache_loc)\n"),
        # Before the class has a mark, the batch's raw loc is what the migration builds with the factory.
        Invalid(
            "from m import KVWriteLoc\n\n\ndef write(pool, layer, fb):\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc(fb.out_cache_loc))\n",
            expected_replacement="from m import KVWriteLoc\n\n\ndef write(pool, layer, fb):\n"
            "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(fb))\n",
            contract={"missing": "mark"},
        ),
    ]

    @classmethod
    def trigger_groups(cls, contract: Contract) -> tuple[tuple[str, ...], ...]:
        return ((contract.write_loc_class,),)

    @classmethod
    def may_flag(cls, data: bytes, tree: ast.Module, contract: Contract, helper_names: frozenset[str]) -> bool:
        """A call of the write-loc class, by its name or a name it is imported as, without the mark
        keyword or a `**mapping` that may hold it."""
        units = file_units(data, tree)
        names = {contract.write_loc_class}
        # An import renaming the class spells its name, so only units holding the name are read for one.
        for unit in units:
            if unit.holds_any(encoded([contract.write_loc_class])):
                names.update(
                    alias.asname for alias in unit.nodes().imports
                    if alias.asname and alias.name.rsplit(".", 1)[-1] == contract.write_loc_class
                )
        words, marks = encoded(names), _mark_keywords(contract)
        return any(
            all(keyword.arg is not None and keyword.arg not in marks for keyword in call.keywords)
            for unit in units if unit.holds_any(words)
            for name in names for call in unit.nodes().calls.get(name, ())
        )

    def check(self, ctx: FileContext) -> None:
        contract = ctx.contract
        # Before the class has a mark, only a batch's raw loc is the migration's to mark: any other
        # loc's author states its id space once there is a keyword to state it with.
        before_mark = not _has_mark_keyword(contract)
        index = module_index(ctx)
        names = {contract.write_loc_class}
        names.update(local for local, origin in index.imports.items() if origin.rsplit(".", 1)[-1] in names)
        marks = _mark_keywords(contract)
        for site in index.calls(*sorted(names)):
            call = site.call
            if any(arg.star == "**" or _keyword(arg) in marks for arg in call.args):
                continue
            value = _loc_value(call)
            loc = raw_loc(ctx, value, site.function) if value is not None else None
            if loc is None and (before_mark or value is not None and unmarked_by_design(ctx, call, value)):
                continue
            fix = self._fix(ctx, call, loc) if loc is not None else None
            assert loc is not None or fix is None
            why = ""
            if fix is not None:
                fix, why = second_locs_checked(ctx, call, fix)
            needs = ("mark", "batch-mark") if loc is not None and loc.form == "slice" else ("batch-factory",)
            gaps = api_gaps(ctx, *needs) if fix is not None else []
            message = _message(ctx, call, fix is not None or bool(why), before_mark) + why + gap_message(gaps)
            if before_mark and loc is not None and fix is None and not why:
                message += unfit_form_clause(ctx, loc)
            ctx.report(call, message, with_gaps(fix, gaps))

    def _fix(self, ctx: FileContext, call: cst.Call, loc: RawLoc) -> Optional[Replacement]:
        extra = _extra_as_keywords(call, ctx.contract.write_loc_fields)
        if extra is None:
            return None
        if loc.form == "slice":
            args = [arg.with_changes(comma=cst.MaybeSentinel.DEFAULT) for arg in call.args]
            new = call.with_changes(args=with_commas([*args, mark_argument(ctx, loc.batch)]))
            description = f"state the batch's mark: `{ctx.contract.mark}=...{ctx.contract.batch_mark}`"
            return Replacement(call, new, Applicability.SAFE, description, ())
        factory = factory_for(ctx, loc, extra)
        if factory is None:
            return None
        new_call, imports, description = factory
        # Keep the file's own spelling of the class (`WL`, `memory_pool.KVWriteLoc`).
        assert isinstance(new_call.func, cst.Attribute)
        new_call = new_call.with_changes(func=new_call.func.with_changes(value=call.func))
        return Replacement(call, new_call, Applicability.SAFE, description, ())


def _has_mark_keyword(contract: Contract) -> bool:
    """False where the tree defines its write-loc class without a mark field: no keyword to leave out."""
    return contract.has("mark") or not contract.has("write-loc-module")


def _mark_keywords(contract: Contract) -> tuple[str, ...]:
    """The keywords that state the mark: the stated one, or either spelling where it is only assumed
    (kvlint cannot tell which the engine takes, so it flags neither)."""
    return (contract.mark,) if mark_stated(contract) else MARK_SPELLINGS


def _message(ctx: FileContext, call: cst.Call, fixed: bool, before_mark: bool) -> str:
    contract, shown = ctx.contract, ctx.code_for(call.func)
    if before_mark:
        return f"`{shown}(...)` wraps the batch's raw loc: {lost_mark_phrase(ctx)}"
    if not mark_stated(contract):
        message = f"`{shown}(...)` states no mark, so the write loc is unmarked whatever its ids are"
        # With a fix, its gaps say what kvlint assumed; without, this does.
        return message if fixed else f"{message}; state the mark or build it with a factory: {mark_unnamed(contract)}"
    default = (
        f"defaults to `{contract.mark}=False` whatever its ids are"
        if contract.mark == "physical"
        else "says the untranslated id space whatever its ids are"
    )
    message = f"`{shown}(...)` has no `{contract.mark}=`: the write loc {default}"
    if not fixed:
        message += f"; state the mark (`{contract.mark}=...`) or build it with a factory"
    return message


def _keyword(arg: cst.Arg) -> Optional[str]:
    return arg.keyword.value if arg.keyword is not None else None


def _loc_value(call: cst.Call) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if _keyword(arg) == "loc":
            return arg.value
    first = call.args[0] if call.args else None
    if first is not None and first.keyword is None and not first.star:
        return first.value
    return None


def _extra_as_keywords(call: cst.Call, fields: tuple[str, ...]) -> Optional[list[cst.Arg]]:
    """The arguments after the loc, all as keywords by field order; None when one cannot be placed."""
    extra: list[cst.Arg] = []
    position = 0
    for arg in call.args:
        keyword = _keyword(arg)
        if arg.star:
            return None
        if keyword is None:
            if position >= len(fields):
                return None
            if position > 0:
                extra.append(keyword_argument(fields[position], arg.value))
            position += 1
        elif keyword != "loc":
            if keyword not in fields:
                return None
            extra.append(keyword_argument(keyword, arg.value))
    return extra

