"""The result cache: a hit equals a miss, and no input change is ever served stale."""

from __future__ import annotations

import gc
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvlint.store.result_cache
import kvlint.running.engine
from kvlint.store.result_cache import GITIGNORE, ResultCache
from kvlint.api.config import load_config
from kvlint.running.engine import RunOptions, RunResult, run
from kvlint.api.triggers import Triggers
from kvlint.running.registry import rule_by_code
from importtime import imported_libcst
from outcomes import run_summary
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

BARE = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
MARKED_PHYSICAL = "loc = KVWriteLoc(fb.out_cache_loc, physical=fb.out_cache_loc_is_physical)\n"
PHYSICAL_CLASS = "class KVWriteLoc:\n    loc: object\n    physical: bool\n"
UNRELATED = "def add(a, b):\n    return a + b\n"
TBO_BATCH = (
    "from dataclasses import dataclass\n\n\n"
    "@dataclass\nclass ForwardBatch:\n    input_ids: object\n    batch_size: int\n"
)
TBO_BUILDER = (
    "from batch import ForwardBatch\n\n\n"
    "def filter_batch(batch, *, start, end):\n"
    "    output_dict = dict()\n"
    '    output_dict["input_ids"] = batch.input_ids\n'
    "    return ForwardBatch(**output_dict)\n"
)


class CheckCounter:
    """Counts the files the engine hands to the checker: zero means the cache answered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files = 0
        real = kvlint.running.engine.check_all

        def counting(work: list[Any], *args: Any, **kwargs: Any) -> Any:
            self.files += len(work)
            return real(work, *args, **kwargs)

        monkeypatch.setattr(kvlint.running.engine, "check_all", counting)

    def take(self) -> int:
        files, self.files = self.files, 0
        return files


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> CheckCounter:
    return CheckCounter(monkeypatch)


def lint(**options: Any) -> RunResult:
    options.setdefault("cache", True)
    options.setdefault("jobs", 1)
    return run(load_config(), RunOptions(paths=(Path("."),), **options))


def cache_files(root: Path) -> list[Path]:
    return sorted((root / ".kvlint_cache").glob("v*/*.pickle"))


def test_hit_returns_the_same_result_as_the_miss(in_tmp: Path, counter: CheckCounter) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "other.py").write_text(UNRELATED)
    cold = lint()
    assert counter.take() == 1
    warm = lint()
    assert counter.take() == 0
    assert run_summary(warm) == run_summary(cold)
    assert [finding.code for finding in warm.findings] == ["KV101"]
    assert run_summary(lint(cache=False)) == run_summary(cold)


def test_cache_directory_ignores_itself_for_git(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    lint()
    assert (in_tmp / ".kvlint_cache" / ".gitignore").read_text() == GITIGNORE
    assert len(cache_files(in_tmp)) == 1


def test_without_cache_nothing_is_read_or_written(in_tmp: Path, counter: CheckCounter) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    lint()
    counter.take()
    lint(cache=False)
    assert counter.take() == 1
    for path in cache_files(in_tmp):
        path.unlink()
    lint(cache=False)
    assert cache_files(in_tmp) == []


def test_editing_a_file_invalidates_only_that_file(in_tmp: Path, counter: CheckCounter) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "also_bad.py").write_text(BARE)
    lint()
    counter.take()
    (in_tmp / "bad.py").write_text(BARE.replace("fb.out_cache_loc", "KVWriteLoc.for_batch(fb)"))
    result = lint()
    assert counter.take() == 1
    assert [finding.path for finding in result.findings] == ["also_bad.py"]


def test_changing_the_config_invalidates(in_tmp: Path, counter: CheckCounter) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    assert len(lint().findings) == 1
    (in_tmp / "kvlint.toml").write_text('[per-file-ignores]\n"bad.py" = ["KV101"]\n')
    assert lint().findings == []
    assert counter.take() == 2


def test_changing_the_selection_invalidates(in_tmp: Path, counter: CheckCounter) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    assert len(lint().findings) == 1
    assert lint(select=("KV2",)).findings == []
    assert len(lint(select=("KV101",)).findings) == 1
    assert counter.take() == 2  # KV2 alone does not parse a file without its trigger words


def test_changing_the_learned_contract_invalidates_unchanged_files(in_tmp: Path) -> None:
    (in_tmp / "use.py").write_text(MARKED_PHYSICAL)
    assert [finding.code for finding in lint().findings] == ["KV102"]
    # The class definition teaches `physical` as the mark; use.py itself did not change.
    (in_tmp / "pool.py").write_text(PHYSICAL_CLASS)
    assert lint().findings == []


def test_another_kvlint_build_does_not_reuse_results(
    in_tmp: Path, counter: CheckCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    lint()
    counter.take()
    monkeypatch.setattr(kvlint.store.result_cache, "__version__", "99.0")
    lint()
    assert counter.take() == 1


def test_a_corrupt_cache_file_is_ignored_and_rewritten(in_tmp: Path, counter: CheckCounter) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    cold = lint()
    counter.take()
    [path] = cache_files(in_tmp)
    path.write_bytes(b"\x80\x05 this is not a pickle")
    assert run_summary(lint()) == run_summary(cold)
    assert counter.take() == 1
    pickle.loads(path.read_bytes())
    lint()
    assert counter.take() == 0


def test_a_truncated_cache_file_is_ignored(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    cold = lint()
    [path] = cache_files(in_tmp)
    path.write_bytes(path.read_bytes()[:40])
    assert run_summary(lint()) == run_summary(cold)


@pytest.mark.parametrize("collecting", [True, False])
def test_loading_the_cache_leaves_the_garbage_collector_as_it_found_it(in_tmp: Path, collecting: bool) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    lint()
    [path] = cache_files(in_tmp)
    for content in (path.read_bytes(), b"not a pickle"):
        path.write_bytes(content)
        (gc.enable if collecting else gc.disable)()
        try:
            kvlint.store.result_cache.ResultCache(in_tmp / ".kvlint_cache", path.stem)
            assert gc.isenabled() == collecting
        finally:
            gc.enable()


def test_entries_of_deleted_files_are_dropped(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "gone.py").write_text(BARE)
    lint()
    (in_tmp / "gone.py").unlink()
    lint()
    [path] = cache_files(in_tmp)
    assert set(pickle.loads(path.read_bytes()).files) == {"bad.py"}


def test_old_run_keys_are_pruned(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kvlint.store.result_cache, "MAX_RUN_KEYS", 2)
    (in_tmp / "bad.py").write_text(BARE)
    for select in ("KV1", "KV101", "KV10", "KV"):
        lint(select=(select,))
    assert len(cache_files(in_tmp)) == 2


def test_fix_uses_cached_results_only_for_files_with_nothing_to_fix(in_tmp: Path, counter: CheckCounter) -> None:
    from kvlint.api.types import Applicability

    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "clean.py").write_text(BARE.replace("fb.out_cache_loc", "KVWriteLoc.for_batch(fb)"))
    lint()
    counter.take()
    result = lint(fix=Applicability.SAFE)
    assert counter.take() == 1
    assert set(result.fixed) == {"bad.py"}


def _kvlint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kvlint", "check", "--format", "json", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_two_concurrent_runs_leave_a_valid_cache(in_tmp: Path) -> None:
    for i in range(12):
        (in_tmp / f"bad_{i}.py").write_text(BARE)
        (in_tmp / f"ok_{i}.py").write_text(UNRELATED)
    command = [sys.executable, "-m", "kvlint", "check", "--format", "json", "--jobs", "2", "."]
    runs = [subprocess.Popen(command, cwd=in_tmp, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=120)[0] for process in runs]
    assert outputs[0] == outputs[1]
    [path] = cache_files(in_tmp)
    assert len(pickle.loads(path.read_bytes()).files) == 24
    assert list(path.parent.glob("*.tmp")) == []
    warm = _kvlint(in_tmp, "--jobs", "2", ".")
    assert warm.stdout == outputs[0]
    assert not imported_libcst(warm.stderr)


def test_saving_reads_the_file_again_only_when_another_run_replaced_it(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a.py", "b.py"):
        (in_tmp / name).write_text(UNRELATED)
    directory = in_tmp / ".kvlint_cache"
    ours, theirs = ResultCache(directory, "key"), ResultCache(directory, "key")
    theirs.store_file("b.py", b"b", None, {})
    theirs.save(["b.py"])
    ours.store_file("a.py", b"a", None, {})
    ours.save(["a.py"])
    assert set(ResultCache(directory, "key")._contents.files) == {"a.py", "b.py"}, "the other run's entry is kept"
    alone = ResultCache(directory, "key")
    alone.store_file("a.py", b"a2", None, {})
    reads: list[Path] = []
    real = kvlint.store.result_cache._load
    monkeypatch.setattr(kvlint.store.result_cache, "_load", lambda path: reads.append(path) or real(path))
    alone.save(["a.py"])
    assert reads == []
    assert ResultCache(directory, "key").file("a.py", b"a2") is not None


def test_a_warm_run_never_imports_libcst(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    cold = _kvlint(in_tmp, ".")
    assert imported_libcst(cold.stderr)
    warm = _kvlint(in_tmp, ".")
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)
    assert not imported_libcst(warm.stderr)



def test_a_project_rule_reruns_only_when_a_file_it_read_changes(in_tmp: Path, counter: CheckCounter) -> None:
    (in_tmp / "batch.py").write_text(TBO_BATCH)
    (in_tmp / "builder.py").write_text(TBO_BUILDER)
    (in_tmp / "other.py").write_text(UNRELATED)
    cold = lint(select=("KV301",))
    assert [finding.code for finding in cold.findings] == ["KV301"]
    counter.take()
    assert run_summary(lint(select=("KV301",))) == run_summary(cold)
    assert counter.take() == 0
    (in_tmp / "builder.py").write_text(
        TBO_BUILDER.replace("    return", '    output_dict["batch_size"] = end - start\n    return')
    )
    assert lint(select=("KV301",)).findings == []
    assert counter.take() == 1


def test_a_project_rule_is_not_run_again_for_an_edit_that_leaves_its_facts_as_they_were(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its result is kept under the facts themselves: a comment appended to the builder changes the
    file, not what it tells KV301; a line added above the batch class moves the finding."""
    (in_tmp / "batch.py").write_text(TBO_BATCH)
    (in_tmp / "builder.py").write_text(TBO_BUILDER)
    rule = rule_by_code("KV301")
    finished = []
    real = rule.finish

    def counting(self: Any, facts: Any) -> Any:
        finished.append(1)
        return real(self, facts)

    monkeypatch.setattr(rule, "finish", counting)
    cold = lint(select=("KV301",))
    assert [finding.code for finding in cold.findings] == ["KV301"] and len(finished) == 1
    (in_tmp / "builder.py").write_text(TBO_BUILDER + "# reviewed\n")
    assert run_summary(lint(select=("KV301",))) == run_summary(cold)
    assert len(finished) == 1
    (in_tmp / "batch.py").write_text("# the batch\n" + TBO_BATCH)
    [moved] = lint(select=("KV301",)).findings
    assert moved.line == cold.findings[0].line + 1 and len(finished) == 2


def test_context_files_are_read_by_the_first_run_only(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook names one file; the rest of the tree is its context (KV301 reads the child builder
    there). What each context file gave, facts or none (no trigger words), is kept by content,
    also in a tree no whole run has filled the cache of."""
    (in_tmp / "batch.py").write_text(TBO_BATCH)
    (in_tmp / "builder.py").write_text(TBO_BUILDER)
    (in_tmp / "other.py").write_text(UNRELATED)
    tested: list[bytes] = []
    wanted = Triggers.wanted
    monkeypatch.setattr(Triggers, "wanted", lambda self, data: tested.append(data) or wanted(self, data))

    def hook_run() -> list[str]:
        result = run(load_config(), RunOptions(paths=(Path("batch.py"),), cache=True, jobs=1))
        return [finding.code for finding in result.findings]

    assert hook_run() == ["KV301"]
    assert UNRELATED.encode() in tested and TBO_BUILDER.encode() in tested
    tested.clear()
    (in_tmp / "batch.py").write_text(TBO_BATCH + "# edited\n")
    assert hook_run() == ["KV301"]
    assert UNRELATED.encode() not in tested and TBO_BUILDER.encode() not in tested
