"""`--output-file`: CI keeps the report as a file while its log shows text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main

BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    (in_tmp / "bad.py").write_text(BARE)
    return in_tmp


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github"])
def test_the_file_holds_the_format_report_and_stdout_the_text_report(tree: Path, output_format: str) -> None:
    code, to_stdout, _ = invoke("check", "--no-cache", "--format", output_format, ".")
    code_with_file, log, stderr = invoke(
        "check", "--no-cache", "--format", output_format, "--output-file", "report.out", "."
    )
    _, text, _ = invoke("check", "--no-cache", ".")
    assert code == code_with_file == 1
    assert (tree / "report.out").read_text() == to_stdout
    assert log == text
    assert f"{output_format} report written to report.out" in stderr
    assert [path.name for path in tree.iterdir() if path.name.startswith(".report.out")] == []


def test_an_existing_report_is_replaced_whole_and_keeps_its_mode(tree: Path) -> None:
    report = tree / "kvlint.json"
    report.write_text("x" * 100_000)
    report.chmod(0o640)
    invoke("check", "--format", "json", "--output-file", str(report), ".")
    assert [finding["code"] for finding in json.loads(report.read_text())["findings"]] == ["KV101"]
    assert report.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("missing/report.json", "directory missing does not exist"),
        ("bad.py/report.json", "bad.py is not a directory"),
        (".", "it is a directory"),
    ],
)
def test_an_unwritable_path_is_one_line_exit_two_and_no_report(tree: Path, target: str, reason: str) -> None:
    code, out, err = invoke("check", "--format", "json", "--output-file", target, ".")
    assert code == 2
    assert out == ""
    assert err == f"kvlint: error: cannot write the report to {target}: {reason}\n"


def test_a_failed_run_leaves_the_previous_report(tree: Path) -> None:
    report = tree / "kvlint.json"
    report.write_text("previous")
    (tree / "kvlint.toml").write_text("unknown-key = 1\n")
    code, _, err = invoke("check", "--format", "json", "--output-file", str(report), ".")
    assert code == 2 and "unknown-key" in err
    assert report.read_text() == "previous"
    assert sorted(path.name for path in tree.iterdir()) == ["bad.py", "kvlint.json", "kvlint.toml"]
