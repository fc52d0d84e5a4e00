"""The project index's name rounds read each file's called and defined names once per content."""

from __future__ import annotations

from pathlib import Path

import pytest

import kvlint.store.file_words
from kvlint.store.result_cache import ResultCache, digest
from kvlint.store.file_words import FileWords, WordIndex, read_words

SOURCES = {
    "plain.py": b"x = first(fb)\n",
    "method.py": b"loc = self.pool.first(fb)\n",
    "longer.py": b"loc = not_first(fb)\ny = first (fb)\n",
    "defines.py": b"def first(fb):\n    return fb\n",
    "unicode.py": "def caf\u00e9(fb):\n    return caf\u00e9(fb)\n".encode(),
}


SEEDS = (b"out_cache_loc", b"k_buffer")


def index(sources: dict[str, bytes], cache: ResultCache | None = None) -> WordIndex:
    return WordIndex(sources, cache, {path: digest(data) for path, data in sources.items()}, SEEDS)


def test_a_call_is_the_name_or_a_method_of_it_never_a_longer_name() -> None:
    # `def first(` reads as a call too: the index asks for files naming a helper, as it always did.
    assert index(SOURCES).calling({"first"}) == ["plain.py", "method.py", "defines.py"]


def test_a_definition_is_def_name() -> None:
    assert index(SOURCES).defining({"first", "unknown"}) == ["defines.py"]


def test_a_name_beyond_ascii_words_is_looked_for_in_the_bytes() -> None:
    words = index(SOURCES)
    assert words.calling({"caf\u00e9"}) == ["unicode.py"] and words.defining({"caf\u00e9"}) == ["unicode.py"]


def test_one_edited_file_is_the_only_one_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ResultCache(tmp_path, "key")
    index(SOURCES, cache).calling({"first"})
    read = _count_reads(monkeypatch)
    edited = {**SOURCES, "longer.py": b"loc = first(fb)\n"}
    assert index(edited, cache).calling({"first"}) == ["plain.py", "method.py", "longer.py", "defines.py"]
    assert read == [b"loc = first(fb)\n"]


def test_a_seed_word_counts_anywhere_in_the_bytes_and_is_read_once_per_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A seed inside a longer name or a comment seeds the file, as the index's first round always
    # read it; a run after one edit searches that file's bytes alone.
    sources = {
        "plain.py": b"x = first(fb)\n",
        "longer.py": b"k = self.mla_k_buffer[0]\n",
        "comment.py": b"# uses fb.out_cache_loc\n",
    }
    cache = ResultCache(tmp_path, "key")
    assert index(sources, cache).seeded() == ["longer.py", "comment.py"]
    read = _count_reads(monkeypatch)
    edited = {**sources, "plain.py": b"x = first(fb.out_cache_loc)\n"}
    assert index(edited, cache).seeded() == ["plain.py", "longer.py", "comment.py"]
    assert read == [edited["plain.py"]]


def test_reading_every_file_at_once_reads_only_what_the_cache_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ResultCache(tmp_path, "key")
    index(SOURCES, cache).read_all(jobs=1)
    edited = {**SOURCES, "longer.py": b"loc = first(fb)\n"}
    expected = (index(edited).calling({"first"}), index(edited).seeded())
    read = _count_reads(monkeypatch)
    words = index(edited, cache)
    words.read_all(jobs=1)
    assert read == [b"loc = first(fb)\n"]
    assert (words.calling({"first"}), words.seeded()) == expected
    assert read == [b"loc = first(fb)\n"], "what read_all read is not read again"


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bytes `read_words` reads from here on."""
    read: list[bytes] = []

    def counting(data: bytes, seeds: tuple[bytes, ...]) -> FileWords:
        read.append(data)
        return read_words(data, seeds)

    monkeypatch.setattr(kvlint.store.file_words, "read_words", counting)
    return read
