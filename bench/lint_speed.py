"""How fast kvlint is on a real tree, against the baselines a maintainer would reach for.

    python bench/lint_speed.py [TREE] [--runs 5] [--scaling 250,500,1000]

TREE defaults to the latest `sglang` wheel's `sglang/srt`, downloaded once by
`tests/corpus.py`. The tree is copied into a temp directory (one copy
stays untouched, the others are git repositories where one file changes per
pre-commit run), and the commands are run round-robin, so machine noise
spreads evenly over them. For every command: median and min-max wall time
(interpreter start included), median CPU time (user + system, workers
included), the ratios to the stdlib-`ast` baseline and to `python -c pass`,
and the peak resident memory of its largest process (one more, untimed run under
a small launcher: `measure_peak`).
The pre-commit rows check one named file in a third copy (a git checkout, as
the hook's always is) whose cache is warm, the file edited before each run (a line
appended, or, in the "lines moved" rows, a line added at its top); the LibCST rows are their floor while LibCST
parses what the rules check (import it, parse the file, in a bare interpreter); the "no per-file
rule" rows are the same hook run with `--select KV301` in a fourth copy (a run's cache is per rule
selection), which never loads LibCST: what the run costs besides the per-file rules' LibCST work, the
floor that moving their detection to `ast` would reach.
Fixit 2 and ruff are measured where they are
installed (they are not dependencies).
Then a scaling table: cold `kvlint check` on evenly spread samples of the tree.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "tests"))

from corpus import CorpusUnavailable, sglang_srt  # noqa: E402

KVLINT = [sys.executable, "-m", "kvlint"]
# Issue 16's pre-commit cases, paths under the tree: the largest backend with findings, a large one
# without, and one with a single finding; and a model file, the most common edit, which holds
# trigger words but no rule's `may_flag` keeps (checked on CPython's tree alone).
PRE_COMMIT_FILES = (
    "hardware_backend/npu/attention/ascend_backend.py",
    "layers/attention/flashattention_backend.py",
    "layers/attention/triton_backend.py",
    "models/llama.py",
)
# The same hook run after an edit that moves every line of the file down (a line added at its top),
# as most real edits move some: the project index reads a backend's summary, whose lines then change.
SHIFTED_FILES = (PRE_COMMIT_FILES[0], PRE_COMMIT_FILES[3])
# The floor of any run that checks one of the backends with LibCST: a bare interpreter that imports
# LibCST and parses the file, nothing else (the rules' `may_flag` keeps some rule on each of them).
LIBCST_FLOOR_FILES = PRE_COMMIT_FILES[:3]
LIBCST_FLOOR = "import sys, libcst; libcst.parse_module(open(sys.argv[1], 'rb').read())"
# The one project rule: with it alone, the hook run does everything but the per-file rules' LibCST work.
PROJECT_RULE_ONLY = "KV301"
# A Fixit rule that visits nothing: what remains is Fixit's own parse and metadata cost.
FIXIT_NOOP_RULE = '''
from fixit import LintRule


class DoNothing(LintRule):
    """Visits nothing: times Fixit's fixed cost per file."""
'''


@dataclass
class Command:
    name: str
    argv: list[str]
    cwd: Path
    before: Optional[Callable[[], None]] = None
    runs: Optional[int] = None
    env: dict[str, str] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    # User + system seconds of the command and the workers it waited for.
    cpu: list[float] = field(default_factory=list)
    peak_kb: int = 0
    last_output: str = ""


def measure(command: Command) -> None:
    if command.before is not None:
        command.before()
    env = {**os.environ, **command.env}
    start = time.perf_counter()
    process = subprocess.Popen(
        command.argv, cwd=command.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    # Read while it runs (a full pipe would stall it); wait4 then gives this process's own rusage.
    output = process.stdout.read() if process.stdout else b""
    _pid, status, usage = os.wait4(process.pid, 0)
    command.times.append(time.perf_counter() - start)
    command.cpu.append(usage.ru_utime + usage.ru_stime)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):
        raise SystemExit(f"bench: {command.name} exited {process.returncode}:\n{output.decode()[-2000:]}")
    command.last_output = output.decode(errors="replace")


# A process started from here counts in its `ru_maxrss` the pages it shared with this one before
# its exec, so `wait4` reported this process's size wherever that was the larger (450-565 MB for
# `fix --diff`, whose own peak is 215 MB by GNU time). The launcher is small: its children are not.
PEAK_LAUNCHER = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def measure_peak(command: Command) -> None:
    """The peak resident memory of the command's largest process, in one untimed run."""
    if command.before is not None:
        command.before()
    launched = subprocess.run(
        [sys.executable, "-c", PEAK_LAUNCHER, *command.argv],
        cwd=command.cwd, env={**os.environ, **command.env}, capture_output=True, text=True, check=True,
    )
    command.peak_kb = int(launched.stdout.split()[-1])
    # Progress on stderr: a full run takes many minutes.
    print(f"  {command.name}: {command.times[-1]:.2f} s", file=sys.stderr, flush=True)


def snapshot_kvlint(into: Path) -> dict[str, str]:
    """A frozen copy of kvlint to time: edits to the checkout during the bench change neither
    the code measured nor the cache key (which includes kvlint's own sources).

    Compiled to bytecode, as `pip install` leaves an installed package: where the environment
    sets PYTHONDONTWRITEBYTECODE, every run would otherwise compile kvlint's modules again
    (0.3-0.5 s of a pre-commit run on a 2-core machine)."""
    for package in ("kvlint",):
        shutil.copytree(BENCH.parent / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
        compileall.compile_dir(into / package, quiet=1)
    return {"PYTHONPATH": str(into)}


def copy_tree(tree: Path, into: Path) -> Path:
    target = into / tree.name
    shutil.copytree(tree, target, ignore=shutil.ignore_patterns("__pycache__", ".kvlint_cache"))
    # An empty config here keeps a config further up (the temp dir's parents) out of the run.
    (into / "kvlint.toml").write_text("")
    return target


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def file_to_change(tree: Path) -> Path:
    """A file some rule must parse, of median size among those: a typical pre-commit edit.

    In a tree without any write door, the median file of the tree.
    """
    files = sorted(tree.rglob("*.py"), key=lambda path: path.stat().st_size)
    candidates = [path for path in files if b"set_kv_buffer" in path.read_bytes()] or files
    return candidates[len(candidates) // 2]


def appender(path: Path) -> Callable[[], None]:
    edits = iter(range(1_000_000))

    def edit() -> None:
        with path.open("a") as out:
            out.write(f"# bench edit {next(edits)}\n")

    return edit


def prepender(path: Path) -> Callable[[], None]:
    edits = iter(range(1_000_000))

    def edit() -> None:
        path.write_bytes(f"# bench edit {next(edits)}\n".encode() + path.read_bytes())

    return edit


def findings_count(command: Command) -> str:
    if command.name.startswith(("kvlint check", "pre-commit")):
        try:
            return str(len(json.loads(command.last_output)["findings"]))
        except (ValueError, KeyError):
            return "?"
    if command.name.startswith("ast"):
        return command.last_output.strip().splitlines()[-1].split()[0]
    return ""


def report(commands: list[Command], baseline: Command, interpreter: Command) -> None:
    base = statistics.median(baseline.times)
    start = statistics.median(interpreter.times)
    print(
        f"{'command':<56} {'median s':>9} {'min-max s':>13} {'cpu s':>7} {'x ast':>7} {'x pass':>7} "
        f"{'peak MB':>8} {'findings':>9}"
    )
    for command in commands:
        median = statistics.median(command.times)
        spread = f"{min(command.times):.2f}-{max(command.times):.2f}"
        print(
            f"{command.name:<56} {median:>9.2f} {spread:>13} {statistics.median(command.cpu):>7.2f} "
            f"{median / base:>7.3f} {median / start:>7.1f} {_megabytes(command.peak_kb):>8} {findings_count(command):>9}"
        )


def _megabytes(kilobytes: int) -> str:
    return f"{kilobytes / 1024:.0f}" if kilobytes else "-"


def scaling(tree: Path, root: Path, sizes: list[int], runs: int, env: dict[str, str]) -> None:
    files = sorted(path.relative_to(root).as_posix() for path in tree.rglob("*.py"))
    print(f"\nscaling: cold `kvlint check --no-cache` on evenly spread samples ({runs} run(s) each)")
    print(f"{'files':>6} {'MB':>6} {'parsed':>7} {'median s':>9} {'s per 1000 files':>17}")
    for size in [*sorted(s for s in sizes if s < len(files)), len(files)]:
        step = len(files) / size
        sample = [files[int(i * step)] for i in range(size)]
        argv = [*KVLINT, "check", "--no-cache", "--format", "json", *sample]
        command = Command(str(size), argv, root, env=env)
        for _ in range(runs):
            measure(command)
        parsed = json.loads(command.last_output)["files_parsed"]
        megabytes = sum((root / name).stat().st_size for name in sample) / 1e6
        median = statistics.median(command.times)
        print(f"{size:>6} {megabytes:>6.1f} {parsed:>7} {median:>9.2f} {median / size * 1000:>17.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", nargs="?", type=Path, help="source tree (default: the latest sglang/srt)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command (default 5)")
    parser.add_argument("--fixit-runs", type=int, default=1, help="Fixit takes minutes per run (default 1; 0: skip it)")
    parser.add_argument("--scaling", default="250,500,1000", help="sample sizes for the scaling table")
    parser.add_argument("--scaling-runs", type=int, default=1)
    args = parser.parse_args()
    try:
        tree = (args.tree or sglang_srt()).resolve()
    except CorpusUnavailable as exc:
        raise SystemExit(f"bench: {exc}") from None

    with tempfile.TemporaryDirectory(prefix="kvlint-bench-") as scratch:
        clean_root, repo_root, hook_root = Path(scratch, "clean"), Path(scratch, "repo"), Path(scratch, "hook")
        # The rows with KV301 alone have a cache of their own (a run's cache is per rule selection): in the
        # hook copy, the lines-moved row's edits of ascend would reach it as a line-moving edit every round.
        bare_root = Path(scratch, "hook-kv301")
        for root in (clean_root, repo_root, hook_root, bare_root):
            root.mkdir()
        clean = copy_tree(tree, clean_root)
        repo = copy_tree(tree, repo_root)
        hook = copy_tree(tree, hook_root)
        bare = copy_tree(tree, bare_root)
        # The hook copies are checkouts too: the pre-commit hook always runs in one (git's ignore rules are read).
        for checkout in (repo_root, hook_root, bare_root):
            git(checkout, "init", "-q")
            git(checkout, "add", ".")
            git(checkout, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", "tree")
        changed = file_to_change(repo)
        snapshot = Path(scratch, "kvlint-snapshot")
        kvlint_env = snapshot_kvlint(snapshot)
        files = sum(1 for _ in tree.rglob("*.py"))
        print(f"tree: {tree} ({files} files); pre-commit edit: {changed.relative_to(repo_root)}")
        print(f"{args.runs} interleaved runs on {os.cpu_count()} cores (affinity {len(os.sched_getaffinity(0))})\n")

        ast_argv = [sys.executable, str(BENCH / "ast_baseline.py"), str(clean)]
        baseline = Command("ast baseline (1 process)", ast_argv, clean_root)
        interpreter = Command("python -c pass", [sys.executable, "-c", "pass"], clean_root)
        json_check = [*KVLINT, "check", "--format", "json"]
        # The pre-commit hook naming one file: its cache entry cold (edited before each run), the rest warm.
        pre_commit = [
            Command(f"pre-commit 1 file: {Path(name).name}", [*json_check, f"{hook.name}/{name}"], hook_root,
                    appender(hook / name))
            for name in PRE_COMMIT_FILES if (hook / name).is_file()
        ] + [
            Command(f"pre-commit, lines moved: {Path(name).name}", [*json_check, f"{hook.name}/{name}"], hook_root,
                    prepender(hook / name))
            for name in SHIFTED_FILES if (hook / name).is_file()
        ]
        without_file_rules = [
            Command(f"pre-commit, no per-file rule: {Path(name).name}",
                    [*json_check, "--select", PROJECT_RULE_ONLY, f"{bare.name}/{name}"], bare_root,
                    appender(bare / name))
            for name in LIBCST_FLOOR_FILES if (bare / name).is_file()
        ]
        floors = [
            Command("LibCST import", [sys.executable, "-c", "import libcst"], clean_root),
            *(Command(f"LibCST import + parse: {Path(name).name}",
                      [sys.executable, "-c", LIBCST_FLOOR, str(clean / name)], clean_root)
              for name in LIBCST_FLOOR_FILES if (clean / name).is_file()),
        ]
        kvlint_commands = [
            Command("kvlint check cold (--no-cache)", [*json_check, "--no-cache", "."], clean_root),
            Command("kvlint check warm", [*json_check, "."], clean_root),
            Command("kvlint check --changed (1 file)", [*json_check, "--changed"], repo_root, appender(changed)),
            Command("kvlint fix --diff cold", [*KVLINT, "fix", "--diff", "--no-cache", "--quiet", "."], clean_root),
            Command("kvlint check --prove cold (--no-cache)", [*json_check, "--prove", "--no-cache", "."], clean_root),
            Command("kvlint check --prove warm", [*json_check, "--prove", "."], clean_root),
            *pre_commit,
            *without_file_rules,
        ]
        for command in kvlint_commands:
            command.env = kvlint_env
        commands = [baseline, interpreter, *floors, *kvlint_commands]
        if shutil.which("ruff"):
            commands.append(Command("ruff check warm", ["ruff", "check", "--quiet", "--exit-zero", "."], clean_root))
        if shutil.which("fixit") and args.fixit_runs > 0:
            rules = Path(scratch, "rules")
            rules.mkdir()
            (rules / "bench_noop_rule.py").write_text(FIXIT_NOOP_RULE)
            commands.append(
                Command(
                    "fixit lint, one no-op rule",
                    ["fixit", "--rules", "bench_noop_rule", "lint", "."],
                    clean_root,
                    runs=args.fixit_runs,
                    env={"PYTHONPATH": str(rules)},
                )
            )
        # Untimed: fill kvlint's cache in the copies and ruff's cache, as a developer's checkout has them.
        fill_hook_cache = Command("kvlint check in the hook copy", [*json_check, "."], hook_root, env=kvlint_env)
        fill_bare_cache = Command("KV301 alone in its hook copy", [*json_check, "--select", PROJECT_RULE_ONLY, "."],
                                  bare_root, env=kvlint_env)
        ruff = [command for command in commands if command.name.startswith("ruff")]
        for warm_up in (*kvlint_commands[1:3], fill_hook_cache, fill_bare_cache, *pre_commit, *without_file_rules,
                        *ruff):
            measure(warm_up)
            warm_up.times.clear()
            warm_up.cpu.clear()
        for round_number in range(args.runs):
            for command in commands:
                if command.runs is None or round_number < command.runs:
                    measure(command)
        for command in commands:
            if command.runs is None:  # Fixit's minutes per run are not spent again for its memory
                measure_peak(command)
        report(commands, baseline, interpreter)
        sizes = [int(size) for size in args.scaling.split(",") if size]
        scaling(clean, clean_root, sizes, args.scaling_runs, kvlint_env)


if __name__ == "__main__":
    main()
