"""A workspace where `kvlint check` ran answers from its result cache: the saved texts' findings and
the project rules' findings, without loading a rule, and never a result the saved files outgrew."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.live.workspace import Workspace
from kvlint.running.registry import rule_by_code

KV301 = rule_by_code("KV301").INVALID[0]
WRITER = "def write(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in {**KV301.files, "writer.py": WRITER}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "kvlint.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    CliRunner().invoke(main, ["check"])  # fills the result cache at the root
    return tmp_path


def reported(root: Path) -> list[tuple[Any, ...]]:
    """What `kvlint check` reports at `root` now, without its cache."""
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json"])
    return sorted((f["path"], f["code"], f["line"], f["column"], f["message"]) for f in json.loads(result.stdout)["findings"])


def seen(workspace: Workspace) -> list[tuple[Any, ...]]:
    """The saved files' findings as the workspace reports them, its own and the project rules'."""
    found = [f for shown, data in workspace.saved.items() for f in workspace.check(shown, data).findings]
    found += [f for findings in workspace.project({}, {}).findings.values() for f in findings]
    return sorted((f.path, f.code, f.line, f.column, f.message) for f in found)


def test_the_saved_texts_are_answered_without_loading_a_rule_or_libcst(tree: Path) -> None:
    program = textwrap.dedent(
        """
        import json, sys
        from pathlib import Path
        from kvlint.live.workspace import Workspace

        workspace = Workspace(Path("."))
        found = [f for shown, data in workspace.saved.items() for f in workspace.check(shown, data).findings]
        found += [f for findings in workspace.project({}, {}).findings.values() for f in findings]
        print(json.dumps({
            "findings": sorted([f.path, f.code, f.line, f.column, f.message] for f in found),
            # LibCST, or a rule's own module (kvlint.rules.FAMILY.RULE; a fact's class may load its family's helpers).
            "loaded": sorted(
                name for name in sys.modules
                if name == "libcst" or (name.startswith("kvlint.rules.") and name.count(".") == 3 and name.split(".")[3][0] != "_")
            ),
        }))
        """
    )
    answer = json.loads(subprocess.run([sys.executable, "-c", program], cwd=tree, capture_output=True, check=True).stdout)
    assert answer["loaded"] == []
    assert [tuple(f) for f in answer["findings"]] == reported(tree)
    assert {"KV301", "KV101"} <= {f[1] for f in answer["findings"]}


def test_a_saved_suppression_where_a_project_finding_sits_is_read_not_the_cached_result(tree: Path) -> None:
    (batch_file, line, _severity), = KV301.expected
    workspace = Workspace(tree)
    assert seen(workspace) == reported(tree)
    assert "plan" not in vars(workspace)  # answered from the cache

    lines = (tree / batch_file).read_text().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].rstrip("\n") + "  # kvlint: ignore[KV301]\n"
    suppressed = "".join(lines)
    workspace.save(batch_file, suppressed.encode())
    (tree / batch_file).write_text(suppressed)
    assert "KV301" not in {f[1] for f in reported(tree)}
    assert seen(workspace) == reported(tree)


def test_a_saved_fix_changes_the_facts_and_the_project_rule_runs_again(tree: Path) -> None:
    assert KV301.expected_fix is not None
    builder_file, builder_fixed = KV301.expected_fix
    workspace = Workspace(tree)
    workspace.save(builder_file, builder_fixed.encode())
    (tree / builder_file).write_text(builder_fixed)
    assert "KV301" not in {f[1] for f in reported(tree)}
    assert seen(workspace) == reported(tree)
