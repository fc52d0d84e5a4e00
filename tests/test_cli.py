"""The command line as users meet it: formats, exit codes, options, config errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import kvlint.cli
from kvlint.cli import main
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)
CLEAN = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)\n"
)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "good.py").write_text(CLEAN)
    return in_tmp


def test_text_output_shows_source_line_span_fix_and_summary(tree: Path) -> None:
    code, out, _ = invoke("check", ".")
    assert code == 1
    assert "bad.py:2:31: KV101 bare-write-loc" in out
    assert "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)" in out
    assert "^" * len("forward_batch.out_cache_loc") in out
    assert "fix (safe): pass `KVWriteLoc.for_batch(forward_batch)`" in out
    assert out.rstrip().endswith("1 finding (1 fixable: 1 safe) in 1 files; 2 files in scope")


def test_json_output_has_the_designed_shape(tree: Path) -> None:
    code, out, _ = invoke("check", "--format", "json", ".")
    assert code == 1
    data = json.loads(out)
    assert set(data) == {"kvlint", "files_in_scope", "files_parsed", "findings", "errors"}
    # good.py is parsed too: it names KVWriteLoc, which KV102 must inspect.
    assert (data["files_in_scope"], data["files_parsed"], data["errors"]) == (2, 2, [])
    (finding,) = data["findings"]
    assert set(finding) == {
        "code", "name", "severity", "path", "line", "column", "end_line", "end_column",
        "message", "fingerprint", "fix", "reach", "reach_reason",
    }
    assert (finding["code"], finding["name"], finding["severity"], finding["path"]) == (
        "KV101", "bare-write-loc", "error", "bad.py",
    )
    assert (finding["line"], finding["column"], finding["end_line"], finding["end_column"]) == (2, 31, 2, 58)
    assert finding["fix"] == {
        "applicability": "safe",
        "description": "pass `KVWriteLoc.for_batch(forward_batch)`",
        "replacement": "KVWriteLoc.for_batch(forward_batch)",
    }


def test_sarif_output_is_2_1_0_with_one_result_per_finding(tree: Path) -> None:
    (tree / "bad2.py").write_text(BARE + BARE.replace("forward", "forward2"))
    code, out, _ = invoke("check", "--format", "sarif", ".")
    assert code == 1
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert len(results) == 3
    assert {r["ruleId"] for r in results} == {"KV101"}
    region = results[0]["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 2


def test_github_output_is_workflow_commands(tree: Path) -> None:
    code, out, _ = invoke("check", "--format", "github", ".")
    assert code == 1
    (line,) = out.splitlines()
    assert line.startswith("::error file=bad.py,line=2,col=31,")
    assert line.endswith("::KV101 `set_kv_buffer` receives the batch's raw `forward_batch.out_cache_loc`: "
                         "the batch's `id_space` mark is lost")


def test_clean_tree_exits_zero(tree: Path) -> None:
    assert invoke("check", "good.py")[0] == 0


def test_exit_zero_keeps_findings_but_exits_zero(tree: Path) -> None:
    code, out, _ = invoke("check", "--exit-zero", ".")
    assert code == 0 and "KV101" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("check", "--select", "KV9"), "unknown rule code or prefix: 'KV9'"),
        (("check", "missing_dir"), "path does not exist: missing_dir"),
        (("explain", "KV999"), "unknown rule code: 'KV999'"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_two(tree: Path, args: tuple[str, ...], message: str) -> None:
    code, out, err = invoke(*args)
    assert code == 2
    assert err.strip() == f"kvlint: error: {message}" + (" (see `kvlint rules`)" if "rule code" in message else "")
    assert "Traceback" not in out + err


def test_unknown_config_key_names_key_and_file(tree: Path) -> None:
    (tree / "kvlint.toml").write_text('inclde = ["."]\n')
    code, _, err = invoke("check", ".")
    assert code == 2
    assert "unknown key 'inclde'" in err and "kvlint.toml" in err


def test_unknown_contract_key_is_an_error(tree: Path) -> None:
    (tree / "pyproject.toml").write_text('[tool.kvlint.contract]\nmark-keyword = "physical"\n')
    (tree / "kvlint.toml").unlink()
    code, _, err = invoke("check", ".")
    assert code == 2 and "unknown key 'mark-keyword' in [contract]" in err and "pyproject.toml" in err


@pytest.mark.parametrize(
    ("option", "value", "expect_findings"),
    [("--select", "KV1", True), ("--select", "KV101", True), ("--select", "KV2", False), ("--ignore", "KV1", False)],
)
def test_select_and_ignore_accept_prefixes(tree: Path, option: str, value: str, expect_findings: bool) -> None:
    code, out, _ = invoke("check", option, value, ".")
    assert (code == 1) is expect_findings
    assert ("KV101" in out) is expect_findings


def test_config_select_and_per_file_ignores(tree: Path) -> None:
    (tree / "kvlint.toml").write_text('[per-file-ignores]\n"bad.py" = ["KV1"]\n')
    assert invoke("check", ".")[0] == 0
    (tree / "kvlint.toml").write_text('ignore = ["KV101"]\n')
    assert invoke("check", ".")[0] == 0
    assert invoke("check", "--select", "KV101", ".")[0] == 1


def test_min_files_fails_a_shrunken_scope(tree: Path) -> None:
    code, _, err = invoke("check", "--min-files", "3", "good.py")
    assert code == 2 and "fewer than --min-files 3" in err
    assert invoke("check", "--min-files", "2", ".")[0] == 1


def test_changed_checks_only_files_changed_against_rev(tree: Path) -> None:
    git = lambda *a: subprocess.run(["git", *a], cwd=tree, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "root")
    git("add", "good.py")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "good")
    # bad.py is untracked: changed. good.py is committed and untouched: not changed.
    code, out, _ = invoke("check", "--changed", "--format", "json", ".")
    data = json.loads(out)
    assert code == 1 and data["files_in_scope"] == 1
    git("add", "bad.py")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "bad")
    code, out, _ = invoke("check", "--changed", "--format", "json", ".")
    assert code == 0 and json.loads(out)["files_in_scope"] == 0
    (tree / "good.py").write_text(BARE)  # unstaged edit
    code, out, _ = invoke("check", "--changed", "--format", "json", ".")
    assert code == 1 and [f["path"] for f in json.loads(out)["findings"]] == ["good.py"]
    code, out, _ = invoke("check", "--changed", "HEAD~1", "--format", "json", ".")
    assert {f["path"] for f in json.loads(out)["findings"]} == {"good.py", "bad.py"}


def test_baseline_hides_known_findings_and_survives_lines_moving(tree: Path) -> None:
    code, _, err = invoke("baseline", ".", "-o", "baseline.json")
    assert code == 0 and "recorded 1 findings" in err
    assert invoke("check", "--baseline", "baseline.json", ".")[0] == 0
    (tree / "bad.py").write_text("import os\n\n\n" + BARE)
    assert invoke("check", "--baseline", "baseline.json", ".")[0] == 0
    (tree / "bad.py").write_text(BARE + BARE.replace("def forward", "def other"))
    code, out, _ = invoke("check", "--baseline", "baseline.json", "--format", "json", ".")
    assert code == 1 and [f["line"] for f in json.loads(out)["findings"]] == [4]


def test_baseline_is_written_atomically_and_a_bad_path_fails_before_the_run(tree: Path) -> None:
    code, _, err = invoke("baseline", ".", "-o", "missing/baseline.json")
    assert code == 2 and "directory missing does not exist" in err and "Traceback" not in err
    (tree / "baseline.json").write_text("{}")
    (tree / "kvlint.toml").write_text("[tool.kvlint]\nunknown-key = 1\n")
    assert invoke("baseline", ".", "-o", "baseline.json")[0] == 2
    assert (tree / "baseline.json").read_text() == "{}", "a failed run must keep the previous baseline"
    assert [p.name for p in tree.iterdir() if p.name.startswith(".baseline.json")] == []


def test_bad_baseline_file_is_a_usage_error(tree: Path) -> None:
    (tree / "baseline.json").write_text("{not json")
    code, _, err = invoke("check", "--baseline", "baseline.json", ".")
    assert code == 2 and "not a kvlint baseline" in err


@pytest.mark.parametrize(
    "comment",
    ["# kvlint: ignore[KV101]", "# kvlint: ignore", "# noqa: KV101", "# kvlint: ignore[KV1]", "# noqa: E501, KV101"],
)
def test_suppression_on_the_flagged_line(tree: Path, comment: str) -> None:
    (tree / "bad.py").write_text(BARE.rstrip("\n") + f"  {comment}\n")
    assert invoke("check", ".")[0] == 0


def test_suppression_on_the_first_line_of_a_multiline_statement(tree: Path) -> None:
    (tree / "bad.py").write_text(
        "def forward(pool, layer, forward_batch, k, v):\n"
        "    pool.set_kv_buffer(  # kvlint: ignore[KV101]\n"
        "        layer,\n"
        "        forward_batch.out_cache_loc,\n"
        "        k,\n"
        "        v,\n"
        "    )\n"
    )
    assert invoke("check", ".")[0] == 0


def test_suppression_of_another_code_does_not_hide(tree: Path) -> None:
    (tree / "bad.py").write_text(BARE.rstrip("\n") + "  # kvlint: ignore[KV201]\n")
    assert invoke("check", ".")[0] == 1


def test_unused_suppression_is_reported_on_request(tree: Path) -> None:
    (tree / "good.py").write_text(CLEAN.rstrip("\n") + "  # kvlint: ignore[KV101]\n")
    assert invoke("check", "good.py")[0] == 0
    code, out, _ = invoke("check", "--report-unused-ignores", "--format", "json", "good.py")
    assert code == 1
    (finding,) = json.loads(out)["findings"]
    assert (finding["code"], finding["severity"], finding["line"]) == ("KV001", "warning", 2)


def test_syntax_error_is_kv000_and_other_files_still_checked(tree: Path) -> None:
    (tree / "broken.py").write_text("def f(:\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n")
    code, out, _ = invoke("check", "--format", "json", ".")
    assert code == 1
    findings = {f["path"]: f for f in json.loads(out)["findings"]}
    assert findings["broken.py"]["code"] == "KV000" and findings["broken.py"]["line"] == 1
    assert findings["bad.py"]["code"] == "KV101"


def test_rules_and_explain(tree: Path) -> None:
    code, out, _ = invoke("rules")
    assert code == 0 and "KV101" in out and "bare-write-loc" in out and "safe" in out
    code, out, _ = invoke("explain", "kv101")
    assert code == 0
    for section in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"):
        assert section in out


def test_fix_diff_writes_nothing_and_fix_is_idempotent(tree: Path) -> None:
    code, out, err = invoke("fix", "--diff", ".")
    assert code == 1
    assert "+    pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)" in out
    assert (tree / "bad.py").read_text() == BARE
    code, _, err = invoke("fix", ".")
    assert code == 0 and "Fixed 1 findings in 1 files; 0 remaining" in err
    fixed = (tree / "bad.py").read_text()
    assert "KVWriteLoc.for_batch(forward_batch)" in fixed
    assert "from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n" in fixed
    assert invoke("fix", ".")[0] == 0
    assert (tree / "bad.py").read_text() == fixed
    assert invoke("check", ".")[0] == 0


def test_configured_write_loc_module_is_imported_by_the_fix(tree: Path) -> None:
    (tree / "kvlint.toml").write_text('[contract]\nwrite-loc-module = "runtime_shim"\n')
    invoke("fix", ".")
    assert "from runtime_shim import KVWriteLoc\n" in (tree / "bad.py").read_text()


@pytest.mark.parametrize("entry", [["kvlint"], [sys.executable, "-m", "kvlint"]])
def test_real_subprocess_exit_codes(tree: Path, entry: list[str]) -> None:
    run = lambda *a: subprocess.run([*entry, *a], cwd=tree, capture_output=True, text=True)  # noqa: E731
    assert run("check", "good.py").returncode == 0
    result = run("check", "--format", "json", ".")
    assert result.returncode == 1 and json.loads(result.stdout)["findings"][0]["code"] == "KV101"
    result = run("check", "nope.py")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert run("--version").stdout.startswith("kvlint 0.1.0 (distribution kvlint-tokenmajor)")


class _Left(Exception):
    """Raised by the stand-in for `os._exit`, carrying its status."""


@pytest.mark.parametrize(
    ("raised", "status", "printed"), [(None, 0, ""), (3, 3, ""), ("broken config", 1, "broken config\n")]
)
def test_entry_leaves_with_the_status_sys_exit_would_give(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raised: object, status: int, printed: str
) -> None:
    def command() -> None:
        print("a report")
        raise SystemExit(raised)

    def leave(code: int) -> None:
        raise _Left(code)

    monkeypatch.setattr(kvlint.cli, "main", command)
    monkeypatch.setattr(kvlint.cli.os, "_exit", leave)
    with pytest.raises(_Left) as left:
        kvlint.cli.entry()
    assert left.value.args == (status,)
    assert capsys.readouterr() == ("a report\n", printed)


def test_entry_exits_normally_under_a_profiler(monkeypatch: pytest.MonkeyPatch) -> None:
    def command() -> None:
        raise SystemExit(1)

    def leave(code: int) -> None:
        raise AssertionError("os._exit under a profiler: its report would be lost")

    monkeypatch.setattr(kvlint.cli, "main", command)
    monkeypatch.setattr(kvlint.cli.os, "_exit", leave)
    monkeypatch.setattr(kvlint.cli.sys, "getprofile", lambda: object())
    with pytest.raises(SystemExit) as stop:
        kvlint.cli.entry()
    assert stop.value.code == 1
