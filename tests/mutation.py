"""Undo a real tree's write-loc migration one site at a time, in memory, keeping line numbers.

A *site* is where the tree marks a write loc: a factory call
(`KVWriteLoc.for_batch(...)`, `.for_layer(...)`) or a constructor call with
the mark keyword. Each site gives mutants, each one edit of one file:

* `raw`: a factory call back to the batch's raw loc (`fb.out_cache_loc`);
* `unresolved`: a factory call replaced by a call of a function the tree does not define;
* `unmarked`: a constructor call without its mark keyword.

A replacement keeps the site's line count (newlines inside its parentheses),
so every other finding keeps its line. `how` says how the site's loc reaches
a door: as the door's argument, through a local alias, as a helper's
argument, or as a helper's return.

`Checks` holds the unmutated tree once (a `Workspace` for the per-file rules,
a `ProofTree` for `--prove`) and tells whether a mutant is killed: a finding
on the mutated tree that the unmutated one does not have. `spelling_kills`
runs `bench/ast_baseline.py`'s check, upstream's kind of completeness check,
on the mutated file.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from kvlint.analysis.loc_proof import PROVEN, LocProver
from kvlint.analysis.proof_tree import ProofTree
from kvlint.api.config import Config
from kvlint.api.contract import Contract
from kvlint.live.workspace import Workspace
from kvlint.running.prove import door_calls

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import ast_baseline  # noqa: E402  (bench/ is not a package)

UNDEFINED = "kvlint_mutant_undefined_loc"
# A loc's way to a door, as the kill rates are counted.
DOOR_ARGUMENT, ALIAS, HELPER_ARGUMENT, HELPER_RETURN = "door argument", "alias", "helper argument", "helper return"


@dataclass(frozen=True)
class Mutant:
    path: str
    line: int
    kind: str
    how: str
    # The edit: bytes start..end of the file become `text`.
    start: int
    end: int
    text: bytes
    data: bytes

    @property
    def label(self) -> str:
        return f"{self.path}:{self.line} {self.kind} ({self.how})"


def mutants(sources: dict[str, bytes], contract: Contract) -> Iterator[Mutant]:
    """Every mutant of every site in `sources` (display path -> bytes), in path and line order."""
    word = contract.write_loc_class.encode()
    # A door that only forwards its loc to another (`self._set_kv_buffer(fb, layer, loc, ...)`) is the
    # helper upstream's spelling check cannot see through: a loc handed to it counts as a helper argument.
    forwarding = {name for name, why in contract.door_reasons if "forwarded" in why}
    doors = {name for name in contract.door_loc_index if name not in forwarding}
    for path, data in sorted(sources.items()):
        if word not in data:
            continue
        tree = ast.parse(data)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
            kind = _site(call, contract)
            if kind is None:
                continue
            how = _how(call, parents, doors, set(contract.door_loc_index))
            if how is None:
                continue
            for mutant_kind, text in _replacements(call, kind, contract):
                start, end, new = _edit(data, call, text)
                yield Mutant(path, call.lineno, mutant_kind, how, start, end, new, data[:start] + new + data[end:])


def _site(call: ast.Call, contract: Contract) -> Optional[str]:
    func = call.func
    cls = contract.write_loc_class
    factories = {name for name in (contract.batch_factory, contract.layer_factory) if name}
    if isinstance(func, ast.Attribute) and func.attr in factories and _trailing(func.value) == cls and call.args:
        return "factory"
    if _trailing(func) == cls and any(keyword.arg == contract.mark for keyword in call.keywords):
        return "constructor"
    return None


def _replacements(call: ast.Call, kind: str, contract: Contract) -> list[tuple[str, str]]:
    args = ", ".join(ast.unparse(arg) for arg in call.args)
    if kind == "factory":
        return [("raw", f"({ast.unparse(call.args[0])}.{contract.loc_attributes[0]}"), ("unresolved", f"{UNDEFINED}({args}")]
    kept = [ast.unparse(arg) for arg in call.args] + [
        f"{keyword.arg}={ast.unparse(keyword.value)}" if keyword.arg else f"**{ast.unparse(keyword.value)}"
        for keyword in call.keywords if keyword.arg != contract.mark
    ]
    return [("unmarked", f"{ast.unparse(call.func)}({', '.join(kept)}")]


def _edit(data: bytes, call: ast.Call, opened: str) -> tuple[int, int, bytes]:
    """`call` replaced by `opened` + its newlines + `)`, as (start, end, new bytes): the line count stays."""
    lines = data.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: call.lineno - 1]) + call.col_offset
    end_line = call.end_lineno or call.lineno
    end = sum(len(line) for line in lines[: end_line - 1]) + (call.end_col_offset or 0)
    return start, end, (opened + "\n" * (end_line - call.lineno) + ")").encode()


def together(data: bytes, edits: list[Mutant]) -> bytes:
    """`data` with several mutants of it applied at once (last first, so earlier offsets hold)."""
    for mutant in sorted(edits, key=lambda m: m.start, reverse=True):
        data = data[: mutant.start] + mutant.text + data[mutant.end:]
    return data


def _how(call: ast.Call, parents: dict[ast.AST, ast.AST], doors: set[str], all_doors: set[str]) -> Optional[str]:
    """How the site's loc reaches a door; None where it reaches none (a loc kept for other uses)."""
    node: ast.AST = call
    parent = parents.get(node)
    while isinstance(parent, ast.IfExp):
        node, parent = parent, parents.get(parent)
    if isinstance(parent, ast.keyword):
        parent = parents.get(parent)
    if isinstance(parent, ast.Call):
        return DOOR_ARGUMENT if _trailing(parent.func) in doors else HELPER_ARGUMENT
    if isinstance(parent, ast.Return):
        return HELPER_RETURN
    if isinstance(parent, (ast.Assign, ast.AnnAssign)):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return _alias_use({t.id for t in targets if isinstance(t, ast.Name)}, parent, parents, all_doors)
    return None


def _alias_use(names: set[str], statement: ast.AST, parents: dict[ast.AST, ast.AST], doors: set[str]) -> Optional[str]:
    """ALIAS when the function passes the name to a door, HELPER_RETURN when it returns it, else None."""
    function = parents.get(statement)
    while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        function = parents.get(function)
    for node in ast.walk(function) if function is not None else ():
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in names:
            return HELPER_RETURN
        if isinstance(node, ast.Call) and _trailing(node.func) in doors:
            passed = [*node.args, *(keyword.value for keyword in node.keywords)]
            if any(isinstance(arg, ast.Name) and arg.id in names for arg in passed):
                return ALIAS
    return None


def _trailing(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


class Checks:
    """The unmutated tree, held once; whether each kind of check kills a mutant."""

    def __init__(self, root: Path, cache_dir: Path) -> None:
        config = Config(select=("KV1",), path=root / "kvlint.toml", cache_dir=str(cache_dir))
        self.workspace = Workspace(root, config)
        self.workspace.read_views()
        self.contract = self.workspace.contract
        self.sources = dict(self.workspace.saved)
        self.proof = ProofTree(self.sources)
        self._plain: dict[str, set[tuple[str, int]]] = {}
        self._spelling: dict[str, int] = {}
        self.unproven = self._not_proven(self.proof, self.sources)
        ast_baseline.MARK = self.contract.mark

    def plain_kills(self, mutant: Mutant) -> bool:
        """A KV1 finding in the mutated file (or, for a helper's return, in a file calling it) that the tree lacks."""
        workspace = self.workspace
        workspace.saved[mutant.path] = mutant.data
        before = workspace.views
        try:
            checked = [mutant.path]
            if mutant.how == HELPER_RETURN:
                # The helper's facts changed: its callers' views are resolved again.
                workspace.read_views()
                assert before is not None and workspace.views is not None
                checked += [path for path, view in workspace.views.items() if before.get(path) != view and path != mutant.path]
            for path in checked:
                found = {(f.code, f.line) for f in workspace.check(path, workspace.saved[path]).findings}
                if found - self._plain_of(path):
                    return True
            return False
        finally:
            workspace.saved[mutant.path] = self.sources[mutant.path]
            workspace.views = before

    def plain_killed_at_their_lines(self, path: str, edits: list[Mutant]) -> list[Mutant]:
        """Mutants of one file whose loc is a door's argument, applied together in one check: each is
        killed when a new KV1 finding sits on its own line (the door's loc argument is the site)."""
        findings = self.workspace.check(path, together(self.sources[path], edits)).findings
        new_lines = {line for code, line in {(f.code, f.line) for f in findings} - self._plain_of(path)}
        return [mutant for mutant in edits if mutant.line in new_lines]

    def prove_kills(self, mutant: Mutant) -> bool:
        """A door call that `--prove` no longer shows proven: the mutated file's own first (cheap),
        then every door call of the tree (a helper's return or parameter reaches other files)."""
        tree = self.proof.replaced(mutant.path, mutant.data)
        if self._not_proven(tree, {mutant.path: mutant.data}) - self.unproven:
            return True
        return bool(self._not_proven(tree, tree.sources) - self.unproven)

    def spelling_kills(self, mutant: Mutant, scratch: Path) -> bool:
        scratch.write_bytes(mutant.data)
        return len(ast_baseline.check_file(scratch)) > self._spelling_of(mutant.path, scratch)

    def _plain_of(self, path: str) -> set[tuple[str, int]]:
        if path not in self._plain:
            findings = self.workspace.check(path, self.sources[path]).findings
            self._plain[path] = {(f.code, f.line) for f in findings}
        return self._plain[path]

    def _spelling_of(self, path: str, scratch: Path) -> int:
        if path not in self._spelling:
            scratch.write_bytes(self.sources[path])
            self._spelling[path] = len(ast_baseline.check_file(scratch))
        return self._spelling[path]

    def _not_proven(self, tree: ProofTree, reported: dict[str, bytes]) -> set[tuple[str, int, int]]:
        prover = LocProver(tree, self.contract)
        calls = door_calls(tree, prover, reported)
        return {(c.path, c.call.lineno, c.call.col_offset) for c in calls if c.verdict.kind != PROVEN}
