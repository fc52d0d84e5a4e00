"""SARIF `fixes`: every fixable finding carries its fix as artifact changes, valid
under a maintained SARIF model, readable by sarif-tools, and applying a finding's
replacements gives what `kvlint fix` writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sarif import loader
from sarif_pydantic import Sarif
from sarif_pydantic.sarif import Fix

from kvlint.api.config import load_config
from kvlint.api.types import Applicability
from kvlint.cli import main
from kvlint.running.engine import run
from kvlint.running.fix_edits import TextEdit, apply_edits
from kvlint.running.plan import RunOptions

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def examples_sarif() -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)
        result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "sarif", "examples"])
    assert result.exit_code == 1, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _edits(fix: dict[str, Any]) -> list[TextEdit]:
    (change,) = fix["artifactChanges"]
    return [
        TextEdit(
            r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"],
            r["deletedRegion"]["endLine"], r["deletedRegion"]["endColumn"], r["insertedContent"]["text"],
        )
        for r in change["replacements"]
    ]


def test_every_fixable_finding_carries_a_sarif_fix_the_model_accepts(examples_sarif: dict[str, Any], tmp_path: Path) -> None:
    results = examples_sarif["runs"][0]["results"]
    fixable = [r for r in results if r.get("properties", {}).get("fix")]
    assert len(fixable) >= 19
    assert all(len(r.get("fixes", [])) == 1 for r in fixable)
    assert not [r for r in results if "fixes" in r and r not in fixable]
    log = Sarif.model_validate(examples_sarif)
    parsed = [fix for result in log.runs[0].results or [] for fix in result.fixes or []]
    assert len(parsed) == len(fixable) and all(isinstance(fix, Fix) for fix in parsed)
    for fix, raw in zip(parsed, fixable):
        applicability = raw["properties"]["fix"]["applicability"]
        assert fix.description is not None and fix.description.text.startswith(f"{applicability} fix: ")
        (change,) = fix.artifact_changes
        assert change.replacements and all(r.deleted_region.start_line >= 1 for r in change.replacements)
        assert all(r.inserted_content is not None for r in change.replacements)
    # sarif-tools (the `sarif` command's library) reads the log and sees every result.
    path = tmp_path / "examples.sarif"
    path.write_text(json.dumps(examples_sarif))
    assert loader.load_sarif_file(str(path)).get_result_count() == len(results)


def test_applying_a_lone_safe_fix_gives_what_kvlint_fix_writes(examples_sarif: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    fixed = run(load_config(), RunOptions(paths=(Path("examples"),), fix=Applicability.SAFE)).fixed
    by_path: dict[str, list[dict[str, Any]]] = {}
    for result in examples_sarif["runs"][0]["results"]:
        for fix in result.get("fixes", []):
            by_path.setdefault(fix["artifactChanges"][0]["artifactLocation"]["uri"], []).append(fix)
    compared = 0
    for path, fixes in by_path.items():
        safe = [fix for fix in fixes if fix["properties"]["applicability"] == "safe"]
        if len(fixes) != 1 or len(safe) != 1:
            continue
        original, expected = fixed[path]
        assert apply_edits(original.decode(), _edits(safe[0])) == expected.decode(), path
        compared += 1
    assert compared >= 2


def test_a_project_fix_is_an_insertion_in_the_builder_file(examples_sarif: dict[str, Any]) -> None:
    (result,) = [r for r in examples_sarif["runs"][0]["results"] if r["ruleId"] == "KV301" and "fixes" in r]
    (fix,) = result["fixes"]
    assert fix["properties"]["applicability"] == "unsafe"
    (change,) = fix["artifactChanges"]
    target = change["artifactLocation"]["uri"]
    assert target == result["properties"]["fix"]["path"]
    (edit,) = _edits(fix)
    assert (edit.start_line, edit.start_column) == (edit.end_line, edit.end_column)
    source = (REPO / target).read_text()
    updated = apply_edits(source, [edit])
    assert result["properties"]["fix"]["replacement"] in updated.splitlines()[edit.start_line - 1]
    compile(updated, target, "exec")
