"""Build the project index for a run, and each checked file's view of it.

The index reads files with CPython's `ast` (never LibCST), only those a
resolution touches: the files being checked and the files their calls,
imports and class bases lead to, inside the run's whole scope (under
`--changed` too, so an unchanged base class in another file still answers).
Each file's summary, and the names it calls and defines (what the rounds
finding helper names look up, `kvlint.store.file_words`), are cached by
content in the result cache; the views are cached with what resolving them
read (`kvlint.store.resolved_views`), so a warm run whose tree did not change
resolves nothing, and neither does a run after an edit that changed nothing
the resolution read (most edits of a model file).

A file's view is part of the identity of its cached result: when a helper it
calls changes its facts, the caller is checked again.
"""

from __future__ import annotations

import ast
import hashlib
import pickle
from dataclasses import replace
from typing import Iterable, Mapping, Optional

from kvlint.analysis.helper_summary import summarize
from kvlint.analysis.summaries import FileSummary
from kvlint.analysis.project_index import ProjectIndex, module_parts
from kvlint.api.contract import PAGED_HELPERS, Contract
from kvlint.api.helpers import HelperFacts
from kvlint.store.result_cache import ResultCache, digest
from kvlint.processes.collector import collector_paused
from kvlint.store.file_words import WordIndex, answers_alike, read_words
from kvlint.store.resolved_views import Reread, ResolvedViews, still_answers
from kvlint.processes.pool import RoundPool


# Rounds of "files naming a helper with a fact define helpers with facts too": the longest chain followed.
_MAX_CHAIN = 6


def seed_words(contract: Contract) -> tuple[bytes, ...]:
    """A file without one of these words defines no function with a fact of its own."""
    words = (*contract.loc_attributes, *(door for door, _ in contract.write_doors), *contract.buffer_accessors,
             *PAGED_HELPERS)
    return tuple(word.encode() for word in words)


def helper_views(
    sources: Mapping[str, bytes],
    contract: Contract,
    result_cache: Optional[ResultCache],
    digests: Optional[dict[str, bytes]] = None,
    jobs: Optional[int] = 1,
) -> dict[str, HelperFacts]:
    """The non-empty views of the files that call a helper with a fact.

    The names such a helper can have come first (`_helper_names`); only a file calling one
    of them gets a view, and only calls of them are resolved. A helper that pages or packs its
    parameter matters only where it is handed paged KV, which the summaries already read say.
    `jobs`: worker processes for summarising the files each round reads (None: every core).
    """
    if result_cache is None:
        with collector_paused():
            return _views(sources, contract, None, {}, jobs).views
    if digests is None:
        digests = {path: digest(data) for path, data in sources.items()}
    kept = _kept_views(sources, contract, result_cache, digests)
    if kept is not None:
        return kept
    with collector_paused():
        resolved = _views(sources, contract, result_cache, digests, jobs)
    result_cache.store_views(resolved)
    return resolved.views


def known_views(result_cache: ResultCache, digests: Mapping[str, bytes]) -> Optional[dict[str, HelperFacts]]:
    """The views the cache holds for a scope at exactly these digests, or None."""
    known = result_cache.views()
    return known.views if known is not None and known.changed(digests) == [] else None


def _kept_views(
    sources: Mapping[str, bytes], contract: Contract, result_cache: ResultCache, digests: dict[str, bytes]
) -> Optional[dict[str, HelperFacts]]:
    """The cached views, when resolving again would read what it read before (each changed file's
    names, and its summary where one was read, are read again to tell); None otherwise."""
    known = result_cache.views()
    if known is None:
        return None
    seeds = seed_words(contract)

    def reread(path: str, then: bytes, summarised: bool) -> Reread:
        data = sources[path]
        words, words_then = read_words(data, seeds), result_cache.file_words(path, then)
        # Kept at once, by content: a resolution the edit does call for reads them from the cache.
        result_cache.store_file_words(path, digests[path], words)
        if words_then is None or not answers_alike(words, words_then, known.asked_called, known.asked_defined):
            return Reread(False)
        if not summarised:
            return Reread(True)
        summary, summary_then = _summarize(path, data, contract), result_cache.summary(path, then)
        if summary is not None:
            result_cache.store_summary(path, digests[path], summary)
        return Reread(True, (summary, summary_then))

    changed = still_answers(known, digests, reread)
    if changed is None:
        return None
    if changed:
        # The bytes the views now stand for.
        result_cache.store_views(replace(known, contents=dict(digests)))
    return known.views


def _views(
    sources: Mapping[str, bytes],
    contract: Contract,
    result_cache: Optional[ResultCache],
    digests: dict[str, bytes],
    jobs: Optional[int],
) -> ResolvedViews:
    words = WordIndex(sources, result_cache, digests, seed_words(contract))
    words.read_all(jobs)
    seeded = words.seeded()
    with RoundPool(jobs) as rounds:
        reader = _SummaryReader(sources, contract, result_cache, digests, rounds)
        # The first round reads every seeded file.
        reader.ahead(seeded)
        index = ProjectIndex(sources, reader.summary)
        names, layout_names = _helper_names(index, words, seeded, reader)
        index.names = names | layout_names
        views = {}
        callers = words.calling(names)
        reader.ahead(callers)
        for path in callers:
            # Every caller read first: a helper's fix depends on what all of them do with its result.
            index.summary(path)
        callers += sorted(index.tensor_callers(layout_names) - set(callers))
        # A file defining such a helper gets a view too: the helper-return fix is reported there.
        order = {path: position for position, path in enumerate(sources)}
        for path in sorted(set(callers) | index.definers(names), key=order.__getitem__):
            view = index.view(path)
            if view:
                views[path] = view
        return ResolvedViews(views, dict(digests), frozenset(reader.given), words.by_names,
                             frozenset(words.asked_called), frozenset(words.asked_defined))


class _SummaryReader:
    """Each file's summary for the index: from the result cache, else summarised here, or ahead
    of a round in worker processes (the files a round reads are known before it reads them)."""

    def __init__(
        self,
        sources: Mapping[str, bytes],
        contract: Contract,
        result_cache: Optional[ResultCache],
        digests: dict[str, bytes],
        rounds: RoundPool,
    ) -> None:
        self._sources = sources
        self._contract = contract
        self._cache = result_cache
        self._digests = digests
        self._rounds = rounds
        self._ahead: dict[str, Optional[FileSummary]] = {}
        # The files whose summaries the index was given: what its answers rest on.
        self.given: set[str] = set()

    def ahead(self, paths: Iterable[str]) -> None:
        """Summarise at once, on every core, those of `paths` the index has not been given yet."""
        unread = [
            path for path in paths
            if path in self._sources and path not in self.given and path not in self._ahead and self._cached(path) is None
        ]
        arguments = [(path, self._sources[path], self._contract) for path in unread]
        self._ahead.update(zip(unread, self._rounds.map(_summarize, arguments)))

    def summary(self, path: str) -> Optional[FileSummary]:
        if path not in self._sources:
            return None
        self.given.add(path)
        known = self._cached(path)
        if known is not None:
            return known
        summary = self._ahead.pop(path) if path in self._ahead else _summarize(path, self._sources[path], self._contract)
        if self._cache is not None and summary is not None:
            self._cache.store_summary(path, self._digests[path], summary)
        return summary

    def _cached(self, path: str) -> Optional[FileSummary]:
        return self._cache.summary(path, self._digests[path]) if self._cache is not None else None


def _helper_names(
    index: ProjectIndex, words: WordIndex, seeded: list[str], reader: _SummaryReader
) -> tuple[set[str], set[str]]:
    """The names a function with a fact can have: those with a fact of their own (in files holding
    a seed word), then, round by round, those that return a call of a returning one or pass a
    parameter to a call of one at the position (or keyword) that reaches a door; and apart, the
    names of helpers given paged KV that page or pack it (`_layout_helper_names`); `seeded`: the
    files holding a seed word."""
    returning: set[str] = set()
    slots: set[tuple[str, object]] = set()
    for path in seeded:
        summary = index.summary(path)
        for function in summary.all_functions() if summary is not None else ():
            if function.returns_own():
                returning.add(function.name)
            slots |= function.door_slots()
    new_returning, new_slots = set(returning), set(slots)
    for _round in range(_MAX_CHAIN):
        called = new_returning | {name for name, _ in new_slots}
        if not called:
            break
        found_returning: set[str] = set()
        found_slots: set[tuple[str, object]] = set()
        calling = words.calling(called)
        reader.ahead(calling)
        for path in calling:
            summary = index.summary(path)
            for function in summary.all_functions() if summary is not None else ():
                if function.returns_call_of(new_returning):
                    found_returning.add(function.name)
                found_slots |= function.slots_passing_to(new_slots)
        new_returning, new_slots = found_returning - returning, found_slots - slots
        returning |= found_returning
        slots |= found_slots
    return returning | {name for name, _ in slots}, _layout_helper_names(index, words, returning, reader)


def _layout_helper_names(index: ProjectIndex, words: WordIndex, returning: set[str], reader: _SummaryReader) -> set[str]:
    """The names of helpers given paged KV (a buffer accessor's, or a returning helper's result) that
    use it in a layout-sensitive call, themselves or down a chain of helpers they pass it on to.

    Followed slot by slot (a helper's name and the position or keyword of the argument), reading
    only the files that define a helper of the slots found in the round before: a
    layout-sensitive call on a parameter is everywhere; one on paged KV is not."""
    given = {(callee, slot) for callee, slot, origin in index.tensor_args_read() if not origin or origin in returning}
    slots: set[tuple[str, object]] = set()
    found: set[str] = set()
    for _round in range(_MAX_CHAIN):
        new = given - slots
        if not new:
            break
        slots |= new
        given = set()
        new_names = {name for name, _slot in new}
        defining = words.defining(new_names)
        reader.ahead(defining)
        for path in defining:
            summary = index.summary(path)
            for function in summary.all_functions() if summary is not None else ():
                # A function's slots all carry its own name: one of another name takes none of `new`.
                if function.name not in new_names:
                    continue
                params = {use.param for use in function.layout} | {use.param for use in function.uses}
                for param in params:
                    if not function.slots_of(param) & new:
                        continue
                    if any(use.param == param for use in function.layout):
                        found.add(function.name)
                    given |= {(use.callee[-1], use.keyword or use.position) for use in function.uses
                              if use.param == param and use.callee is not None}
    # A link of a chain is a name only if the chain ends in a layout-sensitive use.
    linked = {name for name, _slot in slots}
    links = [f for f in index.functions_read() if f.name in linked and f.name not in found]
    while True:
        passing = {f.name for f in links if any(u.callee is not None and u.callee[-1] in found for u in f.uses)}
        if passing <= found:
            return found
        found |= passing


def _summarize(path: str, data: bytes, contract: Contract) -> Optional[FileSummary]:
    # Paused here too: a worker started by `spawn` (macOS, Windows) has the collector on.
    with collector_paused():
        return _read_summary(path, data, contract)


def _read_summary(path: str, data: bytes, contract: Contract) -> Optional[FileSummary]:
    try:
        tree = ast.parse(data, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # Reported as KV000 where the file is checked; here it just gives no facts.
        return None
    parts = module_parts(path)
    return summarize(tree, ".".join(parts), path.endswith("__init__.py"), contract)


def with_view(content_digest: bytes, view: Optional[HelperFacts]) -> bytes:
    """A checked file's cache identity: its bytes, and the helper facts its check relied on."""
    if not view:
        return content_digest
    return hashlib.sha256(content_digest + pickle.dumps(sorted(view.by_call.items()), protocol=4)).digest()
