"""`kvlint check --prove`: every write-door call in scope, its loc proven, raw or unproven, and the certificate.

The door calls are those of the reported files (a bytes test for a door's
name first, then CPython's `ast`); their locs are classified by
`kvlint.analysis.loc_proof` over the whole scope (context files included
under `--changed`, so a helper or a caller in an unchanged file still
counts). A raw loc is what KV101, KV102 and KV103 report; an unproven one
becomes KV104 here, decided like any finding (per-file ignores, suppression
comments), except that only a comment naming KV104 hides it (`decide.NAMED_ONLY`).
The certificate counts the door calls by top-level folder of the scope, so a CI
log shows which part of the tree was proven and how much of it, and lists every
unproven door call by file:line, the suppressed ones marked, so it shows where
the proof stops even when no KV104 is reported.
A door call a pool makes on its base class with a bare loc it takes by design
(`kvlint.analysis.pool_gate`) is counted as exempt, not unproven.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Sequence

from kvlint.analysis.loc_proof import PROVEN, RAW, UNPROVEN, LocProver, Verdict
from kvlint.analysis.pool_gate import bare_loc_taken, mark_not_needed
from kvlint.analysis.proof_tree import Place, ProofTree, own_nodes
from kvlint.api.config import Config
from kvlint.api.contract import Contract
from kvlint.api.types import UNPROVEN_WRITE_LOC, Finding
from kvlint.store.result_cache import ResultCache
from kvlint.running.decide import Candidate, FileDecisions, SuppressionId
from kvlint.api.paths import display_path
from kvlint.running.selection import per_file_ignored

# The codes that report a raw loc: a raw door call none of them reports is unproven.
RAW_CODES = ("KV101", "KV102", "KV103")
# A bare loc handed to a door that takes one by design.
EXEMPT = "exempt"


@dataclass
class Counts:
    doors: int = 0
    proven: int = 0
    raw: int = 0
    unproven: int = 0
    exempt: int = 0

    def add(self, kind: str) -> None:
        self.doors += 1
        setattr(self, kind, getattr(self, kind) + 1)

    def to_json(self) -> dict[str, int]:
        return {"doors": self.doors, "proven": self.proven, "raw": self.raw, "unproven": self.unproven,
                "exempt": self.exempt}


@dataclass(frozen=True)
class UnprovenCall:
    """A door call whose loc the proof could not show marked, where its KV104 is (or would be)."""

    path: str
    line: int
    # True: a `# kvlint: ignore[KV104]`, `# noqa: KV104` or a per-file ignore hid its KV104.
    suppressed: bool
    why: str

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "suppressed": self.suppressed, "why": self.why}


@dataclass
class Certificate:
    """What `--prove` showed: door calls seen, proven, raw, unproven and exempt, in all and by top-level folder."""

    total: Counts = field(default_factory=Counts)
    by_path: dict[str, Counts] = field(default_factory=dict)
    # Each exempt call, (path, line, why), so a reviewer can check every one.
    exempt_calls: list[tuple[str, int, str]] = field(default_factory=list)
    # Each unproven call, reported or suppressed: a run whose KV104s are all suppressed still shows them.
    unproven_calls: list[UnprovenCall] = field(default_factory=list)
    # By the class holding the call ("" for a module function): cached with the proof, which does
    # not depend on the admission; `by_reach` is split from it after (`kvlint.running.reach`).
    by_class: dict[str, Counts] = field(default_factory=dict)
    by_reach: dict[str, Counts] = field(default_factory=dict)

    def split_by_reach(self, reach_of: Callable[[str], str]) -> None:
        """`by_reach` from `by_class`, `reach_of` giving the reach of code in a class."""
        self.by_reach = {}
        for klass, counts in self.by_class.items():
            into = self.by_reach.setdefault(reach_of(klass), Counts())
            for name, value in vars(counts).items():
                setattr(into, name, getattr(into, name) + value)

    def to_json(self) -> dict[str, object]:
        return {
            **self.total.to_json(),
            "by_path": {path: counts.to_json() for path, counts in sorted(self.by_path.items())},
            "by_reach": {reach: counts.to_json() for reach, counts in sorted(self.by_reach.items())},
            "exempt_calls": [{"path": path, "line": line, "why": why} for path, line, why in self.exempt_calls],
            "unproven_calls": [call.to_json() for call in self.unproven_calls],
        }


@dataclass(frozen=True)
class DoorCall:
    path: str
    door: str
    call: ast.Call
    # The loc argument; None when the call does not pass it visibly (`*args`).
    loc: Optional[ast.expr]
    verdict: Verdict
    # Why the door takes a bare loc here (`pool_gate`); None when it may not.
    exempt: Optional[str] = None
    # The class holding the call ("" for a module function).
    klass: str = ""


def prove_scope(
    config: Config, contract: Contract, reported: Mapping[str, bytes], everything: Mapping[str, bytes],
    config_paths: dict[str, str], paths: Sequence[Path], findings: list[Finding], result_cache: Optional[ResultCache],
    digests: Mapping[str, bytes], used: dict[str, set[SuppressionId]],
) -> Certificate:
    """Prove the door calls of `reported` (display path -> bytes) over the tree `everything`; add a KV104
    to `findings` for each unproven one, and for each raw one that no KV101-103 among `findings` reports
    (a raw loc one parameter or alias further than the rules look). `paths` are the run's paths, whose
    top-level folders the certificate counts by; `digests`: each file's content digest, with the cache on.
    The suppressions that hid a KV104 are added to `used` (by path): they are not KV001."""
    roots = [display_path(path, Path.cwd()) for path in paths]
    reported_raw = {(f.path, f.line) for f in findings if f.code in RAW_CODES}
    # A warm run reads the proof from the cache: it depends on every file's content and on which
    # raw locs the rules reported, nothing else (the cache's own key holds the config and contract).
    key = _proof_key(digests, reported, reported_raw) if result_cache is not None else b""
    known = result_cache.proof(key) if result_cache is not None else None
    if known is not None:
        certificate_known: Certificate = known[0]
        findings.extend(known[1])
        _add_used(used, known[2])
        return certificate_known
    tree = ProofTree(everything)
    prover = LocProver(tree, contract)
    # Several paths given: each is counted, a path where no door call is left included.
    certificate = Certificate(by_path={root: Counts() for root in roots} if len(roots) > 1 else {})
    produced: list[Finding] = []
    decisions: dict[str, FileDecisions] = {}
    for found in door_calls(tree, prover, reported):
        verdict = found.verdict
        if verdict.kind == RAW and not ({verdict.origin, (found.path, _line(found))} & reported_raw):
            verdict = Verdict(UNPROVEN, f"{verdict.reason}: a raw loc no rule reports")
        if verdict.kind == UNPROVEN and found.exempt is not None:
            verdict = Verdict(EXEMPT, found.exempt)
            certificate.exempt_calls.append((found.path, found.call.lineno, found.exempt))
        certificate.total.add(verdict.kind)
        certificate.by_path.setdefault(_folder(found.path, roots), Counts()).add(verdict.kind)
        certificate.by_class.setdefault(found.klass, Counts()).add(verdict.kind)
        if verdict.kind != UNPROVEN:
            continue
        path = found.path
        if path not in decisions:
            ignored = per_file_ignored(config_paths.get(path, path), config.per_file_ignores, [UNPROVEN_WRITE_LOC.code])
            decisions[path] = FileDecisions.for_source(path, ignored, reported[path].decode("utf-8", errors="replace"),
                                                       config_paths.get(path, path))
        candidate = _candidate(found, verdict, reported[path].splitlines())
        finding = decisions[path].admit(candidate)
        certificate.unproven_calls.append(UnprovenCall(path, candidate.line, finding is None, verdict.reason))
        if finding is not None:
            produced.append(finding)
    certificate.unproven_calls.sort(key=lambda call: (call.path, call.line))
    hid = tuple(sorted((path, *where) for path, decided in decisions.items() for where in decided.used))
    if result_cache is not None:
        result_cache.store_proof(key, (certificate, produced, hid))
    findings.extend(produced)
    _add_used(used, hid)
    return certificate


def _add_used(used: dict[str, set[SuppressionId]], hid: Sequence[tuple[str, int, int]]) -> None:
    for path, line, column in hid:
        used.setdefault(path, set()).add((line, column))


def _proof_key(digests: Mapping[str, bytes], reported: Mapping[str, bytes], reported_raw: set[tuple[str, int]]) -> bytes:
    hasher = hashlib.sha256(b"prove")
    for path, content_digest in sorted(digests.items()):
        hasher.update(path.encode() + (b"\1" if path in reported else b"\0") + content_digest)
    for path, line in sorted(reported_raw):
        hasher.update(f"{path}:{line}\0".encode())
    return hasher.digest()


def door_calls(tree: ProofTree, prover: LocProver, reported: Mapping[str, bytes]) -> Iterator[DoorCall]:
    words = tuple(name.encode() + b"(" for name in prover.doors)
    for path, data in reported.items():
        if not any(word in data for word in words):
            continue
        for where in tree.places(path, words):
            for node in own_nodes(where.function):
                door = _door_name(node, prover)
                if door is not None:
                    assert isinstance(node, ast.Call)
                    yield _classified(where, door, node, prover, tree)


def _door_name(node: ast.AST, prover: LocProver) -> Optional[str]:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name if name in prover.doors else None


def _classified(where: Place, door: str, call: ast.Call, prover: LocProver, tree: ProofTree) -> DoorCall:
    loc = prover.door_loc(call)
    if loc is None:
        verdict = Verdict(UNPROVEN, f"`{door}` at {where.path}:{call.lineno} does not pass its loc visibly")
    else:
        verdict = prover.verdict(where, loc)
    exempt = None
    if verdict.kind != PROVEN:
        exempt = bare_loc_taken(tree, prover.contract, where, call) or mark_not_needed(tree, prover.contract, where, door, call)
    return DoorCall(where.path, door, call, loc, verdict, exempt, where.klass)


def _line(found: DoorCall) -> int:
    return found.loc.lineno if found.loc is not None else found.call.lineno


def _candidate(found: DoorCall, verdict: Verdict, lines: list[bytes]) -> Candidate:
    node: ast.expr = found.loc if found.loc is not None else found.call
    end_line = node.end_lineno or node.lineno
    snippet = " ".join(ast.unparse(node).split())
    return Candidate(
        code=UNPROVEN_WRITE_LOC.code,
        name=UNPROVEN_WRITE_LOC.name,
        severity=UNPROVEN_WRITE_LOC.severity,
        path=found.path,
        line=node.lineno,
        column=_column(lines, node.lineno, node.col_offset),
        end_line=end_line,
        end_column=_column(lines, end_line, node.end_col_offset or 0),
        message=f"the loc of `{found.door}` cannot be shown marked: {verdict.reason}",
        snippet=snippet,
        statement_line=found.call.lineno,
        scope=found.door,
        place=found.klass,
    )


def _column(lines: list[bytes], line: int, offset: int) -> int:
    """1-based column in characters of a UTF-8 byte offset (what `ast` gives)."""
    text = lines[line - 1] if 0 < line <= len(lines) else b""
    return len(text[:offset].decode("utf-8", errors="replace")) + 1


def _folder(path: str, roots: Sequence[str]) -> str:
    """The top-level folder of the scope `path` lies in: with several paths given (`srt/models
    srt/layers`), the one it is under; with one (`srt`, or none: the configured include), the
    folder below it (`models` for `srt/models/x.py`)."""
    for root in sorted(roots, key=len, reverse=True):
        prefix = root.rstrip("/") + "/" if root not in ("", ".") else ""
        if path == root or (len(roots) > 1 and path.startswith(prefix)):
            return root
        if path.startswith(prefix):
            return path[len(prefix):].split("/", 1)[0]
    return path.split("/", 1)[0]
