"""The project of a run comes from its paths, never from the working directory (DESIGN, "Where a run stands")."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from kvlint.api.config import ConfigError
from kvlint.api.project import project_config
from kvlint.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "contracts"

# A batch class and a two-batch-overlap builder that forgets `mode`: one KV301 per copy of the pair.
BATCH = '''
import enum
from dataclasses import dataclass


class Mode(enum.Enum):
    A = 1


@dataclass
class ForwardBatch:
    input_ids: object
    batch_size: int
    out_cache_loc: object = None
    out_cache_loc_id_space: str = "virtual"
    mode: Mode = Mode.A
'''

BUILDER = '''
from engine.forward_batch_info import ForwardBatch


def filter_batch(batch, *, start, end):
    output_dict = dict()
    output_dict["input_ids"] = batch.input_ids[start:end]
    output_dict["out_cache_loc"] = batch.out_cache_loc[start:end]
    output_dict["out_cache_loc_id_space"] = batch.out_cache_loc_id_space
    output_dict.update(dict(batch_size=end - start))
    return ForwardBatch(**output_dict)
'''


def _git_init(folder: Path) -> None:
    subprocess.run(["git", "init", "-q", str(folder)], check=True)


def _engine(root: Path, migrated: bool, package: str = "engine") -> Path:
    """An engine package under `root`: the migrated one defines `KVWriteLoc` (an `id_space` mark, `for_batch`)."""
    source = FIXTURES / ("id_space" if migrated else "neither") / "engine"
    shutil.copytree(source, root / package)
    (root / package / "forward_batch_info.py").write_text(BATCH)
    (root / package / "two_batch_overlap.py").write_text(BUILDER.replace("engine.", f"{package}."))
    return root / package


def _two_projects(parent: Path) -> tuple[Path, Path]:
    """`parent/new` (migrated) and `parent/old` (not), each a repository."""
    new, old = parent / "new", parent / "old"
    for project, migrated in ((new, True), (old, False)):
        project.mkdir(parents=True)
        _git_init(project)
        _engine(project, migrated)
    return new, old


def check(cwd: Path, *paths: Path, options: tuple[str, ...] = ("--no-cache",)) -> list[dict[str, Any]]:
    """`kvlint check --format json PATHS` run in `cwd` (paths given relative to it), findings' paths made absolute."""
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(
            main, ["check", *options, "--format", "json", *(os.path.relpath(path, cwd) for path in paths)]
        )
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    assert not report["errors"], report["errors"]
    findings = report["findings"]
    for finding in findings:
        # Paths are shown relative to the working directory; the fingerprint hashes the project-relative one.
        finding["path"] = os.path.normpath(cwd / finding["path"])
        finding["message"] = re.sub(r"[\w./-]+\.py", lambda shown: os.path.normpath(cwd / shown[0]), finding["message"])
        if finding["fix"] is not None and finding["fix"].get("path"):
            finding["fix"]["path"] = os.path.normpath(cwd / finding["fix"]["path"])
    return sorted(findings, key=lambda finding: (finding["path"], finding["line"], finding["code"]))


def codes(findings: list[dict[str, Any]]) -> list[str]:
    return sorted(finding["code"] for finding in findings)


def test_each_project_is_checked_alike_from_the_parent_its_root_and_a_subfolder(tmp_path: Path) -> None:
    new, old = _two_projects(tmp_path)
    for project in (new, old):
        runs = [check(cwd, project / "engine") for cwd in (tmp_path, project, project / "engine" / "mem_cache"
                                                           if (project / "engine" / "mem_cache").is_dir()
                                                           else project / "engine")]
        assert runs[0] == runs[1] == runs[2]
        assert "KV301" in codes(runs[0])
    # The old tree learns nothing from its neighbour: its KV101 has no `for_batch` fix to offer.
    old_findings = check(tmp_path, old / "engine")
    new_findings = check(tmp_path, new / "engine")
    assert any(f["fix"] and f["fix"]["applicability"] == "safe" for f in new_findings if f["code"] == "KV101")
    assert not any(f["fix"] and f["fix"]["applicability"] == "safe" for f in old_findings if f["code"] == "KV101")
    assert all(f["path"].startswith(str(old)) for f in old_findings)


def test_a_baseline_recorded_at_the_root_hides_the_same_findings_run_from_anywhere(tmp_path: Path) -> None:
    new, _old = _two_projects(tmp_path)
    baseline = tmp_path / "baseline.json"
    with contextlib.chdir(new):
        recorded = CliRunner().invoke(main, ["baseline", "-o", str(baseline), "engine"])
    assert recorded.exit_code == 0, recorded.output
    for cwd in (tmp_path, new / "engine", tmp_path.parent):
        left = check(cwd, new / "engine", options=("--no-cache", "--baseline", str(baseline)))
        assert left == [], (cwd, left)


def test_a_one_file_run_equals_the_whole_tree_run_for_that_file(tmp_path: Path) -> None:
    new, old = _two_projects(tmp_path)
    for project in (new, old):
        whole = check(tmp_path, project)
        for path in sorted({finding["path"] for finding in whole}):
            alone = [finding for finding in whole if finding["path"] == path]
            for cwd in (tmp_path, project, Path(path).parent):
                assert check(cwd, Path(path)) == alone, (cwd, path)


def test_a_git_ignored_backup_beside_the_tree_is_no_context(tmp_path: Path) -> None:
    project = tmp_path / "fork"
    project.mkdir()
    _git_init(project)
    srt = _engine(project, migrated=True, package="srt")
    shutil.copytree(srt, project / "srt.orig")
    (project / ".gitignore").write_text("srt.orig/\n")
    for cwd, paths in ((tmp_path, (srt,)), (project, (srt,)), (project, (project,)), (srt, (srt / "backend.py",))):
        findings = check(cwd, *paths)
        assert not any("srt.orig" in finding["path"] for finding in findings)
        if paths[0] != srt / "backend.py":
            assert codes(findings).count("KV301") == 1, (cwd, paths)


def test_an_inner_configuration_governs_its_subtree(tmp_path: Path) -> None:
    (tmp_path / "kvlint.toml").write_text("")
    outer = _engine(tmp_path, migrated=True)
    inner_root = tmp_path / "vendored"
    inner_root.mkdir()
    (inner_root / "kvlint.toml").write_text('ignore = ["KV101"]\n')
    inner = _engine(inner_root, migrated=True)
    assert project_config([inner / "backend.py"]).root == inner_root
    assert project_config([outer / "backend.py"]).root == tmp_path
    for cwd in (tmp_path, inner_root, inner):
        assert "KV101" not in codes(check(cwd, inner))
        assert "KV101" in codes(check(cwd, outer / "backend.py"))


def test_paths_of_two_projects_in_one_command_are_an_error_naming_both_roots(tmp_path: Path) -> None:
    new, old = _two_projects(tmp_path)
    with pytest.raises(ConfigError, match=f"{new}.*{old}|{old}.*{new}"):
        project_config([new / "engine", old / "engine"])
    with contextlib.chdir(tmp_path):
        result = CliRunner().invoke(main, ["check", "--no-cache", "new", "old"])
    assert result.exit_code == 2
    assert "different projects" in result.stderr and str(new) in result.stderr and str(old) in result.stderr


def test_a_tree_with_no_marker_is_only_the_paths_given(tmp_path: Path) -> None:
    tree = tmp_path / "loose"
    shutil.copytree(FIXTURES / "id_space" / "engine", tree)
    for init in tree.rglob("__init__.py"):
        init.unlink()
    config = project_config([tree / "backend.py"])
    assert config.context == (tree / "backend.py",) and config.root == tree
    # Alone, backend.py cannot see the write-loc class of mem_cache/: no safe fix to offer.
    alone = check(tmp_path, tree / "backend.py")
    assert alone == check(tree, tree / "backend.py")
    assert all(f["fix"] is None or f["fix"]["applicability"] != "safe" for f in alone if f["code"] == "KV101")
    assert any(f["fix"] and f["fix"]["applicability"] == "safe" for f in check(tmp_path, tree) if f["code"] == "KV101")


def test_a_package_root_is_the_folder_holding_the_top_package(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "checkout", migrated=True)
    config = project_config([engine / "mem_cache" / "memory_pool.py"])
    assert config.root == tmp_path / "checkout"
    assert config.context == (tmp_path / "checkout",)
    _git_init(tmp_path)
    # A repository around the package wins: every path of it has one root.
    assert project_config([engine]).root == tmp_path


def test_the_cache_lives_under_the_project_root_never_in_the_working_directory(tmp_path: Path) -> None:
    new, _old = _two_projects(tmp_path)
    check(tmp_path, new / "engine" / "backend.py", options=())
    assert (new / ".kvlint_cache").is_dir()
    assert not (tmp_path / ".kvlint_cache").exists()


@contextlib.contextmanager
def _listed_folders(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every folder the run lists."""
    listed: list[str] = []
    scandir = os.scandir

    def counting(path: Any = ".") -> Any:
        listed.append(os.path.abspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counting)
    yield listed


def test_a_run_from_a_crowded_folder_never_reads_outside_its_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    new, old = _two_projects(tmp_path)
    for index in range(50):
        (tmp_path / "unrelated" / f"d{index}").mkdir(parents=True)
        (tmp_path / "unrelated" / f"d{index}" / "m.py").write_text("x = 1\n")
    for target in (new / "engine", new / "engine" / "backend.py"):
        with _listed_folders(monkeypatch) as listed:
            check(tmp_path, target)
        assert _outside(listed, tmp_path, new) == []
        with _listed_folders(monkeypatch) as listed:
            with contextlib.chdir(tmp_path):
                result = CliRunner().invoke(main, ["contract", os.path.relpath(target, tmp_path)])
        assert result.exit_code == 0, result.output
        assert _outside(listed, tmp_path, new) == []


def _outside(listed: list[str], parent: Path, project: Path) -> list[str]:
    """The folders under `parent` listed outside `project` (kvlint lists its own package to key its caches)."""
    return [folder for folder in listed if folder.startswith(str(parent)) and not folder.startswith(str(project))]


def test_the_language_server_and_kvlint_contract_read_the_project_of_their_folder(tmp_path: Path) -> None:
    # Imported here: the workspace loads the rules' machinery, which only this test needs.
    from kvlint.live.workspace import Workspace

    new, old = _two_projects(tmp_path)
    layers = new / "engine" / "layers"
    layers.mkdir()
    (new / "engine" / "backend.py").rename(layers / "backend.py")
    sources = dict(Workspace(layers).contract.sources)
    assert sources["write-loc-class"].startswith("learned from") and "memory_pool.py" in sources["write-loc-class"]
    assert "memory_pool.py" not in str(Workspace(old / "engine").contract.sources)
    with contextlib.chdir(tmp_path):
        shown = {name: CliRunner().invoke(main, ["contract", name]).output for name in ("old", "new/engine/layers")}
    assert "new/engine/mem_cache/memory_pool.py" in shown["new/engine/layers"]
    assert "memory_pool.py" not in shown["old"]


def test_without_paths_the_working_directory_is_checked_within_its_project(tmp_path: Path) -> None:
    new, _old = _two_projects(tmp_path)
    layers = new / "engine" / "layers"
    layers.mkdir()
    (new / "engine" / "backend.py").rename(layers / "backend.py")
    with contextlib.chdir(layers):
        report = json.loads(CliRunner().invoke(main, ["check", "--no-cache", "--format", "json"]).stdout)
    # Only the working directory is reported, with the write-loc class learned from the repository around it.
    assert {finding["path"] for finding in report["findings"]} == {"backend.py"}
    assert any(f["fix"] and f["fix"]["applicability"] == "safe" for f in report["findings"] if f["code"] == "KV101")


def test_an_explicit_configuration_makes_its_folder_the_root(tmp_path: Path) -> None:
    new, old = _two_projects(tmp_path)
    (tmp_path / "shared.toml").write_text('ignore = ["KV301"]\n')
    config = project_config([old / "engine"], tmp_path / "shared.toml")
    assert config.root == tmp_path and config.context == (tmp_path,)
    options = ("--no-cache", "--config", str(tmp_path / "shared.toml"))
    assert "KV301" not in codes(check(new, old / "engine", options=options))
