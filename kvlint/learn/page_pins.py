"""The backends the engine's argument handling pins to a page size above 1, and the classes only they build.

A paging `.view(-1, page_size, ...)` differs from the paged helpers only at page size 1
(`kvlint.rules.layout._page_pinned`). An engine often forces the page size for a backend whose
kernels need whole pages:

    if view.attention_backend == "hpc_ops" or view.decode_attention_backend == "hpc_ops":
        if page_size != 64:
            page_size = 64                  # or: return {"page_size": 64}

or sets it outright under the test (`self.page_size = 64`). Read here: a branch taken whenever the
backend is chosen (an `or` of `<...>attention_backend == "B"` tests over every such field the file
compares, or `"B" in (prefill_backend, decode_backend)`; a test `and`-ed with anything else pins
nothing), after which the page size is one of some constants, every one above 1: set outright, or
clamped by `if ps != N` / `if ps not in [...]` whose body sets or returns another. The list a clamp
tests may be a local built from literals (`sizes = [64, 128]`, `sizes.extend([16, 32])`). A class
that every place building it ties to pinned backends only (`kvlint.learn.ties`) is `page-pinned`:
its paging views run on whole pages.

A limit, taken knowingly: a speculative draft's backend field is not required of a pin (sglang's
clamps leave it out), so a pinned backend chosen for the draft alone is taken as pinned too.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional

from kvlint.learn.guards import PAGE_SIZE, literal_int, literal_ints
from kvlint.learn.memo import remembered
from kvlint.learn.pool_pairing import backend_registry, registry_consumers
from kvlint.learn.scope import Scope
from kvlint.learn.tree import Learned, parsed_tree

_FIELD = "attention_backend"
# Where a page size is set (`page_size = 64`, `{"page_size": n}`): each pin, or branch undoing one, does.
_SETS = re.compile(rb"page_size[\"']?\s*(?::|=(?!=))")
# A field naming an attention backend compared with a name: `cfg.decode_attention_backend == "fa3"`.
_FIELD_COMPARED = re.compile(rb"attention_backend\s*[!=]=\s*[\"']")
_FIELD_PREFIX = re.compile(rb"\w*$")
# A name tested among the resolved backends: `"intel_xpu" in (prefill_backend, decode_backend)`.
_MEMBER_OF_BACKENDS = re.compile(rb"[\"']\s+in\s+[(\[]\s*[\w.]*backend")


@dataclass(frozen=True)
class PinRead:
    """A branch for `backend` leaving the page size one of `sizes`; () where it may leave it
    anything else (a test `and`-ed with more, a size of 1, a value kvlint cannot read)."""

    backend: str
    sizes: tuple[int, ...]
    line: int = field(compare=False)


def page_size_pins(data: bytes) -> tuple[PinRead, ...]:
    """The page-size pins a file states, remembered by content."""
    if b"backend" not in data or not _SETS.search(data):
        return ()
    if not (_FIELD_COMPARED.search(data) or _MEMBER_OF_BACKENDS.search(data)):
        return ()
    return tuple(remembered("page-size-pins", data, (), lambda: list(_pins(data))))


def learn_page_pins(scope: Scope, learned: Learned) -> None:
    """`page-pinned-classes`: each class with the backends pinning its page size, and where."""
    pins: dict[str, list[str]] = {}
    unpinned: set[str] = set()
    for path, reads in scope.survey(page_size_pins).items():
        for read in reads:
            learned.pin(path, read.line)
            if not read.sizes:
                unpinned.add(read.backend)
                continue
            sizes = "/".join(map(str, read.sizes))
            pins.setdefault(read.backend, []).append(f"page size {sizes} at {scope.shown(path)}:{read.line}")
    for backend in unpinned:
        pins.pop(backend, None)
    if not pins:
        return
    # Pool pairing's, read first: the classes meeting strided pools only past a page-size assert.
    found = learned.values.get("page-pinned-classes", ())
    paired: tuple[tuple[str, str], ...] = found if isinstance(found, tuple) else ()
    registry = backend_registry(scope, learned, lambda: set(pins))
    if not registry:
        return
    consumers, ties = registry_consumers(scope, registry)
    ties.fetch(consumers)
    pinned: list[tuple[str, str]] = []
    for klass in consumers:
        ways = ties.of(klass)
        # A way tied to no backend (the `else` of tests naming every registered one) pins nothing.
        if not ways or any(not way.backends or not way.backends <= pins.keys() for way in ways):
            continue
        backends = sorted({backend for way in ways for backend in way.backends or ()})
        pinned.append((klass, "; ".join(f"{backend}: {', '.join(pins[backend])}" for backend in backends)))
    if pinned:
        learned.values["page-pinned-classes"] = (*paired, *(pin for pin in pinned if pin[0] not in dict(paired)))
        learned.sources["page-pinned-classes"] = (
            "learned: the backends each class is built for, and the page sizes the engine forces on them"
            + (", or asserts where the pools they meet are built" if paired else ""))


def _pins(data: bytes) -> Iterator[PinRead]:
    tree = parsed_tree(data)
    if tree is None:
        return
    # Read from the bytes: walking every node of the engine's long argument files cost seconds.
    fields = frozenset(_field_at(data, match.start()) for match in _FIELD_COMPARED.finditer(data)) - {""}
    lists: dict[int, dict[str, frozenset[int]]] = {}
    asked: set[int] = set()
    for line in sorted({data.count(b"\n", 0, match.start()) + 1 for match in _SETS.finditer(data)}):
        function, branches = _around(tree, line)
        for branch in branches:
            if id(branch) in asked:
                continue
            asked.add(id(branch))
            mentioned = _backends_mentioned(branch.test)
            if not mentioned:
                continue
            named = _backends_tested(branch.test)
            exact = {backend for backend, seen in named.items() if seen is None or fields <= seen}
            if id(function) not in lists:
                lists[id(function)] = _literal_lists(function) if function is not None else {}
            sizes = _pinned_sizes(branch.body, lists[id(function)]) if exact else None
            pinned = tuple(sorted(sizes)) if sizes and min(sizes) > 1 else ()
            for backend in sorted(mentioned):
                if backend in exact and pinned:
                    yield PinRead(backend, pinned, branch.lineno)
                elif any(_sets_page_size(statement) for statement in branch.body):
                    yield PinRead(backend, (), branch.lineno)


def _field_at(data: bytes, start: int) -> str:
    """The field compared at `start`, where its `attention_backend` ends it; "" for a draft's."""
    prefix = _FIELD_PREFIX.search(data, max(0, start - 64), start)
    field = (prefix.group() if prefix else b"").decode() + _FIELD
    return "" if field.startswith("speculative") else field


def _around(tree: ast.Module, line: int) -> tuple[Optional[ast.AST], list[ast.If]]:
    """The innermost function holding `line`, and the `if` statements holding it, outermost first."""
    function: Optional[ast.AST] = None
    branches: list[ast.If] = []
    node: ast.AST = tree
    while True:
        inner = next((child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)
                      and child.lineno <= line <= (child.end_lineno or child.lineno)), None)
        if inner is None:
            return function, branches
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function, branches = inner, []
        elif isinstance(inner, ast.If):
            branches.append(inner)
        node = inner


def _backends_mentioned(test: ast.expr) -> frozenset[str]:
    """Every backend name a test compares with a backend field or looks up among backends, in any part."""
    found: set[str] = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            found.update(_backends_tested(node))
    return frozenset(found)


def _backends_tested(test: ast.expr) -> dict[str, Optional[frozenset[str]]]:
    """The backend names a test is true for exactly, each with the fields it is tested in (None: in
    the resolved backends, `"B" in (prefill_backend, decode_backend)`); empty where it tests more."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        named: dict[str, Optional[frozenset[str]]] = {}
        for value in test.values:
            each = _backends_tested(value)
            if not each:
                return {}
            for name, fields in each.items():
                known = named.get(name, frozenset())
                named[name] = None if fields is None or known is None else known | fields
        return named
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return {}
    left, right, op = test.left, test.comparators[0], test.ops[0]
    if isinstance(op, ast.Eq):
        for one, other in ((left, right), (right, left)):
            compared = _string(one)
            if compared is not None and _spelled(other).endswith(_FIELD):
                return {compared: frozenset({_spelled(other)})}
    member = _string(left)
    if isinstance(op, ast.In) and member is not None and isinstance(right, (ast.Tuple, ast.List)):
        if right.elts and all(_spelled(each).endswith("backend") for each in right.elts):
            return {member: None}
    return {}


def _pinned_sizes(body: list[ast.stmt], lists: dict[str, frozenset[int]]) -> Optional[frozenset[int]]:
    """The page sizes a branch leaves possible, where it pins them; None where it does not."""
    sizes: Optional[frozenset[int]] = None
    for statement in body:
        outright = _set_to(statement)
        if outright is not None:
            sizes = frozenset({outright})
            if isinstance(statement, ast.Return):
                return sizes
            continue
        clamp = _clamp(statement, lists)
        if clamp is not None:
            sizes = clamp
        elif _sets_page_size(statement):
            return None  # set to what kvlint cannot read
    return sizes


def _clamp(statement: ast.stmt, lists: dict[str, frozenset[int]]) -> Optional[frozenset[int]]:
    """`if ps != N: ...; ps = M` (or `return {"page_size": M}`), `if ps not in L: ...`: N or L, and M."""
    if not (isinstance(statement, ast.If) and not statement.orelse and isinstance(statement.test, ast.Compare)):
        return None
    test = statement.test
    if len(test.ops) != 1 or not _spelled(test.left).endswith(PAGE_SIZE):
        return None
    allowed: Optional[frozenset[int]] = None
    if isinstance(test.ops[0], ast.NotEq):
        value = literal_int(test.comparators[0])
        allowed = None if value is None else frozenset({value})
    elif isinstance(test.ops[0], ast.NotIn):
        allowed = _integers(test.comparators[0], lists)
    forced = _set_to(statement.body[-1])
    if allowed is None or forced is None or any(_sets_page_size(each) for each in statement.body[:-1]):
        return None
    return allowed | {forced}


def _set_to(statement: ast.stmt) -> Optional[int]:
    """M, for `ps = M`, `x.page_size = M` or `return {"page_size": M}`."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        if _spelled(statement.targets[0]).endswith(PAGE_SIZE):
            return literal_int(statement.value)
    if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Dict):
        for key, value in zip(statement.value.keys, statement.value.values):
            if key is not None and _string(key) == PAGE_SIZE:
                return literal_int(value)
    return None


def _sets_page_size(statement: ast.stmt) -> bool:
    for node in ast.walk(statement):
        if any(_spelled(target).endswith(PAGE_SIZE) for target in _targets(node)):
            return True
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Dict):
            if any(key is not None and _string(key) == PAGE_SIZE for key in node.value.keys):
                return True
    return False


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []


def _literal_lists(function: ast.AST) -> dict[str, frozenset[int]]:
    """The function's locals built only from integer literals: assigned a list or tuple of them,
    grown by `.extend([...])` or `.append(N)`. A local bound or grown any other way is left out."""
    found: dict[str, set[int]] = {}
    spoiled: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, values = node.targets[0].id, _integers(node.value, {})
        elif (growth := _growth(node)) is not None:
            name, method, argument = growth
            single = literal_int(argument)
            values = _integers(argument, {}) if method == "extend" else None if single is None else frozenset({single})
        else:
            continue
        if values is None:
            spoiled.add(name)
        else:
            found.setdefault(name, set()).update(values)
    return {name: frozenset(values) for name, values in found.items() if name not in spoiled}


def _growth(node: ast.AST) -> Optional[tuple[str, str, ast.expr]]:
    """`name.extend(x)` or `name.append(x)`: the name, the method and `x`."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1):
        return None
    receiver = node.func.value
    if not isinstance(receiver, ast.Name) or node.func.attr not in ("extend", "append"):
        return None
    return receiver.id, node.func.attr, node.args[0]


def _integers(node: ast.expr, lists: dict[str, frozenset[int]]) -> Optional[frozenset[int]]:
    if isinstance(node, ast.Name):
        return lists.get(node.id)
    return literal_ints(node) if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else None


def _string(node: ast.expr) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _spelled(node: ast.expr) -> str:
    """A name or attribute's last part: `view.attention_backend` -> `attention_backend`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""
