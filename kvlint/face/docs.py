"""Rule documentation for `kvlint explain`, `kvlint rules`, and the README table."""

from __future__ import annotations

import inspect
import json
from typing import Optional

from kvlint.analysis.own_buffers import OwnBuffers
from kvlint.api.contract import Contract
from kvlint.running.registry import AnyRule, all_rules, rule_by_code
from kvlint.api.types import ENGINE_CODES



def summary(rule: AnyRule) -> str:
    return inspect.cleandoc(rule.__doc__ or "").splitlines()[0]


def fix_label(rule: AnyRule) -> str:
    return rule.fix_applicability.value if rule.fix_applicability is not None else "none"


def explain_rule(code: str) -> Optional[str]:
    for engine in ENGINE_CODES:
        if engine.code == code.upper():
            text = f"{engine.code} {engine.name} ({engine.severity.value})\n\n{engine.summary}"
            return f"{text}\n\n{engine.details}" if engine.details else text
    rule = rule_by_code(code)
    if rule is None:
        return None
    header = f"{rule.code} {rule.name} ({rule.severity.value}; fix: {fix_label(rule)})"
    return f"{header}\n\n{inspect.cleandoc(rule.__doc__ or '')}"


def rules_table(output_format: str = "text") -> str:
    rows = [(e.code, e.name, e.severity.value, "none", e.summary) for e in ENGINE_CODES]
    rows += [(r.code, r.name, r.severity.value, fix_label(r), summary(r)) for r in all_rules()]
    # In code order: KV104 (reported by the engine's --prove pass) sits with its family.
    rows.sort(key=lambda row: row[0])
    if output_format == "json":
        keys = ("code", "name", "severity", "fix", "summary")
        return json.dumps([dict(zip(keys, row)) for row in rows], indent=2)
    if output_format == "markdown":
        lines = ["| code | name | severity | fix | what it flags |", "|---|---|---|---|---|"]
        lines += [f"| {c} | {n} | {s} | {f} | {d} |" for c, n, s, f, d in rows]
        return "\n".join(lines)
    width = max(len(row[1]) for row in rows)
    return "\n".join(f"{c}  {n:<{width}}  {s:<7}  {f:<6}  {d}" for c, n, s, f, d in rows)


def contract_table(contract: Contract) -> str:
    values = {
        "write-loc-class": contract.write_loc_class,
        "mark": contract.mark,
        "batch-mark": contract.batch_mark,
        "batch-factory": contract.batch_factory,
        "layer-factory": contract.layer_factory,
        "write-loc-module": contract.write_loc_module,
        "paged-helpers-module": contract.paged_helpers_module,
        "loc-attributes": list(contract.loc_attributes),
        "unmarked-loc-attributes": list(contract.unmarked_loc_attributes),
        "write-doors": dict(contract.write_doors),
        "buffer-accessors": list(contract.buffer_accessors),
        "kv-name-fallback": contract.kv_name_fallback,
        "mark-predicate": contract.mark_predicate,
        "pool-classes": list(contract.pool_classes),
        "host-cache-classes": list(contract.host_cache_classes),
        "page-split-pools": list(contract.page_split_pools),
        "page-split-apart": dict((klass, list(pools)) for klass, pools in contract.page_split_apart),
        "page-split-only": list(contract.page_split_only),
        "page-pinned-classes": dict(contract.page_pinned_classes),
        "binding-methods": list(contract.binding_methods),
    }
    if contract.mark_gate:
        values["mark-gate"] = contract.mark_gate
        values["ungated-classes"] = list(contract.ungated_classes)
    if contract.mark_keeping:
        values["mark-keeping"] = list(contract.mark_keeping)
    width = max(map(len, values))
    lines = [
        f"{key:<{width}}  {json.dumps(value)}  [{_origin(contract, key)}] ({contract.source_of(key)})"
        for key, value in values.items()
    ]
    # Each door with why it is one: a proof is only as complete as its door set.
    lines += [f"  door {name}: {why}" for name, why in contract.door_reasons]
    own = OwnBuffers(contract).own
    if own:
        # Derived, not a key: the layout rules leave these pools' buffers alone.
        lines.append(f"own-buffer pools (gate off, no accessor handing over to a unified pool): {json.dumps(sorted(own))}")
    lines += _admission_lines(contract)
    if contract.engine_package:
        # Where the engine came from: pre-commit's environment, kvlint's or the project's may differ.
        lines.append(f"engine: {contract.engine_search}")
    return "\n".join(lines)


def _admission_lines(contract: Contract) -> list[str]:
    """What the engine admits on the unified pool, each value with its file:line: what reach reads."""
    admission = contract.admission
    if not (admission.gates or admission.refusals):
        return [f"admission: {admission.no_gate()} (every finding's reach is unknown)"]
    lines = [f"admission: backends {json.dumps(list(admission.admitted))} by the allow-sets at "
             f"{', '.join(admission.gates) or '(none)'}"]
    if admission.unreadable:
        lines.append(f"  unreadable allow-set: {admission.unreadable}")
    lines += [f"  refused: {flag} ({where})" for flag, where in admission.refusals]
    if admission.algorithms_at:
        lines.append(f"  speculative algorithms {json.dumps(list(admission.algorithms))} ({admission.algorithms_at})")
    lines += [f"  draft backends under {algorithm}: {json.dumps(list(names))} ({where})" for algorithm, names, where in admission.drafts]
    for factory in admission.registry:
        state = "admitted" if factory.name in admission.admitted else "refused"
        built = ", ".join(factory.classes) + (" and what kvlint cannot name" if factory.opaque else "")
        lines.append(f"  backend {factory.name} [{state}]: {factory.function} ({factory.where}) returns {built}")
    lines += [f"  {verdict.reach} {name}: {verdict.reason}" for name, verdict in admission.classes]
    return lines


def _origin(contract: Contract, key: str) -> str:
    """found (in the scanned tree), engine NAME VERSION at FOLDER (in the installed engine), pinned
    (configured), or fallback; "fallback, missing in the tree" where learning looked for the API and
    did not find it (a fix calling it is unsafe), "... and no installed ENGINE found" where it looked
    for the engine too."""
    origin = contract.origin(key)
    if origin == "engine":
        return f"engine {contract.engine}"
    if origin == "fallback" and key in contract.missing:
        if contract.engine_not_found:
            return f"fallback, missing in the tree; no installed {contract.engine_package} found"
        if contract.engine:
            return "fallback, missing in the tree and the engine"
        return "fallback, missing in the tree"
    return origin
