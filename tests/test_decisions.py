"""One decision layer: per-file and project findings are ignored, suppressed and
reported unused by the same rules, and KV001 is decided after every rule."""

from __future__ import annotations

from pathlib import Path

from kvlint.api.config import load_config
from kvlint.running.engine import RunOptions, RunResult, run

BATCH = """\
from dataclasses import dataclass
from typing import Optional


@dataclass
class ForwardBatch:
    input_ids: object
    batch_size: int{comment}
    spec_info: Optional[object] = None
"""

BUILDER = """\
from batch import ForwardBatch


def filter_batch(batch, *, start, end):
    output_dict = dict()
    output_dict["input_ids"] = batch.input_ids[start:end]
    output_dict["spec_info"] = None
    return ForwardBatch(**output_dict)
"""


def check(tree: Path, comment: str, config: str = "") -> RunResult:
    (tree / "kvlint.toml").write_text(config)
    (tree / "batch.py").write_text(BATCH.format(comment=comment))
    (tree / "builder.py").write_text(BUILDER)
    return run(load_config(), RunOptions(paths=(tree,), report_unused_ignores=True))


def codes(result: RunResult) -> list[tuple[str, int]]:
    return [(finding.code, finding.line) for finding in result.findings]


def test_project_finding_is_reported_without_a_suppression(in_tmp: Path) -> None:
    assert codes(check(in_tmp, "")) == [("KV301", 8)]


def test_suppressed_project_finding_is_hidden_and_its_suppression_is_not_unused(in_tmp: Path) -> None:
    assert codes(check(in_tmp, "  # kvlint: ignore[KV301]")) == []


def test_a_suppression_of_another_code_on_that_line_is_still_unused(in_tmp: Path) -> None:
    assert sorted(codes(check(in_tmp, "  # kvlint: ignore[KV101]"))) == [("KV001", 8), ("KV301", 8)]


def test_per_file_ignores_apply_to_project_findings(in_tmp: Path) -> None:
    assert codes(check(in_tmp, "", '[per-file-ignores]\n"batch.py" = ["KV301"]\n')) == []


def test_cached_project_findings_keep_their_suppressions_used(in_tmp: Path) -> None:
    check(in_tmp, "  # kvlint: ignore[KV301]")
    options = RunOptions(paths=(in_tmp,), report_unused_ignores=True, cache=True)
    assert codes(run(load_config(), options)) == []
    assert codes(run(load_config(), options)) == []
