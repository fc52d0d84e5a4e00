"""KV301's facts of one file, read from CPython's tree: what counts in a file read whole and in one that is not.

A file holding the batch class or the child builder is read whole. In any
other file only module-level code, class headers and the functions naming the
batch class count, so an edit elsewhere in it keeps the facts (the language
server relies on that). A file no per-file rule inspects is not parsed with
LibCST at all.
"""

from __future__ import annotations

import ast

import libcst as cst
import pytest

from kvlint.api.config import TboConfig
from kvlint.api.contract import Contract
from kvlint.api.rule import SourceFile
from kvlint.rules.tbo._facts import FileFacts
from kvlint.rules.tbo.tbo_field_not_copied import TboFieldNotCopied
from kvlint.running.checker import check_bytes
from kvlint.running.plan import CheckRequest

OTHER_FILE = """\
from dataclasses import dataclass

from batch import ForwardBatch


@dataclass
class Options:
    depth: int = 2
    made = ForwardBatch(spec_info=1)

    def idle(self, batch):
        batch.spec_info = 2

    def attach(self, batch: ForwardBatch):
        batch.spec_info = 3
"""
BATCH_FILE = """\
from dataclasses import dataclass


@dataclass
class ForwardBatch:
    spec_info: object = None

    def prepare(self):
        self.spec_info = 4
"""


def _facts(text: str, whole: bool) -> FileFacts:
    rule = TboFieldNotCopied(TboConfig())
    facts = rule.extract(SourceFile("x.py", text, ast.parse(text), Contract(), whole))
    assert isinstance(facts, FileFacts)
    return facts


def _written(facts: FileFacts) -> list[tuple[int, str]]:
    return [(assignment.line, assignment.snippet) for assignment in facts.assignments]


def test_a_file_read_whole_gives_every_field_and_class_level_write() -> None:
    facts = _facts(OTHER_FILE, whole=True)
    assert [field.name for field in facts.classes[0].fields] == ["depth"]
    assert _written(facts) == [(9, "spec_info=1"), (15, "batch.spec_info = 3")]


def test_a_file_not_read_whole_gives_class_headers_and_the_functions_naming_the_batch() -> None:
    facts = _facts(OTHER_FILE, whole=False)
    assert facts.classes[0].is_dataclass and facts.classes[0].fields == ()
    assert _written(facts) == [(15, "batch.spec_info = 3")]


def test_methods_of_the_batch_class_count_without_naming_it() -> None:
    facts = _facts(BATCH_FILE, whole=True)
    assert _written(facts) == [(9, "self.spec_info = 4")]
    assert facts.classes[0].fields[0].span.line == 6


def test_a_file_only_a_project_rule_reads_is_not_parsed_with_libcst(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libcst(*args: object, **kwargs: object) -> None:
        raise AssertionError("LibCST parsed a file no per-file rule inspects")

    monkeypatch.setattr(cst, "parse_module", no_libcst)
    request = CheckRequest(path="x.py", rules=(), contract=Contract(), project_rules=(TboFieldNotCopied(TboConfig()),))
    result = check_bytes(request, OTHER_FILE.encode())
    assert result.outcome.parsed and not result.outcome.errors
    assert _written(result.facts["KV301"]) == [(15, "batch.spec_info = 3")]
