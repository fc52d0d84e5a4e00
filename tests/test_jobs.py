"""Worker processes: same output as one process, in a stable order, and one bad file loses only itself."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvlint.running.checker
import kvlint.processes.pool
import kvlint.running.workers
from kvlint.api.config import load_config
from kvlint.api.contract import Contract
from kvlint.running.engine import RunOptions, RunResult, run
from kvlint.running.plan import CheckRequest
from pools import counted_pools

BARE = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
# The memory pools and the batch: hazards of every rule family, small enough to check twice in a test.
CORPUS_PARTS = ("mem_cache", "model_executor")

needs_fork = pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="patching the checker reaches workers only through fork"
)


def kvlint_json(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--format", "json", "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.stdout


def lint(jobs: int) -> RunResult:
    return run(load_config(), RunOptions(paths=(Path("."),), jobs=jobs))


@pytest.fixture
def many_files(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for i in range(kvlint.processes.pool.MIN_FILES_FOR_WORKERS + 4):
        (in_tmp / f"bad_{i:02}.py").write_text(BARE * (i + 1))
    return in_tmp


def test_jobs_1_and_2_print_the_same_on_examples(repo_root: Path) -> None:
    assert kvlint_json(repo_root, "--jobs", "1", "examples") == kvlint_json(repo_root, "--jobs", "2", "examples")


def test_the_pool_returns_results_in_request_order(many_files: Path) -> None:
    one, two = lint(jobs=1), lint(jobs=2)
    assert one.findings == two.findings
    assert one.findings and [f.path for f in one.findings] == sorted(f.path for f in one.findings)
    assert (one.files_parsed, one.errors) == (two.files_parsed, two.errors)


@pytest.mark.corpus
def test_jobs_1_and_2_print_the_same_on_real_sglang(srt: Path, tmp_path: Path) -> None:
    # The parts alone are the project: a run on paths narrower than the
    # configured include would read the whole tree as context.
    for part in CORPUS_PARTS:
        shutil.copytree(srt / part, tmp_path / part)
    (tmp_path / "kvlint.toml").write_text("")
    assert kvlint_json(tmp_path, "--jobs", "1", ".") == kvlint_json(tmp_path, "--jobs", "2", ".")


def test_small_runs_stay_in_process(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a worker pool was started for a handful of files")

    for module in (kvlint.running.workers, kvlint.processes.pool):
        monkeypatch.setattr(module, "ProcessPoolExecutor", no_pool)
    (in_tmp / "bad.py").write_text(BARE)
    assert [finding.code for finding in lint(jobs=2).findings] == ["KV101"]


@needs_fork
def test_a_file_whose_check_raises_is_an_internal_error_of_that_file(
    many_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = kvlint.running.checker.check_bytes

    def broken_on_one_file(request: Any, data: bytes) -> Any:
        if request.path == "bad_03.py":
            raise RuntimeError("boom")
        return real(request, data)

    monkeypatch.setattr(kvlint.running.checker, "check_bytes", broken_on_one_file)
    result = lint(jobs=2)
    assert [(error.path, error.internal) for error in result.errors] == [("bad_03.py", True)]
    assert "boom" in result.errors[0].message
    assert {finding.path for finding in result.findings} == {p.name for p in many_files.glob("*.py")} - {"bad_03.py"}


@needs_fork
def test_a_dying_worker_loses_only_its_file(many_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = kvlint.running.checker.check_bytes

    def dies_on_one_file(request: Any, data: bytes) -> Any:
        if request.path == "bad_05.py":
            os._exit(1)  # what a crash in native code or the OOM killer looks like from outside
        return real(request, data)

    monkeypatch.setattr(kvlint.running.checker, "check_bytes", dies_on_one_file)
    result = lint(jobs=2)
    assert [(error.path, error.internal) for error in result.errors] == [("bad_05.py", True)]
    assert "worker process died" in result.errors[0].message
    assert {finding.path for finding in result.findings} == {p.name for p in many_files.glob("*.py")} - {"bad_05.py"}


def test_default_jobs_is_the_cores_this_process_may_use() -> None:
    assert kvlint.processes.pool.default_jobs() == len(os.sched_getaffinity(0))


def test_a_file_is_checked_with_the_collector_paused_and_handed_back_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    seen: list[bool] = []
    real_check = kvlint.running.checker.check_bytes

    def recording(request: Any, data: bytes) -> Any:
        seen.append(gc.isenabled())
        return real_check(request, data)

    monkeypatch.setattr(kvlint.running.checker, "check_bytes", recording)
    request = CheckRequest(path="m.py", rules=(), contract=Contract())
    kvlint.running.workers.check_guarded(request, b"x = 1\n")
    assert seen == [False] and gc.isenabled()


@needs_fork
def test_map_shared_hands_workers_nothing_but_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    data = {f"f{i}.py": b"x" * i for i in range(kvlint.processes.pool.MIN_KEYS_TO_SHARE + 10)}
    pools = counted_pools(monkeypatch, kvlint.processes.pool)
    keys = sorted(data, reverse=True)
    # A lambda cannot be pickled: the workers find it, and the bytes, in the memory they inherit.
    assert kvlint.processes.pool.map_shared(lambda text: len(text), keys, data, jobs=2) == [len(data[k]) for k in keys]
    assert len(pools) == 1


def test_map_shared_stays_here_without_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pool(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a pool was started where workers cannot inherit the data")

    monkeypatch.setattr(kvlint.processes.pool, "ProcessPoolExecutor", no_pool)
    monkeypatch.setattr(kvlint.processes.pool.multiprocessing, "get_start_method", lambda: "spawn")
    data = {i: bytes(i % 7) for i in range(kvlint.processes.pool.MIN_KEYS_TO_SHARE + 10)}
    assert kvlint.processes.pool.map_shared(len, list(data), data, jobs=2) == [i % 7 for i in data]
