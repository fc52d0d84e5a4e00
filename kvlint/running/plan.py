"""What a run will do: the selected rules, their trigger words, and one check request per file.

`kvlint check`, `kvlint fix` and the `codemods/` commands all build their
requests here, so the three honour the same selection, `ignore` and
`per-file-ignores`.

Nothing here imports LibCST at module level: the engine needs `RunOptions`
and `CheckRequest` on every run, a plan only when some file is checked again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional, Sequence

from kvlint.api.config import Config, TboConfig
from kvlint.api.project import project_config
from kvlint.api.contract import Contract
from kvlint.api.helpers import NO_HELPER_FACTS, HelperFacts
from kvlint.api.triggers import Groups, Triggers, encode_groups, passes
from kvlint.running.selection import per_file_ignored, select_codes
from kvlint.running.suppression import SUPPRESSION_WORDS
from kvlint.api.types import Applicability

from kvlint.api.rule import ProjectRule, Rule
from kvlint.running.discovery import discover


@dataclass(frozen=True)
class RunOptions:
    """A run's options from the command line (or a library caller), beside the configuration."""

    paths: tuple[Path, ...] = ()
    select: Optional[tuple[str, ...]] = None
    ignore: tuple[str, ...] = ()
    fix: Optional[Applicability] = None
    jobs: Optional[int] = None
    changed: Optional[str] = None
    report_unused_ignores: bool = False
    strict_tbo: bool = False
    # Prove every write door's loc marked (KV104 for what cannot be shown) and count the door calls.
    prove: bool = False
    # Read and write the result cache (the CLI's default; off for library callers).
    cache: bool = False
    # `--reach`: "all", "live" or "live-only"; None takes the configuration's `reach`.
    reach: Optional[str] = None


@dataclass(frozen=True)
class CheckRequest:
    """Everything a worker needs to check one file; picklable."""

    path: str
    rules: tuple[type[Rule], ...]
    contract: Contract
    # Codes the file's per-file-ignores remove.
    ignored_codes: frozenset[str] = frozenset()
    report_unused_ignores: bool = False
    # None for `check`; the highest applicability to apply for `fix`.
    fix: Optional[Applicability] = None
    project_rules: tuple[ProjectRule, ...] = ()
    # The project index's facts about the helpers this file calls.
    helpers: HelperFacts = NO_HELPER_FACTS
    # The file relative to the project's root, as fingerprints name it ("": `path`).
    project_path: str = ""


# Encoded trigger words by (rule class, options, contract): a worker encodes each once.
_ENCODED: dict[tuple[object, ...], Groups] = {}


def rule_groups(rule: type[Rule], contract: Contract) -> Groups:
    """A per-file rule's trigger words as the prefilter tests them; the one place they are encoded."""
    key = ("file", rule, contract)
    if key not in _ENCODED:
        _ENCODED[key] = encode_groups(rule.trigger_groups(contract))
    return _ENCODED[key]


def project_groups(rule: type[ProjectRule], options: TboConfig, contract: Contract) -> Groups:
    key = ("project", rule, options, contract)
    if key not in _ENCODED:
        _ENCODED[key] = encode_groups(rule.trigger_groups(options, contract))
    return _ENCODED[key]


def whole_file_groups(rule: type[ProjectRule], options: TboConfig, contract: Contract) -> Groups:
    key = ("whole", rule, options, contract)
    if key not in _ENCODED:
        _ENCODED[key] = encode_groups(rule.whole_file_groups(options, contract))
    return _ENCODED[key]


@dataclass(frozen=True)
class Plan:
    """The selected rules and their encoded trigger words."""

    rules: tuple[type[Rule], ...]
    project_rules: tuple[ProjectRule, ...]
    rule_groups: tuple[Groups, ...]
    project_groups: tuple[Groups, ...]
    # Words that make a file worth reading for its suppression comments alone (KV001).
    extra_words: tuple[bytes, ...]

    def project_rule(self, code: str) -> ProjectRule:
        return next(rule for rule in self.project_rules if rule.code == code)

    def triggers(self, options: RunOptions) -> Triggers:
        return Triggers(
            groups=(*self.rule_groups, *self.project_groups),
            comment_words=self.extra_words if options.report_unused_ignores else (),
            project_codes=tuple(rule.code for rule in self.project_rules),
        )


def make_plan(config: Config, options: RunOptions, contract: Contract) -> Plan:
    # The registry imports every rule, and the rules LibCST: only a run that checks a file pays for it.
    from kvlint.running.registry import all_codes, all_rules

    select = options.select if options.select is not None else config.select
    ignore = (*config.ignore, *options.ignore) if options.select is None else options.ignore
    codes = set(select_codes(all_codes(), select, ignore))
    rules = tuple(rule for rule in all_rules() if rule.code in codes and issubclass(rule, Rule))
    tbo_options = replace(config.tbo, strict=config.tbo.strict or options.strict_tbo)
    project_rules = tuple(
        rule(tbo_options) for rule in all_rules() if rule.code in codes and issubclass(rule, ProjectRule)
    )
    extra = tuple(word.encode() for word in SUPPRESSION_WORDS) if "KV001" in codes else ()
    return Plan(
        rules=rules,
        project_rules=project_rules,
        rule_groups=tuple(rule_groups(rule, contract) for rule in rules),
        project_groups=tuple(project_groups(type(rule), rule.options, contract) for rule in project_rules),
        extra_words=extra,
    )


def file_requests(
    plan: Plan,
    options: RunOptions,
    config: Config,
    contract: Contract,
    paths: Sequence[str],
    sources: Mapping[str, bytes],
    config_paths: dict[str, str],
    views: Optional[dict[str, HelperFacts]] = None,
) -> list[tuple[CheckRequest, bytes]]:
    """A check request for each of `paths` that some selected rule's trigger words make worth parsing.

    A file calling a helper the project index knows (`views`) also passes a rule's word
    group by that helper's name: `set_kv_buffer(layer, self._kv_write_loc(fb), ...)` needs
    no `out_cache_loc` of its own.
    """
    # As in `make_plan`: the registry loads the rules and LibCST.
    from kvlint.running.registry import all_codes

    work: list[tuple[CheckRequest, bytes]] = []
    for shown in paths:
        data = sources[shown]
        helpers = (views or {}).get(shown, NO_HELPER_FACTS)
        words = helper_words(helpers)
        rules = tuple(
            rule for rule, groups in zip(plan.rules, plan.rule_groups) if passes(data, with_words(groups, words))
        )
        project_rules = tuple(
            rule for rule, groups in zip(plan.project_rules, plan.project_groups) if passes(data, groups)
        )
        wants_comments = options.report_unused_ignores and any(word in data for word in plan.extra_words)
        if not rules and not project_rules and not wants_comments:
            continue
        request = CheckRequest(
            path=shown,
            rules=rules,
            contract=contract,
            ignored_codes=per_file_ignored(config_paths[shown], config.per_file_ignores, all_codes()),
            report_unused_ignores=options.report_unused_ignores,
            fix=options.fix,
            project_rules=project_rules,
            helpers=helpers,
            project_path=config_paths[shown],
        )
        work.append((request, data))
    return work


def helper_words(helpers: HelperFacts) -> tuple[bytes, ...]:
    """The names of the helpers a file calls that have a fact."""
    names = {spelling[-1] for _klass, spelling in helpers.by_call} | {name for _klass, name in helpers.defined}
    return tuple(sorted(name.encode() for name in names))


def with_words(groups: Groups, words: tuple[bytes, ...]) -> Groups:
    """`groups` where each group also accepts `words`."""
    return groups if not words else tuple((*group, *words) for group in groups)


def codemod_request(path: str, codes: tuple[str, ...]) -> CheckRequest:
    """What `kvlint fix` would apply to `path`, limited to `codes` (all when empty).

    The configuration is the one `kvlint fix path` would find (the project `path`
    belongs to): its `select`, `ignore` and `per-file-ignores` apply, and its
    contract is learned from the project's context.
    """
    # As in `make_plan`: the registry loads the rules and LibCST.
    from kvlint.running.registry import all_codes

    config = project_config([Path(path)])
    selected = set(select_codes(all_codes(), config.select, config.ignore))
    if codes:
        selected &= set(codes)
    options = RunOptions(select=tuple(sorted(selected)), fix=Applicability.SAFE)
    contract = _learned_contract(config, str(Path.cwd()))
    plan = make_plan(config, options, contract)
    absolute = Path(path).resolve()
    shown = _relative(absolute, Path.cwd().resolve())
    project_path = _relative(absolute, config.root.resolve())
    ignored = per_file_ignored(project_path, config.per_file_ignores, all_codes())
    return CheckRequest(path=shown, rules=plan.rules, contract=contract, ignored_codes=ignored, fix=options.fix,
                        project_path=project_path)


@lru_cache(maxsize=4)
def _learned_contract(config: Config, cwd: str) -> Contract:
    """The contract `kvlint check` would learn here, once per process (LibCST runs one per worker)."""
    # Imported here: only a codemod run learns here; a `kvlint check` that the cache answers never loads the learners.
    from kvlint.learn.contract import learn_contract

    scope = discover(config.context, config.exclude, config.root)
    sources: dict[Path, bytes] = {}
    for file in scope.files:
        try:
            sources[file] = file.read_bytes()
        except OSError:
            # Unreadable files are reported by `kvlint check`; learning just skips them.
            continue
    return learn_contract(config, sources)


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()

