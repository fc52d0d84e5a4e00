"""The obvious alternative to kvlint: a stdlib-`ast` completeness check a maintainer would write.

Parses every file under the given directory, single process, and reports
write doors (`set_kv_buffer`, `set_mla_kv_buffer`) handed a bare
`*.out_cache_loc` (or a slice of it) and `KVWriteLoc(...)` built without the
`id_space` keyword. Exit 1 when anything is found. `bench/lint_speed.py`
times it as the baseline every kvlint figure is compared with.

    python bench/ast_baseline.py path/to/sglang/srt
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

DOORS = {"set_kv_buffer": 1, "set_mla_kv_buffer": 1}
MARK = "id_space"


def is_bare_loc(node: ast.expr) -> bool:
    if isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Attribute) and node.attr == "out_cache_loc"


def loc_argument(call: ast.Call, index: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "loc":
            return keyword.value
    return call.args[index] if len(call.args) > index else None


def callee_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def check_file(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        return [f"{path}:{exc.lineno}: does not parse: {exc.msg}"]
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = callee_name(node)
        if name in DOORS:
            loc = loc_argument(node, DOORS[name])
            if loc is not None and is_bare_loc(loc):
                problems.append(f"{path}:{node.lineno}: {name} receives a bare out_cache_loc")
        elif name == "KVWriteLoc" and not any(keyword.arg == MARK for keyword in node.keywords):
            problems.append(f"{path}:{node.lineno}: KVWriteLoc without {MARK}=")
    return problems


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    problems = [problem for path in sorted(root.rglob("*.py")) for problem in check_file(path)]
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
