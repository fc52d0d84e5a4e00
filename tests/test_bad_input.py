"""Hostile and unusual input: a clear finding or error line for the bad path,
the documented exit code, the rest of the run unaffected, never a traceback.

Every bad file carries the trigger words (`forward_batch.out_cache_loc`,
`set_kv_buffer`), because a file without them is never parsed; a healthy
`good.py` beside it must still be flagged.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from click.testing import CliRunner, Result

import kvlint.running.discovery
import kvlint.running.engine
from kvlint.cli import main
from pinned import pin_fixes_in_tmp  # noqa: F401  (one-file trees pin the APIs fixes call)

# click < 8.2 mixes stderr into stdout unless told not to; 8.2 always separates them.
SEPARATE_STDERR = {"mix_stderr": False} if "mix_stderr" in inspect.signature(CliRunner).parameters else {}
# A line KV101 may flag: trigger words alone (a comment) leave no rule to run, and nothing is parsed with LibCST.
TRIGGERS = "pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
BARE = (
    "def forward(pool, layer, forward_batch, k, v):\n"
    "    pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
)


def invoke(*args: str) -> Result:
    return CliRunner(**SEPARATE_STDERR).invoke(main, list(args), catch_exceptions=False)


def check_json(*args: str) -> tuple[int, dict, str]:
    result = invoke("check", "--no-cache", "--format", "json", *args)
    return result.exit_code, json.loads(result.stdout), result.stderr


def by_path(report: dict, key: str) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for item in report[key]:
        grouped.setdefault(item["path"], []).append(item)
    return grouped


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    (in_tmp / "good.py").write_text(BARE)
    return in_tmp


def assert_good_file_still_checked(report: dict) -> None:
    assert [f["code"] for f in by_path(report, "findings")["good.py"]] == ["KV101"]


# Each case writes one bad file and names the KV000 message it must produce.
KV000_CASES: dict[str, tuple[Callable[[Path], None], int, str]] = {
    "syntax_error": (lambda p: p.write_text(TRIGGERS + "def f(:\n    pass\n"), 2, "invalid syntax"),
    "invalid_utf8": (lambda p: p.write_bytes(TRIGGERS.encode() + b'x = "\xff"\n'), 2, "not valid utf-8 text: byte 0xff"),
    "binary_file": (
        lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) + TRIGGERS.encode()),
        2,  # bytes(range(256)) holds a newline before the first invalid byte
        "not valid utf-8 text: byte 0x80",
    ),
    "null_bytes": (lambda p: p.write_bytes(TRIGGERS.encode() + b"x = 1\x00\n"), 1, "null bytes"),
    "unknown_coding_cookie": (
        lambda p: p.write_text("# -*- coding: klingon -*-\n" + TRIGGERS),
        1,
        "unknown encoding in the coding cookie: klingon",
    ),
    "deeply_nested_brackets": (
        lambda p: p.write_text(TRIGGERS + "x = " + "(" * 50_000 + "1" + ")" * 50_000 + "\n"),
        2,
        "too many nested parentheses",
    ),
    # Valid Python, but a LibCST visitor would recurse 5,000 levels.
    "long_operator_chain": (
        lambda p: p.write_text(TRIGGERS + "x = " + " + ".join(["a"] * 5_000) + "\n"),
        1,
        "too deeply nested",
    ),
    "nested_calls_under_cpython_limit": (
        lambda p: p.write_text(TRIGGERS + "x = " + "f(" * 150 + "1" + ")" * 150 + "\n"),
        2,
        "levels deep, more than the 100 kvlint parses",
    ),
}


@pytest.mark.parametrize("case", sorted(KV000_CASES))
def test_unparsable_file_is_kv000_and_the_rest_is_checked(tree: Path, case: str) -> None:
    write, line, message = KV000_CASES[case]
    write(tree / "bad.py")
    code, report, _ = check_json(".")
    assert code == 1
    (finding,) = by_path(report, "findings")["bad.py"]
    assert finding["code"] == "KV000"
    assert finding["line"] == line
    assert message in finding["message"]
    assert_good_file_still_checked(report)
    assert report["errors"] == []


def test_file_without_trigger_words_is_counted_but_never_parsed(tree: Path) -> None:
    (tree / "broken_but_irrelevant.py").write_text("def f(:\n")
    (tree / "empty.py").write_text("")
    code, report, _ = check_json(".")
    assert code == 1
    assert report["files_in_scope"] == 3
    assert report["files_parsed"] == 1
    assert set(by_path(report, "findings")) == {"good.py"}


def test_empty_file_with_nothing_else_is_clean(in_tmp: Path) -> None:
    (in_tmp / "empty.py").write_text("")
    code, report, _ = check_json(".")
    assert (code, report["files_in_scope"], report["findings"], report["errors"]) == (0, 1, [], [])


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("latin1.py", b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + BARE.encode()),
        ("bom.py", b"\xef\xbb\xbf" + BARE.encode()),
        ("crlf.py", BARE.replace("\n", "\r\n").encode()),
        ("mixed.py", b"import os\r\n" + BARE.encode()),
        ("tabs_and_form_feeds.py", BARE.replace("    ", "\t").encode() + b"\x0c\nx = 1\n"),
    ],
)
def test_unusual_but_valid_encodings_and_whitespace_are_checked_and_fixed_in_kind(
    in_tmp: Path, name: str, data: bytes
) -> None:
    path = in_tmp / name
    path.write_bytes(data)
    code, report, _ = check_json(".")
    assert code == 1
    assert [f["code"] for f in report["findings"]] == ["KV101"]

    result = invoke("fix", "--no-cache", ".")
    assert result.exit_code == 0, result.stderr
    fixed = path.read_bytes()
    assert b"KVWriteLoc.for_batch(forward_batch)" in fixed
    # Everything but the import line and the rewritten call is byte-identical.
    body = data.removeprefix(b"\xef\xbb\xbf")
    kept = [line for line in body.splitlines(keepends=True) if b"set_kv_buffer" not in line]
    fixed_lines = fixed.splitlines(keepends=True)
    assert all(line in fixed_lines for line in kept)
    assert fixed.startswith(b"\xef\xbb\xbf") == data.startswith(b"\xef\xbb\xbf")
    if b"\r\n" in data and b"\n    pool" not in data:
        assert b"\n" not in fixed.replace(b"\r\n", b"")  # all-CRLF stays all-CRLF
    compile(fixed, name, "exec")


def test_ten_megabyte_generated_file_is_reported_not_parsed(tree: Path) -> None:
    rows = "".join(f"    ({i}, {i * 7 % 1013}, 'entry_{i}'),\n" for i in range(400_000))
    (tree / "generated.py").write_text(BARE + "TABLE = [\n" + rows + "]\n")
    assert (tree / "generated.py").stat().st_size > 10_000_000
    code, report, _ = check_json(".")
    assert code == 1
    (error,) = report["errors"]
    assert error["path"] == "generated.py"
    assert "not checked: 1" in error["message"] and "larger than" in error["message"]
    assert_good_file_still_checked(report)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda t: (t / "x.py").mkdir(), "skipped: a directory, not a Python file"),
        (lambda t: (t / "x.py").symlink_to(t / "nowhere.py"), "skipped: broken symlink"),
        (lambda t: ((t / "x.py").symlink_to(t / "y.py"), (t / "y.py").symlink_to(t / "x.py")), "skipped: symlink loop"),
        (lambda t: os.mkfifo(t / "x.py"), "skipped: not a regular file"),
    ],
    ids=["directory_named_x_py", "broken_symlink", "symlink_loop", "fifo"],
)
def test_unusable_path_is_reported_and_does_not_fail_the_run(in_tmp: Path, make, message: str) -> None:
    (in_tmp / "clean.py").write_text("x = 1\n")
    make(in_tmp)
    code, report, _ = check_json(".")
    assert code == 0
    assert message in [e["message"] for e in by_path(report, "errors")["x.py"]]
    assert report["files_in_scope"] == 1


def test_symlink_out_of_the_tree_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text(BARE)
    project = tmp_path / "project"
    project.mkdir()
    (project / "kvlint.toml").write_text("")
    (project / "link.py").symlink_to(outside / "secret.py")
    monkeypatch.chdir(project)
    code, report, _ = check_json(".")
    assert (code, report["findings"]) == (0, [])
    assert report["errors"] == [{"path": "link.py", "message": "skipped: symlink pointing outside the tree, not followed"}]


def test_link_to_a_file_in_scope_is_checked_once(tree: Path) -> None:
    (tree / "alias.py").symlink_to(tree / "good.py")
    code, report, _ = check_json(".")
    assert (code, report["files_in_scope"], len(report["findings"])) == (1, 1, 1)


def lock(monkeypatch: pytest.MonkeyPatch, name: str):
    """Make reading `name` fail as for an unreadable file; returns the real reader.

    Tests run as root, for whom chmod 000 changes nothing, so the failing open is injected.
    """
    real_read_bytes = Path.read_bytes

    def read_bytes(path: Path) -> bytes:
        if path.name == name:
            raise PermissionError(13, "Permission denied", str(path))
        return real_read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    return real_read_bytes


def test_unreadable_file_is_an_error_line(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree / "locked.py").write_text(BARE)
    lock(monkeypatch, "locked.py")
    code, report, _ = check_json(".")
    assert code == 1
    assert report["errors"] == [{"path": "locked.py", "message": "cannot read: Permission denied"}]
    assert_good_file_still_checked(report)


def test_file_deleted_during_the_run_is_an_error_line(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree / "doomed.py").write_text(BARE)
    real_discover = kvlint.running.discovery.discover

    def discover_then_delete(*args, **kwargs):
        scope = real_discover(*args, **kwargs)
        # Once: the run discovers again for its context (`tree_of`), after the file is gone.
        (tree / "doomed.py").unlink(missing_ok=True)
        return scope

    monkeypatch.setattr(kvlint.running.discovery, "discover", discover_then_delete)
    code, report, _ = check_json(".")
    assert code == 1
    assert report["errors"] == [{"path": "doomed.py", "message": "file vanished before it could be read"}]
    assert_good_file_still_checked(report)


def test_path_given_twice_is_checked_once(tree: Path) -> None:
    code, report, _ = check_json("good.py", "./good.py", ".")
    assert (code, report["files_in_scope"], len(report["findings"])) == (1, 1, 1)


def test_nonexistent_path_is_a_usage_error(tree: Path) -> None:
    result = invoke("check", "good.py", "missing.py")
    assert result.exit_code == 2
    assert result.stderr.strip() == "kvlint: error: path does not exist: missing.py"


def test_hostile_tree_in_a_real_process_never_shows_a_traceback(tree: Path) -> None:
    for name, (write, _line, _message) in KV000_CASES.items():
        write(tree / f"{name}.py")
    (tree / "dir.py").mkdir()
    (tree / "broken.py").symlink_to(tree / "nowhere.py")
    (tree / "loop.py").symlink_to(tree / "loop.py")
    os.mkfifo(tree / "fifo.py")
    for command in (["check", "--jobs", "2"], ["fix", "--jobs", "2"]):
        result = subprocess.run(
            [sys.executable, "-m", "kvlint", *command, "--no-cache", "."],
            capture_output=True, text=True, timeout=300,
        )
        assert "Traceback" not in result.stdout + result.stderr
        assert result.returncode == 1, result.stderr
    assert "KVWriteLoc.for_batch(forward_batch)" in (tree / "good.py").read_text()


def test_a_file_that_could_not_be_checked_fails_an_otherwise_clean_run(
    in_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI must not pass on a file kvlint never read: it fails like a finding (exit 1).
    (in_tmp / "clean.py").write_text("x = 1\n")
    (in_tmp / "locked.py").write_text(BARE)
    real_read_bytes = lock(monkeypatch, "locked.py")
    code, report, _ = check_json(".")
    assert (code, report["findings"]) == (1, [])
    assert report["errors"] == [{"path": "locked.py", "message": "cannot read: Permission denied"}]
    monkeypatch.setattr("kvlint.running.checker.too_large", lambda data: "not checked: too large" if b"pool" in data else None)
    monkeypatch.setattr(Path, "read_bytes", real_read_bytes)
    code, report, _ = check_json(".")
    assert (code, report["findings"]) == (1, [])
    assert [e["path"] for e in report["errors"]] == ["locked.py"]
