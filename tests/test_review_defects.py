"""Defects a review found, each pinned: the repository stands alone, KV301's
prefilter learns the fields KV301 reads, SARIF describes every rule it reports,
and no dead code or second compile is left behind."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest

from kvlint.api.config import Config
from kvlint.learn.contract import learn_contract

REPO = Path(__file__).resolve().parent.parent


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / name for name in listed.splitlines() if (REPO / name).is_file()]


def test_no_file_cites_a_design_document_outside_the_repository() -> None:
    needle = "DESIGN" + ".md"
    citing = [
        path.relative_to(REPO).as_posix()
        for path in tracked_files()
        if path.suffix in (".py", ".md", ".toml", ".txt", ".yaml", ".cfg") and needle in path.read_text(errors="replace")
    ]
    assert citing == []


def test_the_architecture_page_covers_layers_the_life_of_a_finding_and_adding_a_rule() -> None:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    for heading in ("## Layers", "## The life of a finding", "## Adding a rule"):
        assert heading in text
    # Every module it names exists.
    for dotted in set(re.findall(r"`(kvlint(?:\.\w+)+)`", text)):
        parts = dotted.split(".")
        assert any(
            (REPO / Path(*parts[:n])).with_suffix(".py").exists() or (REPO / Path(*parts[:n]) / "__init__.py").exists()
            for n in range(len(parts), 1, -1)
        ), dotted


def test_no_module_level_name_in_kvlint_is_dead() -> None:
    texts = {path: path.read_text() for path in REPO.glob("*/**/*.py") if ".venv" not in path.parts}
    dead = []
    for path in (REPO / "kvlint").rglob("*.py"):
        for node in ast.parse(texts[path]).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            else:
                continue
            for name in names:
                if name.startswith("__") or "rules" in path.parts and node is not None and isinstance(node, ast.ClassDef) and path.stem == _snake(name):
                    continue  # dunders; rule classes, which the registry finds by walking
                uses = sum(len(re.findall(rf"\b{re.escape(name)}\b", text)) for text in texts.values())
                if uses <= 1:
                    dead.append(f"{path.relative_to(REPO)}:{name}")
    assert dead == []


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_batch_fields_are_learned_with_inherited_fields_and_without_class_vars(tmp_path: Path) -> None:
    base = b"from dataclasses import dataclass\n\n@dataclass\nclass BatchBase:\n    seq_lens: object\n"
    batch = (
        b"from dataclasses import dataclass\nfrom typing import ClassVar\nfrom base import BatchBase\n\n"
        b"@dataclass\nclass ForwardBatch(BatchBase):\n    input_ids: object\n    hits: ClassVar[int] = 0\n"
    )
    contract = learn_contract(Config(), {tmp_path / "base.py": base, tmp_path / "batch.py": batch})
    assert set(contract.batch_fields) == {"input_ids", "seq_lens"}


def test_sarif_describes_every_rule_its_results_name(in_tmp: Path) -> None:
    from click.testing import CliRunner

    from kvlint.cli import main

    (in_tmp / "broken.py").write_text("pool.set_kv_buffer(layer, fb.out_cache_loc, k, v\n")
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "sarif", "."])
    run = json.loads(result.output)["runs"][0]
    described = {rule["id"] for rule in run["tool"]["driver"]["rules"]}
    assert {"KV000", "KV001"} <= described
    assert {item["ruleId"] for item in run["results"]} == {"KV000"}


def test_a_file_libcst_cannot_parse_is_not_compiled_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import libcst as cst

    import kvlint.running.checker
    from kvlint.testing import run_source

    def refuse(_source: object) -> cst.Module:
        raise cst.ParserSyntaxError("LibCST's limit", lines=["x = 1\n"], raw_line=1, raw_column=0)

    compiled: list[object] = []
    monkeypatch.setattr(kvlint.running.checker.cst, "parse_module", refuse)
    monkeypatch.setattr(kvlint.running.checker, "compile", lambda *args, **kwargs: compiled.append(args), raising=False)
    from kvlint.rules.write_loc.bare_write_loc import BareWriteLoc

    # A rule to run: a file no rule may flag is not parsed with LibCST at all.
    (finding,) = run_source("pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n", [BareWriteLoc]).findings
    assert finding.code == "KV000" and "LibCST's limit" in finding.message
    assert compiled == []
