"""Run kvlint over a set of paths and return findings; never prints.

`_run` reads as the run's phases, in order: discover the files, read their bytes
(with the cache on, a file whose stat is unchanged since it was hashed is read only
if asked for), learn the contract, pick the rules in force, build the project
index, check the files the cache cannot answer (prefiltered by the rules' trigger
words, in worker processes when there are enough of them), run the project rules
over the facts the checks extracted, prove the write doors' locs under --prove,
decide the unused ignores, and save what the next run reuses.

LibCST and the rules are imported only when some file has to be checked
again: a run the cache answers entirely never loads the parser.
"""

from __future__ import annotations

import gc
import logging
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from kvlint.api.config import Config
from kvlint.api.contract import Contract
from kvlint.api.paths import display_path
from kvlint.api.triggers import Triggers
from kvlint.api.types import Applicability, FileOutcome, Finding, RunError, fix_allowed
from kvlint.processes.collector import made_to_last
from kvlint.processes.pool import map_shared
from kvlint.running.decide import unused_ignores
from kvlint.running.discovery import Discovered, discovered
from kvlint.running.head_start import HeadStart, warm_up
from kvlint.running.phases import Phases, log
from kvlint.running.plan import Plan, RunOptions, file_requests, make_plan
from kvlint.running.project_facts import helper_views, with_view
from kvlint.running.project_run import Checked, ProjectRun, with_context_facts
from kvlint.running.reach import in_reach, verdict_at, with_reach
from kvlint.running.reading import ReadTree, Reader, SourceChanged, read_tree
from kvlint.running.workers import Progress, check_all
from kvlint.store.contract_cache import contract_for
from kvlint.store.location import cache_directory
from kvlint.store.result_cache import ResultCache, dataclass_identity, run_key

if TYPE_CHECKING:
    from kvlint.running.prove import Certificate


@dataclass
class RunResult:
    """What a run found, over which files, under which contract; for `fix`, the fixed bytes."""

    files_in_scope: int
    files_parsed: int
    findings: list[Finding]
    errors: list[RunError]
    contract: Contract
    # path -> (original bytes, fixed bytes), for `fix`.
    fixed: dict[str, tuple[bytes, bytes]] = field(default_factory=dict)
    skipped: tuple[tuple[str, str], ...] = ()
    prove: Optional[Certificate] = None  # under --prove: door calls seen, proven, raw, unproven

    @property
    def has_internal_error(self) -> bool:
        return any(error.internal for error in self.errors)

    @property
    def has_unchecked_file(self) -> bool:
        return any(error.unchecked for error in self.errors)


def run(
    config: Config, options: RunOptions, progress: Optional[Progress] = None, started: Optional[HeadStart] = None
) -> RunResult:
    """`started`: the head start the command forked for the files it names (`head_start.start_early`);
    the command closes it however the run ends, the run as soon as it is done with it."""
    try:
        with ExitStack() as closing:
            return _run(config, options, progress, closing, stat_table=True, started=started)
    except SourceChanged as changed:
        # A file the stat table vouched for changed before its bytes were asked for: start over,
        # reading every file now, as a run without the table does.
        log.debug("%s: reading every file again", changed)
        with ExitStack() as closing:
            return _run(config, options, progress, closing, stat_table=False)


def _run(
    config: Config,
    options: RunOptions,
    progress: Optional[Progress],
    closing: ExitStack,
    stat_table: bool,
    started: Optional[HeadStart] = None,
) -> RunResult:
    """`closing`: what must end with the run, however it ends (the head start's worker)."""
    phases = Phases()
    found = discovered(config, options.paths, options.changed, phases)
    # A few files to check in a large tree: a worker loads LibCST while the tree is read and indexed.
    early = warm_up(found.files, len(found.whole.files) if found.whole else len(found.files), options.cache,
                    options.jobs, started)
    if early is not None:
        closing.callback(early.close)
    cache_at = cache_directory(config) if options.cache else None
    tree = read_tree(config, cache_at, found, stat_table, phases)
    contract = _learned_contract(config, cache_at, tree, phases)
    rules = _rules_in_force(config, options, contract, tree, cache_at, phases)
    early = _head_start_kept(early, config, contract, rules, tree)
    checking = _Checking(config, contract, tree, rules, progress, early,
                         views=_project_index(options, contract, tree, rules, early, phases))
    checked = _checked_files(options, tree, rules, checking, phases)
    report = _report(checked, found, tree)
    project_used = _add_project_findings(config, options, found, tree, rules, checking, checked, report, phases)
    if options.prove or config.prove:
        report.proved = _proof(config, options, contract, tree, rules, report, project_used)
    _add_unused_ignores(checked, project_used, tree.config_paths, report)
    _decide_reach(config, options, contract, report, phases)
    _save(early, rules, tree)
    report.findings.sort(key=lambda finding: finding.sort_key)
    phases.total("%d findings, %d errors", len(report.findings), len(report.errors))
    report.errors.sort(key=lambda error: error.path)
    return RunResult(len(found.files), report.parsed, report.findings, report.errors, contract, report.fixed,
                     found.scope.skipped, report.proved)


def _learned_contract(config: Config, cache_at: Optional[Path], tree: ReadTree, phases: Phases) -> Contract:
    # Every cache keys files by these; a file the stat table vouched for is not read unless asked for.
    file_digests = tree.read.digests() if cache_at is not None else None
    with made_to_last():
        contract, cached = contract_for(config, tree.read, cache_at, file_digests=file_digests)
    learned = [key for key, source in contract.sources if source.startswith("learned")]
    phases.done("contract", "%s: %s", "cached" if cached else "learned from the tree", ", ".join(learned) or "nothing")
    return contract


@dataclass(frozen=True)
class _Rules:
    """The selected rules: their plan (made only when a file must be checked) and trigger words."""

    plan: Callable[[], Plan]
    triggers: Triggers
    result_cache: Optional[ResultCache]
    options: RunOptions


def _rules_in_force(config: Config, options: RunOptions, contract: Contract, tree: ReadTree, cache_at: Optional[Path],
                    phases: Phases) -> _Rules:
    result_cache = run_cache(config, options, contract, tree.cwd, cache_at) if cache_at is not None else None

    @cache
    def plan() -> Plan:
        return make_plan(config, options, contract)

    triggers = result_cache.triggers if result_cache is not None else None
    rules_from = "kept in the cache, rules not imported"
    if triggers is None:
        rules_from = "rules imported"
        triggers = plan().triggers(options)
        if result_cache is not None:
            result_cache.store_triggers(triggers)
    phases.done("rules", "%d selected rules' trigger words (%s)", len(triggers.groups), rules_from)
    return _Rules(plan, triggers, result_cache, options)


def _head_start_kept(
    early: Optional[HeadStart], config: Config, contract: Contract, rules: _Rules, tree: ReadTree
) -> Optional[HeadStart]:
    """The head start where the run can use it, set parsing what it will check; else None (it is closed)."""
    if early is None:
        return None
    result_cache = rules.result_cache
    warm = result_cache is not None and result_cache.holds_summaries()
    if not early.keep_for(tree.by_path, partial(_answered, result_cache, tree.content_digests), rules.triggers.wanted,
                          warm):
        return None
    early.parse_ahead(file_requests(rules.plan(), replace(rules.options, fix=None), config, contract, early.files,
                                    tree.by_path, tree.config_paths))
    return early


def _project_index(options: RunOptions, contract: Contract, tree: ReadTree, rules: _Rules, early: Optional[HeadStart],
                   phases: Phases) -> dict[str, Any]:
    """Each file's view of the project index (the helpers it calls), by shown path."""
    # Work spread over every core until the checks: none forks beside the head start's pool thread.
    with made_to_last():
        views = helper_views(tree.everything, contract, rules.result_cache, tree.content_digests,
                             1 if early is not None else options.jobs)
    phases.done("index", "%d files call a helper the project index knows", len(views))
    return views


class _Checking:
    """Checks files for this run: fresh results, one request per file, with the index's views."""

    def __init__(self, config: Config, contract: Contract, tree: ReadTree, rules: _Rules, progress: Optional[Progress],
                 early: Optional[HeadStart], views: dict[str, Any]) -> None:
        self.config, self.contract, self.tree, self.rules = config, contract, tree, rules
        self.progress, self.early, self.views = progress, early, views
        # Each file's digest with its view: what the result cache keys a file's result by.
        self.digests = {shown: with_view(content, views.get(shown)) for shown, content in tree.content_digests.items()}

    def check(self, shown_paths: list[str], options: RunOptions, into: dict[str, Checked]) -> None:
        tree = self.tree
        work = file_requests(self.rules.plan(), options, self.config, self.contract, shown_paths, tree.everything,
                             tree.config_paths, self.views)
        if shown_paths and shown_paths[0] in tree.context_by_path:
            # Context files give only their project facts.
            work = [(replace(request, rules=()), data) for request, data in work if request.project_rules]
        started = self.early.pool_for(len(work)) if self.early is not None else None
        for (request, _data), result in zip(work, check_all(work, options.jobs, self.progress, started)):
            into[request.path] = Checked(result.outcome, result.facts)


def _checked_files(options: RunOptions, tree: ReadTree, rules: _Rules, checking: _Checking,
                   phases: Phases) -> dict[str, Checked]:
    """Each file reported on, in source order: its result from the cache, or checked now (None: not parsed)."""
    result_cache, digests, by_path = rules.result_cache, checking.digests, tree.by_path
    checked: dict[str, Checked] = {}
    # Files the cache says have a fix to apply go straight to the fixing pass.
    known_fixable: set[str] = set()
    for shown in by_path:
        entry = result_cache.file(shown, digests[shown]) if result_cache else None
        if entry is None:
            continue
        if _has_fix_to_apply(entry[1], options.fix):
            known_fixable.add(shown)
        else:
            checked[shown] = Checked(entry[1], entry[2], facts_pickled=True)
    misses = [shown for shown in by_path if shown not in checked]
    if result_cache is None:
        phases.done("cache", "off")
    else:
        phases.done("cache", "%d of %d files answered by the cache", len(by_path) - len(misses), len(by_path))
    for shown in misses:
        checked[shown] = Checked(None)
    spread_jobs = 1 if checking.early is not None else options.jobs
    holding = map_shared(rules.triggers.wanted, misses, by_path, spread_jobs)
    wanted = [shown for shown, holds in zip(misses, holding) if holds or shown in checking.views]
    phases.done(
        "prefilter", "%d files hold a selected rule's trigger words; %d do not and are not parsed",
        len(wanted), len(misses) - len(wanted),
    )
    if log.isEnabledFor(logging.DEBUG):
        for shown in sorted(set(misses) - set(wanted)):
            log.debug("not parsed %s: no selected rule's trigger words", shown)
    # Fixing needs the whole file parsed; finding needs only the flaggable
    # functions. So `fix` first checks like `check`, then parses whole only the
    # files that have a fix to apply (a few dozen of a tree's thousands).
    unknown = [shown for shown in wanted if shown not in known_fixable]
    if unknown:
        checking.check(unknown, replace(options, fix=None), checked)
    if options.fix is not None:
        to_fix = [
            shown for shown in wanted
            if shown in known_fixable or _has_fix_to_apply(checked[shown].outcome, options.fix)
        ]
        if to_fix:
            checking.check(to_fix, options, checked)
    parsed_now = sum(checked[shown].outcome is not None for shown in wanted)
    phases.done("check", "%d files checked (%s jobs)", parsed_now, options.jobs or "all")
    if result_cache is not None:
        for shown in misses:
            fresh = checked[shown]
            if fresh.outcome is None or not fresh.outcome.errors:
                result_cache.store_file(shown, digests[shown], _without_fix(fresh.outcome), fresh.facts)
    # Source order, whichever results came from the cache: project rules see facts in a stable order.
    return {shown: checked[shown] for shown in by_path}


@dataclass
class _Report:
    """What the run reports, gathered phase by phase."""

    findings: list[Finding]
    errors: list[RunError]
    fixed: dict[str, tuple[bytes, bytes]]
    parsed: int
    proved: Optional[Certificate] = None


def _report(checked: dict[str, Checked], found: Discovered, tree: ReadTree) -> _Report:
    """The checked files' findings, errors and fixed bytes."""
    # Skipped paths are reported so nothing leaves scope unseen, but they are not failures.
    errors = [RunError(path, f"skipped: {reason}") for path, reason in found.scope.skipped] + tree.read_errors
    report = _Report([], errors, {}, 0)
    for shown, result in checked.items():
        outcome = result.outcome
        if outcome is None:
            continue
        report.parsed += outcome.parsed
        report.findings.extend(outcome.findings)
        report.errors.extend(outcome.errors)
        if outcome.fixed_source is not None:
            report.fixed[shown] = (tree.by_path[shown], outcome.fixed_source)
    return report


def _add_project_findings(config: Config, options: RunOptions, found: Discovered, tree: ReadTree, rules: _Rules,
                          checking: _Checking, checked: dict[str, Checked], report: _Report,
                          phases: Phases) -> dict[str, Any]:
    """Run the project rules over the facts of the checked files and their context; return the
    suppressions each file's project findings used, for the unused-ignore report."""
    project = ProjectRun(rules.plan, config, tree.config_paths, tree.everything, checking.digests, rules.result_cache,
                         options.fix)
    with_context = with_context_facts(checked, tree.context_by_path, rules.triggers, rules.result_cache,
                                      checking.digests,
                                      lambda missing, into: checking.check(missing, replace(options, fix=None), into))
    shown_order = (display_path(path, tree.cwd) for path in (found.whole or found.scope).files)
    with_context = {shown: with_context[shown] for shown in shown_order if shown in with_context}
    for code in rules.triggers.project_codes:
        produced = project.run_rule(code, with_context, report.fixed, report.errors)
        produced = [finding for finding in produced if finding.path in tree.by_path or finding.path not in tree.everything]
        report.findings.extend(produced)
        phases.done("project", "%s: %d findings (%s)", code, len(produced), project.answered_by)
    return project.used


def _proof(config: Config, options: RunOptions, contract: Contract, tree: ReadTree, rules: _Rules,
           report: _Report, project_used: dict[str, Any]) -> Certificate:
    """The --prove certificate; the suppressions that hid a KV104 join `project_used`."""
    # Imported here: the proof, and the analysis it runs, load only for a run under --prove.
    from kvlint.running.prove import prove_scope

    return prove_scope(config, contract, tree.by_path, tree.everything, tree.config_paths,
                       options.paths or config.include_paths, report.findings, rules.result_cache,
                       tree.content_digests, project_used)


def _decide_reach(config: Config, options: RunOptions, contract: Contract, report: _Report, phases: Phases) -> None:
    """Give every finding its reach, then keep those `--reach` reports; split the certificate by reach."""
    admission = contract.admission
    findings = with_reach(report.findings, admission)
    report.findings = in_reach(findings, options.reach or config.reach)
    if report.proved is not None:
        report.proved.split_by_reach(lambda klass: verdict_at("", klass, admission).reach)
    phases.done("reach", "%d of %d findings in --reach %s", len(report.findings), len(findings),
                options.reach or config.reach)


def _add_unused_ignores(checked: dict[str, Checked], project_used: dict[str, Any], config_paths: dict[str, str],
                        report: _Report) -> None:
    for shown, result in checked.items():
        if result.outcome is not None and result.outcome.open_suppressions:
            report.findings.extend(unused_ignores(shown, result.outcome.open_suppressions, project_used.get(shown, ()),
                                                  config_paths.get(shown, "")))


def _save(early: Optional[HeadStart], rules: _Rules, tree: ReadTree) -> None:
    """End the head start and keep what the next run reuses: the result cache, the stat table."""
    if early is not None:
        early.close()
    if rules.result_cache is not None:
        rules.result_cache.save(tree.by_path)
    if tree.table is not None:
        tree.table.save()
    # What `made_to_last` and the cache's load froze.
    gc.unfreeze()


def contract_in_force(config: Config, paths: Sequence[Path], cache: bool = True) -> Contract:
    """The contract `kvlint check PATHS` would use, learned (or taken from the contract cache)
    from the same files, without checking any: what `kvlint contract` prints."""
    found = discovered(config, paths, None, Phases())
    tree = found.whole or found.scope
    sources, _errors = Reader(Path.cwd(), False, None).read(list(tree.files), tree.real)
    return contract_for(config, sources, cache_directory(config) if cache else None)[0]


def run_cache(config: Config, options: RunOptions, contract: Contract, cwd: Path, directory: Path) -> ResultCache:
    """The result cache in `directory` (`cache_directory`) for a run of `options` under `contract` from `cwd`."""
    key = run_key(
        dataclass_identity(config),
        options.select,
        options.ignore,
        options.report_unused_ignores,
        options.strict_tbo,
        dataclass_identity(contract),
        str(cwd),
    )
    return ResultCache(directory, key)


def _answered(result_cache: Optional[ResultCache], digests: dict[str, bytes], shown: str) -> bool:
    """Whether the cache holds `shown`'s result at these bytes (a file with a view misses here: it may not)."""
    return result_cache is not None and result_cache.file(shown, digests[shown]) is not None


def _has_fix_to_apply(outcome: Optional[FileOutcome], allowed: Optional[Applicability]) -> bool:
    """For `fix`: a cached result answers only for a file with nothing to rewrite."""
    if outcome is None or allowed is None:
        return False
    return any(
        finding.fix is not None and finding.fix.path is None and fix_allowed(finding.fix.applicability, allowed)
        for finding in outcome.findings
    )


def _without_fix(outcome: Optional[FileOutcome]) -> Optional[FileOutcome]:
    return None if outcome is None else replace(outcome, fixed_source=None)
