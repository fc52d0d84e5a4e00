"""A worker forked as soon as a run knows its few files (before the engine loads, where the command
names them) loads LibCST while the tree is read and indexed; the files are checked there."""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Optional

import pytest
from click.testing import CliRunner

import kvlint.running.checker
import kvlint.running.deferred_libcst
import kvlint.running.head_start
import kvlint.processes.pool
import kvlint.running.workers
from kvlint.api.config import load_config
from kvlint.api.contract import Contract
from kvlint.cli import main
from kvlint.running.engine import RunOptions, RunResult, run
from kvlint.running.plan import CheckRequest
from kvlint.running.head_start import MIN_SCOPE_FILES, HeadStart, warm_up
from kvlint.running.registry import all_rules
from kvlint.processes.pool import MIN_FILES_FOR_WORKERS
from pools import counted_pools

BARE = "def forward(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
# Trigger words of KV201 and KV203, each in another function: no rule's `may_flag` keeps the file.
CLEARED = (
    "def pages(page_size):\n    return page_size * 2\n\n\n"
    "def shaped(x):\n    return x.view(-1, 4)\n\n\n"
    "def buffers(pool, layer):\n    return pool.get_key_buffer(layer.layer_id)\n"
)

needs_fork = pytest.mark.skipif(
    multiprocessing.get_start_method() != "fork", reason="patching the checker reaches workers only through fork"
)


@pytest.fixture(autouse=True)
def libcst_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a `kvlint` process until a rule reads LibCST (this test session has imported it)."""
    monkeypatch.setattr(kvlint.running.head_start, "loaded", lambda: False)


def rules() -> list[Any]:
    return [rule for rule in all_rules() if hasattr(rule, "may_flag")]


def started(
    to_check: dict[str, bytes],
    scope_files: int = MIN_SCOPE_FILES,
    jobs: Optional[int] = 2,
    warm: bool = True,
    cache: bool = True,
    answered: bool = False,
) -> bool:
    early = warm_up([Path(path) for path in to_check], scope_files, cache, jobs)
    if early is None:
        return False
    kept = early.keep_for(to_check, lambda _path: answered, lambda _data: True, warm)
    early.close()
    return kept


def test_a_few_files_a_rule_keeps_in_a_large_tree_get_a_head_start() -> None:
    assert started({"bad.py": BARE.encode()})


@pytest.mark.parametrize(
    ("to_check", "scope_files", "jobs", "warm", "cache"),
    [
        ({"bad.py": BARE.encode()}, MIN_SCOPE_FILES - 1, 2, True, True),  # an index this small takes less than a start
        ({"bad.py": BARE.encode()}, MIN_SCOPE_FILES, 1, True, True),  # one core
        ({"bad.py": BARE.encode()}, MIN_SCOPE_FILES, 2, False, True),  # a cold cache: the index wants every core
        ({"bad.py": BARE.encode()}, MIN_SCOPE_FILES, 2, True, False),  # no cache: the index wants every core
        ({f"bad_{i}.py": BARE.encode() for i in range(MIN_FILES_FOR_WORKERS)}, MIN_SCOPE_FILES, 2, True, True),  # a pool
        ({}, MIN_SCOPE_FILES, 2, True, True),
    ],
)
def test_no_head_start_where_it_cannot_pay(
    to_check: dict[str, bytes], scope_files: int, jobs: int, warm: bool, cache: bool
) -> None:
    assert not started(to_check, scope_files, jobs, warm, cache)


def test_the_worker_loads_libcst_at_once_only_for_a_file_a_rule_may_flag(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "cleared.py").write_text(CLEARED)
    loads: list[bool] = []
    monkeypatch.setattr(kvlint.running.deferred_libcst, "load", lambda: loads.append(True))
    kvlint.running.head_start._warm_up(["cleared.py", "missing.py"])
    assert not loads
    kvlint.running.head_start._warm_up(["cleared.py", "bad.py"])
    assert loads == [True]
    kvlint.running.checker._TREES_AHEAD.clear()


def test_a_file_no_rule_keeps_is_not_parsed_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_parse(_source: bytes) -> Any:
        raise AssertionError("parsed with LibCST")

    monkeypatch.setattr(kvlint.running.checker.cst, "parse_module", no_parse)
    kvlint.running.head_start._parse_ahead([(CheckRequest("cleared.py", tuple(rules()), Contract()), CLEARED.encode())])
    assert not kvlint.running.checker._PARSED_AHEAD
    kvlint.running.checker._TREES_AHEAD.clear()


def test_a_batch_for_every_core_closes_the_head_start_for_good() -> None:
    early = HeadStart(ProcessPoolExecutor(max_workers=1))
    assert early.pool_for(1) is not None
    # Closed before any pool of every core forks: it would fork beside this pool's thread.
    assert early.pool_for(MIN_FILES_FOR_WORKERS) is None
    assert early.pool_for(1) is None


WARM_UP = """
import sys
from kvlint.running.head_start import _warm_up

_warm_up(sys.argv[1:])
module = sys.modules.get("libcst")
print(type(module).__name__ if module is not None else "absent")
"""


@pytest.mark.parametrize(("name", "source", "libcst"), [("cleared.py", CLEARED, "_StandIn"), ("bad.py", BARE, "module")])
def test_the_worker_imports_libcst_itself_only_for_a_file_a_rule_may_flag(
    in_tmp: Path, name: str, source: str, libcst: str
) -> None:
    # A fresh interpreter, as the worker forked from a `kvlint` process that has not loaded LibCST.
    (in_tmp / name).write_text(source)
    done = subprocess.run([sys.executable, "-c", WARM_UP, name], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == [libcst]


def test_no_head_start_for_a_file_the_cache_answers() -> None:
    assert not started({"bad.py": BARE.encode()}, answered=True)


@pytest.fixture
def large_tree(in_tmp: Path) -> Path:
    for i in range(MIN_SCOPE_FILES):
        (in_tmp / f"plain_{i:03}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    (in_tmp / "bad.py").write_text(BARE)
    (in_tmp / "cleared.py").write_text(CLEARED)
    return in_tmp


def lint(*paths: str, jobs: int) -> RunResult:
    return run(load_config(), RunOptions(paths=tuple(Path(path) for path in paths), jobs=jobs, cache=True))


def test_a_pre_commit_run_checks_in_the_head_start_worker_as_it_would_here(
    large_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lint(".", jobs=1)
    (large_tree / "bad.py").write_text(BARE + "# edited\n")
    here = lint("bad.py", "cleared.py", jobs=1)
    (large_tree / "bad.py").write_text(BARE + "# edited again\n")
    pools = counted_pools(monkeypatch, kvlint.running.head_start)
    there = lint("bad.py", "cleared.py", jobs=2)
    assert len(pools) == 1
    assert [(f.path, f.code, f.line, f.column) for f in there.findings] == [("bad.py", "KV101", 2, 31)]
    assert [f.to_json() for f in there.findings] == [f.to_json() for f in here.findings]
    assert (there.files_parsed, there.errors) == (here.files_parsed, here.errors)


@needs_fork
def test_a_head_start_worker_that_dies_loses_only_its_file(large_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (large_tree / "bad_2.py").write_text(BARE)
    lint(".", jobs=1)
    for name in ("bad.py", "bad_2.py"):
        (large_tree / name).write_text(BARE + "# edited\n")
    real = kvlint.running.checker.check_bytes

    def dies_on_one_file(request: Any, data: bytes) -> Any:
        if request.path == "bad_2.py":
            os._exit(1)  # what a crash in native code looks like from outside
        return real(request, data)

    monkeypatch.setattr(kvlint.running.checker, "check_bytes", dies_on_one_file)
    result = lint("bad.py", "bad_2.py", jobs=2)
    assert [(error.path, error.internal) for error in result.errors] == [("bad_2.py", True)]
    assert "worker process died" in result.errors[0].message
    assert [finding.path for finding in result.findings] == ["bad.py"]


def test_nothing_forks_beside_the_head_start_while_its_pool_runs(
    large_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forking beside a pool's thread risks a child holding a lock no thread will release.
    lint(".", jobs=1)
    for i in range(kvlint.processes.pool.MIN_FILES_FOR_WORKERS + 2):
        # Summaries the index must make again, enough for a pool of its own.
        (large_tree / f"plain_{i:03}.py").write_text(f"def f{i}(x):\n    return x.get_key_buffer({i})\n")
    (large_tree / "bad.py").write_text(BARE + "# edited\n")

    def no_pool(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a pool forked beside the head start's")

    monkeypatch.setattr(kvlint.running.workers, "ProcessPoolExecutor", no_pool)
    result = lint("bad.py", jobs=2)
    assert [(f.path, f.code) for f in result.findings] == [("bad.py", "KV101")]


def test_a_worker_the_run_cannot_use_is_closed_before_anything_else_forks(
    large_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold cache: the worker was forked on discovery, then the index wants every core.
    for i in range(kvlint.processes.pool.MIN_FILES_FOR_WORKERS + 2):
        # Enough files to summarise for a pool of their own.
        (large_tree / f"plain_{i:03}.py").write_text(f"def f{i}(x):\n    return x.get_key_buffer({i})\n")
    events: list[str] = []
    real_close = HeadStart.close
    real_pool = kvlint.running.workers.ProcessPoolExecutor

    def close(self: HeadStart) -> None:
        events.append("closed")
        real_close(self)

    def pool(*args: Any, **kwargs: Any) -> Any:
        events.append("forked")
        return real_pool(*args, **kwargs)

    monkeypatch.setattr(HeadStart, "close", close)
    for module in (kvlint.running.workers, kvlint.processes.pool):
        monkeypatch.setattr(module, "ProcessPoolExecutor", pool)
    result = lint("bad.py", jobs=2)
    assert [(f.path, f.code) for f in result.findings] == [("bad.py", "KV101")]
    assert events[0] == "closed" and "forked" in events


def test_the_worker_parses_ahead_what_the_check_then_finds_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Three functions, one the rules keep: the check parses a skeleton, and finds it parsed ahead.
    data = (CLEARED + "\n\n" + BARE).encode()
    request = CheckRequest("bad.py", tuple(rules()), Contract())
    expected = kvlint.running.checker.check_bytes(request, data)
    kvlint.running.head_start._parse_ahead([(request, data)])
    assert len(kvlint.running.checker._PARSED_AHEAD) == len(kvlint.running.checker._TREES_AHEAD) == 1

    def no_parse(*_args: Any) -> Any:
        raise AssertionError("parsed again")

    monkeypatch.setattr(kvlint.running.checker.cst, "parse_module", no_parse)
    monkeypatch.setattr(kvlint.running.checker, "python_tree", no_parse)
    assert kvlint.running.checker.check_bytes(request, data) == expected
    assert not kvlint.running.checker._PARSED_AHEAD and not kvlint.running.checker._TREES_AHEAD


def test_a_check_whose_text_differs_from_the_one_parsed_ahead_parses_its_own() -> None:
    # The index's facts can keep more of a file than the rules' own words: another text, parsed again.
    request = CheckRequest("bad.py", tuple(rules()), Contract())
    kvlint.running.checker.parse_ahead(request, (CLEARED + "\n\n" + BARE).encode())
    other = (CLEARED + "\n\n" + BARE + "# edited after\n").encode()
    outcome = kvlint.running.checker.check_bytes(request, other).outcome
    assert [(f.code, f.line) for f in outcome.findings] == [("KV101", 14)]
    kvlint.running.checker._PARSED_AHEAD.clear()
    kvlint.running.checker._TREES_AHEAD.clear()


def test_the_worker_parses_with_the_collector_paused() -> None:
    # Its trees make no cycle: collections would only walk them while it parses.
    with ProcessPoolExecutor(
        max_workers=1, initializer=kvlint.running.head_start._worker_start, initargs=(os.getpid(),)
    ) as pool:
        assert pool.submit(gc.isenabled).result() is False


LEFT_BEHIND = """
import os
from concurrent.futures import ProcessPoolExecutor
from kvlint.running.head_start import _exit_with_parent

pool = ProcessPoolExecutor(max_workers=1, initializer=_exit_with_parent, initargs=(os.getpid(),))
print(pool.submit(os.getpid).result(), flush=True)
pool.submit(os.getpid)
os._exit(0)  # as `kvlint` ends, the pool never shut down and a task still queued
"""


def test_a_worker_left_behind_ends_with_its_parent_and_lets_go_of_stdout() -> None:
    # A worker still waiting for work would keep the pipe open: reading to its end would hang.
    done = subprocess.run([sys.executable, "-c", LEFT_BEHIND], capture_output=True, text=True, timeout=20)
    # Reading to the end returned: the worker let go of stdout, which it does only in ending.
    worker = Path(f"/proc/{done.stdout.split()[0]}/stat")
    deadline = time.monotonic() + 10
    while _running(worker):
        assert time.monotonic() < deadline, "the worker outlived its parent"
        time.sleep(0.05)


def _running(stat: Path) -> bool:
    try:
        state = stat.read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    # Until its new parent reaps it, an ended process stays as a zombie.
    return state != "Z"


def test_the_hook_forks_its_head_start_before_the_run_machinery_is_imported(large_tree: Path) -> None:
    """A fresh interpreter, as `kvlint check FILE` starts: the worker is forked while the engine is not loaded."""
    lint(".", jobs=1)
    (large_tree / "bad.py").write_text(BARE + "# edited\n")
    script = (
        "import sys\n"
        "import kvlint.running.head_start as head_start\n"
        "from kvlint.face.cli import main\n"
        "real = head_start.ProcessPoolExecutor\n"
        "def pool(*args, **kwargs):\n"
        "    print('forked, engine loaded:', 'kvlint.running.engine' in sys.modules)\n"
        "    return real(*args, **kwargs)\n"
        "head_start.ProcessPoolExecutor = pool\n"
        "main(['check', '--format', 'json', '--jobs', '2', 'bad.py'], standalone_mode=False)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[0] == "forked, engine loaded: False"
    assert '"code": "KV101"' in done.stdout


@pytest.mark.parametrize(
    ("names", "cache"),
    [
        (("bad.py",), False),  # no cache: the index wants every core
        ((".",), True),  # a directory: its files are known only after discovery
        (("notes.txt",), True),
        (("missing.py",), True),
        (tuple(f"plain_{i:03}.py" for i in range(MIN_FILES_FOR_WORKERS)), True),  # a pool
    ],
)
def test_no_early_head_start_but_for_a_few_named_python_files(
    large_tree: Path, names: tuple[str, ...], cache: bool
) -> None:
    (large_tree / "notes.txt").write_text("set_kv_buffer\n")
    assert kvlint.running.head_start.start_early([Path(name) for name in names], cache, 2) is None
    started = kvlint.running.head_start.start_early([Path("bad.py")], True, 2)
    assert started is not None
    started.close()


def test_an_early_head_start_is_closed_where_the_scope_is_too_small_to_pay(in_tmp: Path) -> None:
    (in_tmp / "bad.py").write_text(BARE)
    started = kvlint.running.head_start.start_early([Path("bad.py")], True, 2)
    assert started is not None
    assert warm_up([Path("bad.py")], MIN_SCOPE_FILES - 1, True, 2, started) is None
    assert started.pool_for(1) is None
    kept = kvlint.running.head_start.start_early([Path("bad.py")], True, 2)
    assert warm_up([Path("bad.py")], MIN_SCOPE_FILES, True, 2, kept) is kept
    kept.close()


def test_a_configuration_error_after_the_early_fork_leaves_no_worker(
    large_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (large_tree / "kvlint.toml").write_text("no-such-key = 1\n")
    pools = counted_pools(monkeypatch, kvlint.running.head_start)
    result = CliRunner().invoke(main, ["check", "--jobs", "2", "bad.py"])
    assert result.exit_code == 2 and "unknown key 'no-such-key'" in result.output
    assert len(pools) == 1 and multiprocessing.active_children() == []


def test_a_head_start_the_run_will_not_use_is_ended_without_waiting_for_its_work() -> None:
    """A small project's hook run waited for the worker to finish importing LibCST, then imported
    it again itself; here the worker's task would take a minute."""
    early = HeadStart(ProcessPoolExecutor(max_workers=1))
    early._pool.submit(time.sleep, 60)  # type: ignore[union-attr]
    workers = list(early._pool._processes.values())  # type: ignore[union-attr]
    started_at = time.monotonic()
    assert warm_up([Path("bad.py")], MIN_SCOPE_FILES - 1, True, 2, early) is None
    assert time.monotonic() - started_at < 30 and not any(worker.is_alive() for worker in workers)
    assert early.pool_for(1) is None
