"""The real `sglang/srt` source tree, for tests and benches that need real code.

The pinned `sglang` wheel (`SGLANG_VERSION`, or `$KVLINT_SGLANG_VERSION` to try
another release) is fetched once with `pip download --no-deps sglang==<version>`
and only its `sglang/srt/**.py` files are extracted, into
`$KVLINT_CORPUS_DIR` (default `~/.cache/kvlint-corpus/`) as
`sglang-<version>/sglang/srt`. Later calls reuse the extracted tree without
touching the network. The version is pinned because the corpus tests pin
findings and verdicts on real code: a new upstream release must not change
what a test run means. Concurrent
callers (several pytest sessions, a bench) wait on a lock file, and a tree
becomes visible only once it is complete.

From a pytest test, mark it and take the tree from a fixture::

    import pytest
    from corpus import sglang_srt_or_skip

    @pytest.fixture(scope="session")
    def srt() -> Path:
        return sglang_srt_or_skip()

    @pytest.mark.corpus
    def test_something_on_real_code(srt: Path) -> None: ...

(pytest puts `tests/` on `sys.path`, so `from corpus import ...` works there.)

From a bench script, which must not skip but say why it cannot run::

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from corpus import CorpusUnavailable, sglang_srt

    try:
        root = sglang_srt()
    except CorpusUnavailable as exc:
        sys.exit(f"bench: {exc}")

`python tests/corpus.py` prints the tree's path (downloading it if needed).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SRT_PREFIX = "sglang/srt/"
# Written last into a tree's directory: a tree without it is an interrupted extraction.
COMPLETE_MARKER = ".complete"
DOWNLOAD_TIMEOUT_S = 600
# The release whose findings the corpus tests have judged.
SGLANG_VERSION = "0.5.23"


@dataclass(frozen=True)
class CorpusCheck:
    """One `kvlint check --format json` of the real sglang/srt."""

    result: subprocess.CompletedProcess
    report: dict
    # Peak RSS of the largest process of the check: the CLI or a worker.
    peak_rss_bytes: int


@dataclass(frozen=True)
class CorpusRoundTrip:
    """check, fix --unsafe, fix --unsafe again, check again, through the real
    command line with its cache, on a copy of sglang/srt: the user's flow.

    Shared by the corpus tests of a session, since a whole-tree run costs tens
    of seconds here: `first` is the cold check of the untouched tree."""

    tree: Path
    before: dict
    first: CorpusCheck
    fix: subprocess.CompletedProcess
    after_fix: dict
    refix: subprocess.CompletedProcess
    after_refix: dict
    last: CorpusCheck


def kvlint_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The real command line, as a user runs it, in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "kvlint", *args], cwd=cwd, capture_output=True, text=True, timeout=900
    )


# Runs a command and appends the peak RSS (KiB on Linux) of its process tree to
# stderr: a parent of its own, so no other test's child process counts.
_MEASURED = (
    "import resource, subprocess, sys; result = subprocess.run(sys.argv[1:]); "
    "sys.stderr.write('\\npeak-rss-kib %d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
    "sys.exit(result.returncode)"
)


def kvlint_json(cwd: Path, *args: str) -> CorpusCheck:
    """`kvlint check --format json ARGS` in `cwd`, which must exit 0 or 1."""
    result = subprocess.run(
        [sys.executable, "-c", _MEASURED, sys.executable, "-m", "kvlint", "check", "--format", "json", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900,
    )
    if result.returncode not in (0, 1):
        raise AssertionError(f"kvlint check {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    peak_kib = int(result.stderr.rstrip().rsplit("peak-rss-kib ", 1)[1])
    return CorpusCheck(result, json.loads(result.stdout), peak_kib * 1024)


def python_files(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*.py"))}


def round_trip(source: Path, tree: Path) -> CorpusRoundTrip:
    """The round trip on a fresh copy of `source` at `tree` (with an empty kvlint.toml)."""
    shutil.copytree(source, tree)
    (tree / "kvlint.toml").write_text("")
    before = python_files(tree)
    first = kvlint_json(tree, "--jobs", "2", ".")
    fix = kvlint_cli(tree, "fix", "--unsafe", "--jobs", "2", ".")
    after_fix = python_files(tree)
    refix = kvlint_cli(tree, "fix", "--unsafe", "--jobs", "2", ".")
    after_refix = python_files(tree)
    last = kvlint_json(tree, "--jobs", "2", ".")
    return CorpusRoundTrip(tree, before, first, fix, after_fix, refix, after_refix, last)


class CorpusUnavailable(RuntimeError):
    """The sglang wheel cannot be downloaded or read; the message says why."""


def sglang_version() -> str:
    return os.environ.get("KVLINT_SGLANG_VERSION", SGLANG_VERSION)


def corpus_dir() -> Path:
    configured = os.environ.get("KVLINT_CORPUS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "kvlint-corpus"


def sglang_srt(version: Optional[str] = None) -> Path:
    """The `sglang/srt` directory of the pinned wheel (or of `version`), downloading it on first use."""
    version = version or sglang_version()
    base = corpus_dir()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CorpusUnavailable(f"cannot create corpus directory {base}: {exc.strerror or exc}") from None
    with open(base / ".lock", "w") as lock:
        # Held while downloading, so two sessions starting together download once.
        fcntl.flock(lock, fcntl.LOCK_EX)
        existing = base / f"sglang-{version}"
        if (existing / COMPLETE_MARKER).is_file():
            return existing / "sglang" / "srt"
        return _download_and_extract(base, version)


def sglang_srt_or_skip() -> Path:
    """`sglang_srt()`, or skip the calling test with the reason it is unavailable."""
    import pytest

    try:
        return sglang_srt()
    except CorpusUnavailable as exc:
        pytest.skip(f"real sglang corpus unavailable: {exc}")


def _download_and_extract(base: Path, version: str) -> Path:
    with tempfile.TemporaryDirectory(dir=base, prefix="download-") as scratch:
        wheel = _pip_download(Path(scratch), version)
        version = wheel.name.split("-")[1]
        staging = Path(scratch) / "tree"
        count = _extract_srt(wheel, staging)
        if count == 0:
            raise CorpusUnavailable(f"{wheel.name} holds no {SRT_PREFIX}*.py files")
        (staging / COMPLETE_MARKER).write_text(f"{wheel.name}\n{count} files\n")
        target = base / f"sglang-{version}"
        if target.exists():
            shutil.rmtree(target)  # an interrupted extraction: it has no marker
        staging.rename(target)
    return target / "sglang" / "srt"


def _pip_download(into: Path, version: str) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--timeout", "30", "--retries", "1",
        "-d", str(into), f"sglang=={version}",
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CorpusUnavailable(f"`pip download sglang=={version}` took longer than {DOWNLOAD_TIMEOUT_S} s") from None
    except OSError as exc:
        raise CorpusUnavailable(f"cannot run pip: {exc}") from None
    wheels = sorted(into.glob("sglang-*.whl"))
    if result.returncode != 0 or not wheels:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CorpusUnavailable(f"`pip download --no-deps sglang=={version}` failed: {tail[0]}")
    return wheels[0]


def _extract_srt(wheel: Path, into: Path) -> int:
    count = 0
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                if member.filename.startswith(SRT_PREFIX) and member.filename.endswith(".py"):
                    archive.extract(member, into)
                    count += 1
    except zipfile.BadZipFile as exc:
        raise CorpusUnavailable(f"{wheel.name} is not a valid wheel: {exc}") from None
    return count


if __name__ == "__main__":
    try:
        print(sglang_srt())
    except CorpusUnavailable as exc:
        sys.exit(f"corpus: {exc}")
