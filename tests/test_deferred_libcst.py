"""LibCST is loaded only when a rule reads a tree it parsed (`kvlint.running.deferred_libcst`).

Each case runs in a fresh interpreter: the test session has LibCST imported already, and then
the deferral rightly does nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

# Trigger words of KV201 and KV203 (`.view(`, `page_size`, a buffer accessor), each in another
# function: the file is checked, and every rule's `may_flag` says no.
CLEARED = """\
def pages(page_size):
    return page_size * 2


def shaped(x):
    return x.view(-1, 4)


def buffers(pool, layer):
    return pool.get_key_buffer(layer.layer_id)
"""

FLAGGED = """\
def forward(self, q, k, v, layer, forward_batch):
    forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
"""

# One line per checked path: its findings, whether the rules are imported, whether LibCST is loaded.
RUN = """
import contextlib, io, json, sys
{prelude}
from kvlint.face.cli import main

for path in sys.argv[1:]:
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        try:
            main(["check", "--no-cache", "--format", "json", path])
        except SystemExit:
            pass
    rules = "kvlint.rules.layout.stride_silent_view" in sys.modules
    print(json.dumps([json.loads(report.getvalue())["findings"], rules, "libcst._nodes.module" in sys.modules]))
"""


def _python(script: str, *args: str, cwd: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=cwd, capture_output=True, text=True, check=True, timeout=120
    )
    return result.stdout.strip().splitlines()


def _runs(lines: list[str]) -> list[tuple[list[dict[str, object]], bool, bool]]:
    return [tuple(json.loads(line)) for line in lines]  # type: ignore[misc]


def test_a_file_no_rule_may_flag_is_checked_without_loading_libcst(tmp_path: Path) -> None:
    (tmp_path / "cleared.py").write_text(CLEARED)
    (tmp_path / "flagged.py").write_text(FLAGGED)
    cleared, flagged = _runs(_python(RUN.format(prelude=""), "cleared.py", "flagged.py", cwd=tmp_path))
    assert cleared == ([], True, False)
    assert [(f["code"], f["line"], f["column"]) for f in flagged[0]] == [("KV101", 2, 57)]
    assert flagged[1:] == (True, True)


def test_findings_and_fixes_are_those_of_libcst_imported_up_front(tmp_path: Path) -> None:
    (tmp_path / "flagged.py").write_text(FLAGGED)
    [deferred] = _runs(_python(RUN.format(prelude=""), "flagged.py", cwd=tmp_path))
    [up_front] = _runs(_python(RUN.format(prelude="import libcst"), "flagged.py", cwd=tmp_path))
    assert deferred[0] == up_front[0] != []
    assert all(finding["fix"] for finding in deferred[0])


def test_the_stand_in_becomes_libcst_on_first_read(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        from kvlint.running.deferred_libcst import defer, load
        defer()
        import libcst as cst
        print("libcst._nodes.module" in sys.modules)
        name = cst.Name
        import libcst.matchers
        from libcst import parse_module
        real = sys.modules["libcst"]
        print(name is real.Name, parse_module is real.parse_module, load() is real, cst.Module is real.Module)
        print(libcst.matchers.Name.__module__, cst.matchers is libcst.matchers)
    """)
    assert _python(script, cwd=tmp_path) == ["False", "True True True True", "libcst.matchers True"]


def test_nothing_is_deferred_once_libcst_is_imported(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys, libcst
        from kvlint.running.deferred_libcst import defer, load
        defer()
        print(sys.modules["libcst"] is libcst, load() is libcst)
    """)
    assert _python(script, cwd=tmp_path) == ["True True"]
