"""Run kvlint over a set of paths and return findings; never prints.

The flow: discover files, read their bytes (with the cache on, a file whose stat
is unchanged since it was hashed is read only if asked for), learn the contract,
take what the result cache still holds for them, prefilter the rest by the selected rules'
trigger words, check the survivors (in worker processes when there are enough
of them), then run the project-level rules once over the facts the workers
extracted.

LibCST and the rules are imported only when some file has to be checked
again: a run the cache answers entirely never loads the parser.
"""

from __future__ import annotations

import gc
import logging
import subprocess
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from kvlint.store.result_cache import ResultCache, dataclass_identity, run_key
from kvlint.processes.collector import made_to_last
from kvlint.api.config import Config, ConfigError
from kvlint.api.contract import Contract
from kvlint.api.paths import display_path
from kvlint.running.discovery import discover, tree_of
from kvlint.store.contract_cache import contract_for
from kvlint.store.location import cache_directory
from kvlint.running.phases import Phases, log
from kvlint.running.plan import Plan, RunOptions, file_requests, make_plan
from kvlint.running.project_facts import helper_views, with_view
from kvlint.running.reading import Reader, SourceChanged
from kvlint.store.stat_table import StatTable
from kvlint.running.decide import unused_ignores
from kvlint.running.project_run import Checked, ProjectRun
from kvlint.api.types import Applicability, FileOutcome, Finding, RunError, fix_allowed
from kvlint.running.head_start import HeadStart, warm_up
from kvlint.processes.pool import map_shared
from kvlint.running.workers import Progress, check_all

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
    paths = options.paths or config.include_paths
    scope = discover(paths, config.exclude, config.root)
    files = list(scope.files)
    if options.changed is not None:
        files = _only_changed(files, scope.real, options.changed)
    # Under --changed, or with paths narrower than the configured include (the pre-commit hook),
    # the rest of the tree is context: the contract, the helpers' facts and KV301's facts come
    # from it as in a whole-tree run, but nothing is reported there.
    whole = tree_of(scope, config.include, config.exclude, config.root) if options.changed or options.paths else None
    phases.done("discover", "%d files in scope, %d paths skipped", len(files), len(scope.skipped))
    # A few files to check in a large tree: a worker loads LibCST while the tree is read and indexed.
    early = warm_up(files, len(whole.files) if whole else len(files), options.cache, options.jobs, started)
    if early is not None:
        closing.callback(early.close)
    for skipped_path, reason in scope.skipped:
        log.debug("skipped %s: %s", skipped_path, reason)
    cwd = Path.cwd()
    cache_at = cache_directory(config, paths) if options.cache else None
    table = StatTable(cache_at) if cache_at is not None and stat_table else None
    reader = Reader(cwd, options.cache, table)
    sources, read_errors = reader.read(files, scope.real)
    reading = {scope.real[path] for path in sources}
    context_files = [path for path in whole.files if whole.real[path] not in reading] if whole else []
    context, _unread = reader.read(context_files, whole.real if whole else {})
    phases.done("read", "%d files read, %d could not be, %d of context; %d of them unchanged since hashed, left unread",
                len(sources), len(read_errors), len(context), reader.vouched)
    read = context.joined(sources)
    # Every cache keys files by these; a file the stat table vouched for is not read unless asked for.
    file_digests = read.digests() if options.cache else None
    with made_to_last():
        contract, cached = contract_for(config, read, cache_at, file_digests=file_digests)
    learned = [key for key, source in contract.sources if source.startswith("learned")]
    phases.done("contract", "%s: %s", "cached" if cached else "learned from the tree", ", ".join(learned) or "nothing")
    as_shown = partial(display_path, cwd=cwd)
    by_path = sources.keyed(as_shown)
    root = config.root.resolve()
    config_paths = {shown: _config_relative(path, root) for shown, path in by_path.paths().items()}
    context_by_path = context.keyed(as_shown)
    config_paths.update({shown: _config_relative(path, root) for shown, path in context_by_path.paths().items()})
    result_cache = run_cache(config, options, contract, cwd, cache_at) if cache_at is not None else None

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
    everything = context_by_path.joined(by_path)
    content_digests = everything.digests() if options.cache else {}
    warm = result_cache is not None and result_cache.holds_summaries()
    if early is not None and not early.keep_for(by_path, partial(_answered, result_cache, content_digests),
                                                triggers.wanted, warm):
        early = None
    if early is not None:
        early.parse_ahead(file_requests(plan(), replace(options, fix=None), config, contract, early.files, by_path,
                                        config_paths))
    # Work spread over every core until the checks: none forks beside the head start's pool thread.
    spread_jobs = 1 if early is not None else options.jobs
    with made_to_last():
        views = helper_views(everything, contract, result_cache, content_digests, spread_jobs)
    phases.done("index", "%d files call a helper the project index knows", len(views))
    digests = {shown: with_view(content, views.get(shown)) for shown, content in content_digests.items()}

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
    holding = map_shared(triggers.wanted, misses, by_path, spread_jobs)
    wanted = [shown for shown, holds in zip(misses, holding) if holds or shown in views]
    phases.done(
        "prefilter", "%d files hold a selected rule's trigger words; %d do not and are not parsed",
        len(wanted), len(misses) - len(wanted),
    )
    if log.isEnabledFor(logging.DEBUG):
        for shown in sorted(set(misses) - set(wanted)):
            log.debug("not parsed %s: no selected rule's trigger words", shown)

    def check_files(shown_paths: list[str], with_options: RunOptions, into: dict[str, Checked] = checked) -> None:
        work = file_requests(plan(), with_options, config, contract, shown_paths, everything, config_paths, views)
        if shown_paths and shown_paths[0] in context_by_path:
            # Context files give only their project facts.
            work = [(replace(request, rules=()), data) for request, data in work if request.project_rules]
        started = early.pool_for(len(work)) if early is not None else None
        for (request, _data), result in zip(work, check_all(work, with_options.jobs, progress, started)):
            into[request.path] = Checked(result.outcome, result.facts)

    # Fixing needs the whole file parsed; finding needs only the flaggable
    # functions. So `fix` first checks like `check`, then parses whole only the
    # files that have a fix to apply (a few dozen of a tree's thousands).
    unknown = [shown for shown in wanted if shown not in known_fixable]
    if unknown:
        check_files(unknown, replace(options, fix=None))
    if options.fix is not None:
        to_fix = [
            shown for shown in wanted
            if shown in known_fixable or _has_fix_to_apply(checked[shown].outcome, options.fix)
        ]
        if to_fix:
            check_files(to_fix, options)
    parsed_now = sum(checked[shown].outcome is not None for shown in wanted)
    phases.done("check", "%d files checked (%s jobs)", parsed_now, options.jobs or "all")
    if result_cache is not None:
        for shown in misses:
            fresh = checked[shown]
            if fresh.outcome is None or not fresh.outcome.errors:
                result_cache.store_file(shown, digests[shown], _without_fix(fresh.outcome), fresh.facts)
    # Source order, whichever results came from the cache: project rules see facts in a stable order.
    checked = {shown: checked[shown] for shown in by_path}

    findings: list[Finding] = []
    # Skipped paths are reported so nothing leaves scope unseen, but they are not failures.
    errors = [RunError(path, f"skipped: {reason}") for path, reason in scope.skipped] + read_errors
    fixed: dict[str, tuple[bytes, bytes]] = {}
    parsed = 0
    for shown, result in checked.items():
        outcome = result.outcome
        if outcome is None:
            continue
        parsed += outcome.parsed
        findings.extend(outcome.findings)
        errors.extend(outcome.errors)
        if outcome.fixed_source is not None:
            fixed[shown] = (by_path[shown], outcome.fixed_source)

    project = ProjectRun(plan, config, config_paths, everything, digests, result_cache, options.fix)
    with_context = _with_context(checked, context_by_path, triggers, result_cache, digests,
                                 lambda missing, into: check_files(missing, replace(options, fix=None), into))
    order = [shown for shown in (display_path(path, cwd) for path in (whole or scope).files) if shown in with_context]
    with_context = {shown: with_context[shown] for shown in order}
    for code in triggers.project_codes:
        produced = project.run_rule(code, with_context, fixed, errors)
        produced = [finding for finding in produced if finding.path in by_path or finding.path not in everything]
        findings.extend(produced)
        phases.done("project", "%s: %d findings (%s)", code, len(produced), project.answered_by)
    proved: Optional[Certificate] = None
    if options.prove or config.prove:
        # Imported here: the proof, and the analysis it runs, load only for a run under --prove.
        from kvlint.running.prove import prove_scope

        proved = prove_scope(config, contract, by_path, everything, config_paths, paths, findings, result_cache,
                             content_digests)
    for shown, result in checked.items():
        if result.outcome is not None and result.outcome.open_suppressions:
            findings.extend(unused_ignores(shown, result.outcome.open_suppressions, project.used.get(shown, ())))

    if early is not None:
        early.close()
    if result_cache is not None:
        result_cache.save(by_path)
    if table is not None:
        table.save()
    # What `made_to_last` and the cache's load froze.
    gc.unfreeze()
    findings.sort(key=lambda finding: finding.sort_key)
    phases.total("%d findings, %d errors", len(findings), len(errors))
    errors.sort(key=lambda error: error.path)
    return RunResult(len(files), parsed, findings, errors, contract, fixed, scope.skipped, proved)


def contract_in_force(config: Config, paths: Sequence[Path], cache: bool = True) -> Contract:
    """The contract `kvlint check PATHS` would use, learned (or taken from the contract cache)
    from the same files, without checking any: what `kvlint contract` prints."""
    scope = discover(paths or config.include_paths, config.exclude, config.root)
    tree = tree_of(scope, config.include, config.exclude, config.root) if paths else scope
    sources, _errors = Reader(Path.cwd(), False, None).read(list(tree.files), tree.real)
    return contract_for(config, sources, cache_directory(config, paths) if cache else None)[0]


def _with_context(
    checked: dict[str, Checked],
    context: Mapping[str, bytes],
    triggers: Any,
    result_cache: Optional[ResultCache],
    digests: dict[str, bytes],
    check_files: Callable[..., None],
) -> dict[str, Checked]:
    """The checked files and the project facts of the rest of the tree, their context (cached by content)."""
    if not context or not triggers.project_codes:
        return checked
    cached = {shown: result_cache.project_facts(shown, digests[shown]) for shown in context} if result_cache else {}
    found = {shown: Checked(None, facts, facts_pickled=True) for shown, facts in cached.items() if facts is not None}
    unknown = [shown for shown in context if shown not in found]
    missing = [shown for shown in unknown if triggers.wanted(context[shown])]
    if missing:
        check_files(missing, found)
    if unknown and result_cache is not None:
        # A file no project rule reads (no trigger words) has no facts: kept as such, so no later run reads it again.
        known = {shown: (digests[shown], found[shown].facts if shown in found else {}) for shown in unknown}
        failed = {shown for shown in missing if shown in found and _errors(found[shown])}
        result_cache.store_context_facts({shown: entry for shown, entry in known.items() if shown not in failed})
    return {**found, **checked}


def _errors(checked: Checked) -> bool:
    return checked.outcome is not None and bool(checked.outcome.errors)


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


def _only_changed(files: list[Path], real: Mapping[Path, Path], rev: str) -> list[Path]:
    """`files` (`real`: each one's real path, as `discover` found it) that git says changed against `rev`."""
    top = _git(["rev-parse", "--show-toplevel"], Path.cwd())
    if top is None:
        raise ConfigError("--changed needs a git repository")
    root = Path(top.strip())
    diff = _git(["diff", "--name-only", "-z", "--diff-filter=d", rev, "--"], root)
    if diff is None:
        raise ConfigError(f"--changed: git cannot diff against {rev!r}")
    untracked = _git(["ls-files", "-z", "--others", "--exclude-standard"], root) or ""
    changed = {(root / name).resolve() for name in (diff + untracked).split("\0") if name}
    # The walk's real paths, not `Path.resolve` (a stat per path component): over sglang/srt's
    # 2,141 files resolving took 0.4 s of every `--changed` run.
    return [path for path in files if real[path] in changed]


def _git(args: list[str], cwd: Path) -> Optional[str]:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout if result.returncode == 0 else None


def _config_relative(path: Path, root: Path) -> str:
    """`path` as the configuration's per-file patterns see it: relative to the resolved config root."""
    # What `relative_to(root).as_posix()` gives, by a prefix test on the text: over sglang/srt's
    # 2,141 files `relative_to` took 0.025 s of every run.
    return display_path(path, root)
