"""A workspace held in memory, checked one file's text at a time: the language server's engine.

`kvlint check` reads every file from disk on each run; an editor asks again
after every keystroke, about text that is not saved. A `Workspace` is loaded
once from its root, as `kvlint check` run there would see it: the
`[tool.kvlint]` configuration found from the root, the files of its
`include`, the contract learned from them, and the facts each file gives the
project rules (KV301). Then `check` takes one file's current text and returns
exactly the findings `kvlint check` would report for that content, in that
file and, for the project rules, in the others (a KV301 sits in the batch
file even when the builder file changed).

Project facts of the other files are their saved content: `save` replaces a
file's facts after a save, and the findings of every file are recomputed
from there. So are the helpers a file's calls go through (the project index's
views): resolved over the saved files, again after each save, so a finding
through a helper follows the helper's file when it is saved, and a helper
call added to unsaved text counts once that text is saved. Like the engine, this decides nothing itself: the checker, the
plan and `FileDecisions` do.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Optional

from kvlint.api.config import Config
from kvlint.api.project import project_config
from kvlint.api.contract import Contract
from kvlint.api.helpers import HelperFacts
from kvlint.api.types import Applicability, FileOutcome, Finding, RunError
from kvlint.processes.collector import collector_paused
from kvlint.running.decide import FileDecisions
from kvlint.api.paths import display_path
from kvlint.running.discovery import discover
from kvlint.running.fix_edits import FindingFix, FindingKey, file_fixes
from kvlint.store.contract_cache import contract_for
from kvlint.store.location import cache_directory
from kvlint.store.result_cache import FileEntry, ResultCache, digest
from kvlint.running.engine import run_cache
from kvlint.live.incremental import TextCheck, check_text
from kvlint.live.project_rules import ProjectResult, SavedFacts
from kvlint.running.project_facts import helper_views, known_views, with_view
from kvlint.running.plan import CheckRequest, Plan, RunOptions, file_requests, make_plan
from kvlint.running.selection import per_file_ignored


@dataclass
class FileCheck:
    """One file's text checked: its own findings, errors (internal ones included) and project facts."""

    path: str
    findings: list[Finding]
    errors: list[RunError]
    facts: dict[str, Any] = field(default_factory=dict)
    # The facts are an earlier text's (lines may have moved): `Workspace.facts_of` reads them again.
    facts_stale: bool = False
    # What was checked: "whole", "function" (the one an edit changed), "kept" (nothing) or "cached"
    # (the saved text, as `kvlint check` left it in the result cache).
    how: str = "whole"


class Workspace:
    """The files of one root, their contract and project facts; checks a file's text against them."""

    def __init__(self, root: Path, config: Optional[Config] = None) -> None:
        self.root = root.resolve()
        self.config = config if config is not None else project_config([self.root])
        self.options = RunOptions()
        scope = discover(self.config.context, self.config.exclude, self.config.root)
        sources: dict[Path, bytes] = {}
        for path in scope.files:
            try:
                sources[path] = path.read_bytes()
            except OSError:
                continue
        file_digests = {path: digest(data) for path, data in sources.items()}
        # As `kvlint check` left it at the root, if it did; read, never written, like the result cache.
        cache_at = cache_directory(self.config)
        self.contract: Contract = contract_for(self.config, sources, cache_at, store=False, file_digests=file_digests)[0]
        # The saved bytes of the files in scope, by path as `kvlint check` run at the root shows them.
        shown = {path: display_path(scope.real[path], self.root) for path in sources}
        self.saved: dict[str, bytes] = {shown[path]: data for path, data in sources.items()}
        self._in_scope = set(self.saved)
        # Files outside `include` asked about once (discovery may ask git): path -> checked or not.
        self._scope_answers: dict[str, bool] = {}
        # The result cache `kvlint check` run at the root fills: helper views, file summaries, each
        # file's findings and project facts. Read, and added to in memory, never written back.
        self._cache: ResultCache = run_cache(self.config, self.options, self.contract, self.root, cache_at)
        # The cache names the project rules that run selected; the rules themselves (and LibCST)
        # load only when a text the cache does not answer is checked (`plan`).
        triggers = self._cache.triggers
        codes = triggers.project_codes if triggers is not None else tuple(rule.code for rule in self.plan.project_rules)
        # Project facts by path, from the saved bytes; read one file at a time (`read_facts`),
        # so a server can answer edits in between.
        self.facts = SavedFacts(codes, self._cache, lambda: self.plan.project_rules, self._decisions)
        self.unread_facts: list[str] = list(self.saved) if codes else []
        # Kept in step with `saved` by `save`, and read again from it by `read_views`.
        self._digests = {shown[path]: known for path, known in file_digests.items()}
        # What the project index says about the helpers each file calls (`read_views`), resolved
        # in the saved files; None until read (or found in the cache), then kept until read again after a save.
        self.views: Optional[dict[str, HelperFacts]] = known_views(self._cache, self._digests)
        if self.views is not None:
            self._facts_from_cache()
        # The last check of each file's text: an edit re-checks only what it changed.
        self._last: dict[str, TextCheck] = {}

    @cached_property
    def plan(self) -> Plan:
        """The selected rules and their trigger words; imports the rules and LibCST."""
        return make_plan(self.config, self.options, self.contract)

    def prepare_checks(self) -> None:
        """Load what checking a text needs (the rules, LibCST), so the first edit does not wait for it."""
        # The checker imports LibCST; loading it is the point.
        from kvlint.running import checker  # noqa: F401

        self.plan  # noqa: B018 - a cached property: computed here once, kept for the checks

    def _facts_from_cache(self) -> None:
        """The project facts the cache holds for the saved files, under the views found there."""
        for shown in self.unread_facts:
            entry = self._cached(shown, self._digests[shown])
            if entry is not None:
                self.facts.keep_pickled(shown, entry[2])
        self.unread_facts = [shown for shown in self.unread_facts if shown not in self.facts]

    def _cached(self, shown: str, content_digest: bytes) -> Optional[FileEntry]:
        if self.views is None:
            return None
        return self._cache.file(shown, with_view(content_digest, self.views.get(shown)))

    def read_views(self) -> None:
        """Resolve the helpers every saved file calls (a whole-scope pass; summaries are kept)."""
        self._digests = {shown: digest(data) for shown, data in self.saved.items()}
        self.views = helper_views(self.saved, self.contract, self._cache, self._digests)

    def read_facts(self) -> None:
        """Read the project facts of the next saved file that has not given them yet."""
        shown = self.unread_facts.pop()
        data = self.saved[shown]
        request = self._request(shown, data, project_only=True)
        if request is not None:
            self.facts.keep(shown, self._check_request(request, data).facts)

    def read_all_facts(self) -> None:
        while self.unread_facts:
            self.read_facts()

    def shown(self, path: Path) -> str:
        """`path` as `kvlint check` run at the root reports it."""
        return display_path(path.resolve(), self.root)

    def in_scope(self, path: Path) -> bool:
        """Whether `kvlint check` at the root checks `path`: in `include`, or given alone and not excluded."""
        shown = self.shown(path)
        if shown not in self._scope_answers:
            given = shown in self._in_scope or bool(discover([path], self.config.exclude, self.config.root).files)
            self._scope_answers[shown] = given
        return self._scope_answers[shown]

    def _request(self, shown: str, data: bytes, project_only: bool = False, fix: Optional[Applicability] = None) -> Optional[CheckRequest]:
        options = RunOptions(fix=fix)
        config_path = _config_relative(self.root / shown, self.config)
        work = file_requests(
            self.plan, options, self.config, self.contract, [shown], {shown: data}, {shown: config_path},
            None if project_only else self.views,
        )
        if not work:
            return None
        request = work[0][0]
        if project_only:
            if not request.project_rules:
                return None
            request = CheckRequest(
                path=request.path, rules=(), contract=request.contract, ignored_codes=request.ignored_codes,
                project_rules=request.project_rules,
            )
        return request

    def _check_request(self, request: CheckRequest, data: bytes) -> FileCheck:
        # The checker loads LibCST and the rules: a workspace checks files, so it always needs them.
        from kvlint.running.checker import check_bytes

        # As in `workers.check_guarded`; here the collector would also walk the server's whole heap.
        with collector_paused():
            result = check_bytes(request, data)
        outcome = result.outcome
        return FileCheck(request.path, list(outcome.findings), list(outcome.errors), result.facts)

    def check(self, shown: str, data: bytes) -> FileCheck:
        """The per-file rules' findings in `data`, the text of `shown`, and its project facts.

        Only what changed since the last check of `shown` is checked again
        (`kvlint.live.incremental`); the facts may then be the last text's
        (`facts_stale`).
        """
        last = self._last.get(shown)
        saved = self.saved.get(shown)
        if last is None and data == saved:
            # The saved text, as `kvlint check` left it: answered without loading a rule.
            cached = self._cached_entry(shown, data)
            if cached is not None:
                outcome, facts = cached
                findings = [] if outcome is None else sorted(outcome.findings, key=lambda finding: finding.sort_key)
                return FileCheck(shown, findings, [], facts, how="cached")
        request = self._request(shown, data)
        if request is None:
            self._last.pop(shown, None)
            return FileCheck(shown, [], [])
        # A first edit of a file is checked against its saved text's cached result.
        checked = check_text(request, data, last or (None if saved is None else self._cached_check(shown, saved, request)))
        self._last[shown] = checked
        return FileCheck(shown, checked.findings, list(checked.outcome.errors), checked.facts, checked.facts_stale, checked.how)

    def _cached_entry(self, shown: str, data: bytes) -> Optional[tuple[Optional[FileOutcome], dict[str, Any]]]:
        """What `kvlint check` left in the cache for `data`, the saved text of `shown`: its outcome
        (None: no selected rule's trigger words) and project facts; None when nothing usable is there."""
        entry = self._cached(shown, digest(data))
        if entry is None or (entry[1] is not None and entry[1].errors):
            return None
        return entry[1], {code: pickle.loads(fact) for code, fact in entry[2].items()}

    def _cached_check(self, shown: str, data: bytes, request: CheckRequest) -> Optional[TextCheck]:
        cached = self._cached_entry(shown, data)
        outcome, facts = cached if cached is not None else (None, {})
        if outcome is None:
            return None
        findings = sorted(outcome.findings, key=lambda finding: finding.sort_key)
        return TextCheck(request, data.splitlines(keepends=True), findings, outcome, facts, how="cached")

    def facts_of(self, shown: str, data: bytes) -> dict[str, Any]:
        """The project facts of `data`, the text of `shown`, read whole.

        Changes nothing and reads nothing a check changes, so a server may run it beside the
        checks; `keep_facts` then hands the result to the next edits of `shown`.
        """
        request = self._request(shown, data, project_only=True)
        return {} if request is None else self._check_request(request, data).facts

    def keep_facts(self, shown: str, data: bytes, facts: dict[str, Any]) -> None:
        """Facts of `data` read whole (`facts_of`), kept if `data` is still the last text checked of `shown`."""
        last = self._last.get(shown)
        if last is not None and b"".join(last.lines) == data:
            last.facts, last.facts_stale = facts, False

    def forget(self, shown: str) -> None:
        """`shown` is no longer edited: its last check is not kept."""
        self._last.pop(shown, None)

    def project(self, live: dict[str, FileCheck], texts: dict[str, bytes], only: Optional[str] = None) -> ProjectResult:
        """Project rules over the saved files' facts, with `live` files' facts in their place.

        `texts` are the current texts of open files (their suppression comments
        decide); other files are read as saved. `only`: the findings in that
        file alone. Until every file's facts are read (`unread_facts` empty)
        the project rules have not seen the whole workspace, and report nothing.
        """
        if self.unread_facts:
            return ProjectResult({}, [])
        views = self.views
        digests = None if views is None else {shown: with_view(content, views.get(shown)) for shown, content in self._digests.items()}
        return self.facts.findings({shown: checked.facts for shown, checked in live.items()}, texts, only, digests)

    def _decisions(self, shown: str, code: str, texts: dict[str, bytes]) -> FileDecisions:
        data = texts.get(shown, self.saved.get(shown))
        if data is None:
            return FileDecisions(shown)
        ignored = per_file_ignored(_config_relative(self.root / shown, self.config), self.config.per_file_ignores, [code])
        return FileDecisions.for_source(shown, ignored, data.decode("utf-8", errors="replace"))

    def save(self, shown: str, data: bytes) -> None:
        """`shown` was saved with `data`: its facts now count for every other file."""
        if shown not in self._in_scope and not self.in_scope(self.root / shown):
            return
        self.saved[shown] = data
        self._digests[shown] = digest(data)
        request = self._request(shown, data, project_only=True) if self.facts.codes else None
        if shown in self.unread_facts:
            self.unread_facts.remove(shown)
        if request is None:
            self.facts.drop(shown)
        else:
            self.facts.keep(shown, self._check_request(request, data).facts)

    def fix(self, shown: str, data: bytes, key: FindingKey) -> Optional[FindingFix]:
        """The fix (safe or unsafe) of the finding `key` in `data`, as edits; None when it has none."""
        request = self._request(shown, data, fix=Applicability.UNSAFE)
        return None if request is None else file_fixes(request, data, only=key).get(key)

    def fix_all(self, shown: str, data: bytes) -> Optional[bytes]:
        """What `kvlint fix` (safe fixes) writes for `data`, or None when it changes nothing."""
        request = self._request(shown, data, fix=Applicability.SAFE)
        if request is None:
            return None
        # As in `_check_request`.
        from kvlint.running.checker import check_bytes

        return check_bytes(request, data).outcome.fixed_source


def _config_relative(path: Path, config: Config) -> str:
    try:
        return path.resolve().relative_to(config.root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
