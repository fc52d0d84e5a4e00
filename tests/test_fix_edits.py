"""Fixes as text edits: the line diff both SARIF `fixes` and the language server's quick fixes carry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kvlint.running.fix_edits import TextEdit, apply_edits, text_edits

LINES = st.lists(st.sampled_from(["a\n", "b\n", "\n", "x = 1\r\n", "tail", "  y(z)\n", "é\n"]), max_size=12)


@given(LINES, LINES)
def test_applying_the_edits_of_two_texts_turns_the_first_into_the_second(before: list[str], after: list[str]) -> None:
    old, new = "".join(before), "".join(after)
    edits = text_edits(old, new)
    assert apply_edits(old, edits) == new
    assert (not edits) == (old == new)


def test_an_added_import_is_an_insertion_and_a_changed_line_a_replacement() -> None:
    old = "def f():\n    g(a)\n"
    new = "from m import h\ndef f():\n    g(h(a))\n"
    assert text_edits(old, new) == (
        TextEdit(1, 1, 1, 1, "from m import h\n"),
        TextEdit(2, 1, 3, 1, "    g(h(a))\n"),
    )


def test_a_last_line_without_newline_ends_inside_that_line() -> None:
    assert text_edits("a\nb", "a\nc") == (TextEdit(2, 1, 2, 2, "c"),)


def test_check_never_imports_the_language_server_libraries(tmp_path: Path) -> None:
    (tmp_path / "kvlint.toml").write_text("")
    (tmp_path / "bad.py").write_text("def f(pool, layer, fb, k, v):\n    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n")
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from kvlint.cli import main\n"
        "out = CliRunner().invoke(main, ['check', '--no-cache', '--format', 'sarif', '.']).stdout\n"
        "assert '\"fixes\"' in out, out\n"
        "print(sorted(m for m in ('pygls', 'lsprotocol') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
