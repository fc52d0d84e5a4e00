"""The project index's views are reused after an edit only when resolving again would read the same.

Each edit is followed by a warm run and a `--no-cache` run: their findings must be the same, and
the warm one resolves again exactly when the edit changed something a resolution read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvlint.api.config import load_config
from kvlint.api.helpers import HelperFacts
from kvlint.running import project_facts
from kvlint.running.engine import RunOptions, run
from kvlint.store.file_words import answers_alike, read_words
from kvlint.store.resolved_views import Reread, ResolvedViews, still_answers

BASE = (
    "class AttnBase:\n"
    "    def _kv_write_loc(self, forward_batch):\n"
    "        return forward_batch.out_cache_loc\n"
)
MARKED_BASE = BASE.replace("return forward_batch.out_cache_loc", "return KVWriteLoc.for_batch(forward_batch)")
SUB = (
    "from eng.attn.base import AttnBase\n\n\n"
    "class MLA(AttnBase):\n"
    "    def forward(self, layer, forward_batch, k, v):\n"
    "        pool = forward_batch.token_to_kv_pool\n"
    "        pool.set_kv_buffer(layer, self._kv_write_loc(forward_batch), k, v)\n"
)
MODEL = "def add(a, b):\n    return a + b\n"


class Resolutions:
    """Counts the times the index resolves the views instead of taking them from the cache."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = project_facts._views

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(project_facts, "_views", counting)

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in {"eng/attn/base.py": BASE, "eng/attn/mla.py": SUB, "eng/model.py": MODEL}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def findings(cache: bool, paths: tuple[str, ...] = (".",)) -> list[dict[str, Any]]:
    result = run(load_config(), RunOptions(paths=tuple(Path(path) for path in paths), cache=cache, jobs=1))
    return [finding.to_json() for finding in result.findings]


def warm_equals_cold(paths: tuple[str, ...] = (".",)) -> list[dict[str, Any]]:
    warm = findings(True, paths)
    assert warm == findings(False, paths)
    return warm


def in_caller(found: list[dict[str, Any]]) -> list[str]:
    return [finding["message"] for finding in found if finding["path"] == "eng/attn/mla.py"]


def test_an_edit_to_a_file_no_resolution_read_keeps_the_views(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = warm_equals_cold()
    assert len(before) == 2
    resolutions = Resolutions(monkeypatch)
    # A call and a definition of names no round asked about.
    (tree / "eng/model.py").write_text("# moved\n" + MODEL + "\n\ndef mul(a, b):\n    return float(a) * b\n")
    assert findings(True, ("eng/model.py",)) == []
    assert findings(True) == before
    assert resolutions.take() == 0


def test_a_comment_after_a_helper_keeps_the_views(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = in_caller(warm_equals_cold())
    resolutions = Resolutions(monkeypatch)
    (tree / "eng/attn/base.py").write_text(BASE + "# touched\n")
    assert in_caller(findings(True, ("eng/attn/mla.py",))) == before
    assert resolutions.take() == 0


def test_lines_moved_in_a_helpers_file_move_its_callers_finding(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [before] = in_caller(warm_equals_cold())
    assert "eng/attn/base.py:3" in before
    resolutions = Resolutions(monkeypatch)
    summarised: list[str] = []
    summarize = project_facts._summarize
    monkeypatch.setattr(project_facts, "_summarize", lambda path, *rest: summarised.append(path) or summarize(path, *rest))
    (tree / "eng/attn/base.py").write_text("# moved\n# down\n" + BASE)
    [after] = in_caller(findings(True, ("eng/attn/mla.py",)))
    assert resolutions.take() == 1
    # Read once, to compare with the summary before the edit; the resolution finds it in the cache.
    assert summarised == ["eng/attn/base.py"]
    assert "eng/attn/base.py:5" in after
    assert in_caller(warm_equals_cold()) == [after]


def test_a_helper_that_loses_its_fact_then_gains_it_again(tree: Path) -> None:
    assert len(warm_equals_cold()) == 2
    (tree / "eng/attn/base.py").write_text(MARKED_BASE)
    assert warm_equals_cold(("eng/attn/mla.py",)) == []
    assert warm_equals_cold() == []
    (tree / "eng/attn/base.py").write_text(BASE)
    assert len(warm_equals_cold(("eng/attn/mla.py",))) == 1


def test_a_new_caller_in_a_file_no_resolution_read_changes_the_helpers_fact(tree: Path) -> None:
    """The helper is reported, with its fix, while every caller passes its result to a door; a caller
    keeping it is read too."""
    [helper] = [finding for finding in warm_equals_cold() if finding["path"] == "eng/attn/base.py"]
    assert helper["fix"] is not None
    keeping = "\n\nclass Keeper(AttnBase):\n    def keep(self, fb):\n        return self._kv_write_loc(fb)\n"
    (tree / "eng/model.py").write_text("from eng.attn.base import AttnBase\n" + MODEL + keeping)
    warm_equals_cold(("eng/model.py",))
    assert warm_equals_cold(("eng/attn/base.py",)) == []


def test_a_deleted_helper_file(tree: Path) -> None:
    assert len(warm_equals_cold()) == 2
    (tree / "eng/attn/base.py").unlink()
    assert warm_equals_cold(("eng/attn/mla.py",)) == []
    assert warm_equals_cold() == []


def test_a_name_read_from_the_bytes_keeps_the_views_only_for_the_same_bytes(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper's name beyond ASCII words is searched in every file's bytes, so any edit resolves again."""
    (tree / "eng/attn/base.py").write_text(BASE.replace("_kv_write_loc", "_kv_\u00e9crire"))
    (tree / "eng/attn/mla.py").write_text(SUB.replace("_kv_write_loc", "_kv_\u00e9crire"))
    assert len(in_caller(warm_equals_cold())) == 1
    resolutions = Resolutions(monkeypatch)
    assert len(in_caller(findings(True))) == 1
    assert resolutions.take() == 0
    (tree / "eng/model.py").write_text(MODEL + "# edited\n")
    assert len(in_caller(findings(True))) == 1
    assert resolutions.take() == 1


def resolved(by_names: bool = True) -> ResolvedViews:
    return ResolvedViews({"a.py": HelperFacts()}, {"a.py": b"1", "b.py": b"2"}, frozenset({"a.py"}), by_names,
                         frozenset({b"helper"}), frozenset({b"helper"}))


def test_another_set_of_paths_is_never_answered() -> None:
    def reread(path: str, then: bytes, summarised: bool) -> Reread:
        raise AssertionError("nothing to read again")

    assert still_answers(resolved(), {"a.py": b"1"}, reread) is None
    assert still_answers(resolved(), {"a.py": b"1", "b.py": b"2", "c.py": b"3"}, reread) is None
    assert still_answers(resolved(), {"a.py": b"1", "b.py": b"2"}, reread) == []
    assert still_answers(None, {"a.py": b"1"}, reread) is None


@pytest.mark.parametrize(
    ("again", "kept"),
    [
        (Reread(True), True),
        (Reread(False), False),
        (Reread(True, ("summary", "summary")), True),
        (Reread(True, ("summary", "other summary")), False),
        # A file that does not parse has no summary to compare.
        (Reread(True, (None, None)), False),
    ],
)
def test_a_changed_file_must_read_as_before(again: Reread, kept: bool) -> None:
    asked = []

    def reread(path: str, then: bytes, summarised: bool) -> Reread:
        asked.append((path, then, summarised))
        return again

    found = still_answers(resolved(), {"a.py": b"new", "b.py": b"2"}, reread)
    assert asked == [("a.py", b"1", True)]
    assert found == (["a.py"] if kept else None)
    assert still_answers(resolved(by_names=False), {"a.py": b"new", "b.py": b"2"}, reread) is None


SEEDS = (b"out_cache_loc",)
ASKED = frozenset({b"helper"})


@pytest.mark.parametrize(
    ("now", "alike"),
    [
        (b"x = other(fb)\ny = helper(fb)\n", True),
        (b"y = helper(fb)\n", True),
        (b"x = other(fb)\n", False),
        (b"x = other(fb)\ny = helper(fb)\ndef helper(fb):\n    pass\n", False),
        (b"x = other(fb)\ny = helper(fb.out_cache_loc)\n", False),
    ],
)
def test_names_are_alike_when_each_asked_question_gets_the_same_answer(now: bytes, alike: bool) -> None:
    then = read_words(b"x = other(fb)\ny = helper(fb)\n", SEEDS)
    assert answers_alike(read_words(now, SEEDS), then, ASKED, ASKED) is alike
