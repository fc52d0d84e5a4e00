"""KV301: a split inside the batch's constructor, and values that are never None.

Each tree is an engine whose batch constructor (`init_new`) splits the batch
it builds, as older SGLang releases and some forks do: its callers pass no
batch, they get one back, already split, and hand it to the model.
"""

from __future__ import annotations

from typing import Optional

import pytest

from kvlint.api.types import Finding
from kvlint.rules.tbo.tbo_field_not_copied import TboFieldNotCopied
from kvlint.testing import run_project

BATCH = """\
from dataclasses import dataclass
from typing import Optional

from eng.tbo import Preparer


@dataclass
class ForwardBatch:
    input_ids: object
    extra: Optional[object] = None

    @classmethod
    def init_new(cls, schedule_batch, runner):
        ret = cls(input_ids=schedule_batch.input_ids{init_extra})
{before_split}        Preparer.prepare(ret)
{after_split}        return ret

    def set_extra(self, value):
        self.extra = {set_extra}
"""

TBO = """\
from eng.batch import ForwardBatch


class Preparer:
    @classmethod
    def prepare(cls, batch: ForwardBatch):
        batch.children = [cls.filter_batch(batch, start=0), cls.filter_batch(batch, start=1)]

    @classmethod
    def filter_batch(cls, batch: ForwardBatch, *, start):
        output_dict = dict()
        output_dict["input_ids"] = batch.input_ids[start:]
        return ForwardBatch(**output_dict)
"""

WORKER = """\
from eng.batch import ForwardBatch


class Worker:
    def run(self, schedule_batch):
        forward_batch = ForwardBatch.init_new(schedule_batch, self.model_runner)
{worker_body}        return self.model_runner.forward(forward_batch)
"""

RUNNER = """\
from eng.batch import ForwardBatch


class ModelRunner:
    def forward(self, forward_batch: ForwardBatch):
        return self.model.forward(forward_batch.input_ids, forward_batch)
"""

MODEL = """\
from eng.batch import ForwardBatch


class Model:
    def forward(self, input_ids, forward_batch: ForwardBatch):
{model_body}        return self.layers(input_ids)


class Attention:
    def forward(self, q, forward_batch):
{layer_body}        return q
"""


def tree(
    *, init_extra: str = "", before_split: str = "", after_split: str = "", worker_body: str = "",
    model_body: str = "", layer_body: str = "", set_extra: str = "value",
) -> dict[str, str]:
    batch = BATCH.format(init_extra=init_extra, before_split=before_split, after_split=after_split, set_extra=set_extra)
    return {
        "eng/batch.py": batch,
        "eng/tbo.py": TBO,
        "eng/worker.py": WORKER.format(worker_body=worker_body),
        "eng/model_runner.py": RUNNER,
        "eng/models/model.py": MODEL.format(model_body=model_body, layer_body=layer_body),
    }


def extra_finding(files: dict[str, str]) -> Optional[Finding]:
    findings, _fixed = run_project(files, TboFieldNotCopied)
    assert all("`ForwardBatch.extra`" in finding.message for finding in findings), findings
    assert len(findings) <= 1
    return findings[0] if findings else None


def test_a_field_the_model_forward_sets_after_the_constructor_split_is_not_reported() -> None:
    files = tree(model_body="        forward_batch.extra = input_ids * 2\n")
    assert extra_finding(files) is None


def test_a_field_the_caller_sets_on_the_batch_the_constructor_returned_is_not_reported() -> None:
    files = tree(worker_body="        forward_batch.extra = schedule_batch.extra\n")
    assert extra_finding(files) is None


def test_a_batch_method_no_call_is_seen_reaching_runs_after_the_constructor_split() -> None:
    # `set_extra` is called from a layer that takes the batch untyped: no call reaches it.
    files = tree(layer_body="        forward_batch.set_extra(q)\n")
    assert extra_finding(files) is None


def test_a_field_the_constructor_sets_below_its_split_is_not_reported() -> None:
    assert extra_finding(tree(after_split="        ret.extra = runner.extra\n")) is None


def test_a_field_the_constructor_sets_above_its_split_is_reported() -> None:
    finding = extra_finding(tree(before_split="        ret.extra = runner.extra\n"))
    assert finding is not None and finding.severity == "warning"
    assert "eng/batch.py:15 gives it a value (`ret.extra = runner.extra`) before the split" in finding.message


def test_a_field_set_between_an_early_split_and_the_main_one_runs_before_the_main_one() -> None:
    early = "        if runner.idle:\n            Preparer.prepare(ret)\n            return ret\n"
    finding = extra_finding(tree(before_split=early + "        ret.extra = runner.extra\n"))
    assert finding is not None and "eng/batch.py:18" in finding.message and "before the split" in finding.message


NEVER_NONE = [
    "[r.rid for r in schedule_batch.reqs]",
    "{}",
    "(1, 2)",
    "'virtual'",
    "0",
    "Extra(schedule_batch)",
    "torch.zeros(4).to(runner.device)",
    "len(schedule_batch.reqs) * 2",
]


@pytest.mark.parametrize("value", NEVER_NONE)
def test_a_never_none_value_given_in_the_constructor_is_an_error(value: str) -> None:
    finding = extra_finding(tree(init_extra=f", extra={value}"))
    assert finding is not None and finding.severity == "error"
    assert f"eng/batch.py:14 always gives it a value that is never None (`extra={value}`) before the split" in (
        finding.message
    )
    assert "every TBO split raises" in finding.message


@pytest.mark.parametrize("value", NEVER_NONE[:3])
def test_a_never_none_value_set_above_the_split_is_an_error(value: str) -> None:
    finding = extra_finding(tree(before_split=f"        ret.extra = {value}\n"))
    assert finding is not None and finding.severity == "error"


def test_a_never_none_value_set_by_a_helper_the_constructor_always_calls_is_an_error() -> None:
    finding = extra_finding(tree(before_split="        ret.set_extra(1)\n", set_extra="[]"))
    assert finding is not None and finding.severity == "error" and "`self.extra = []`" in finding.message


@pytest.mark.parametrize(
    "before_split",
    [
        "        if runner.tracked:\n            ret.extra = []\n",
        "        for req in schedule_batch.reqs:\n            ret.extra = [req]\n",
        "        if runner.idle:\n            return ret\n        ret.extra = []\n",
        "        ret.extra = [] if runner.tracked else None\n",
    ],
    ids=["if", "loop", "below-early-return", "conditional-expression"],
)
def test_a_value_that_may_not_be_given_before_the_split_stays_a_warning(before_split: str) -> None:
    finding = extra_finding(tree(before_split=before_split))
    assert finding is not None and finding.severity == "warning"


def test_a_never_none_value_by_a_helper_called_only_sometimes_stays_a_warning() -> None:
    helper_call = "        if runner.tracked:\n            ret.set_extra(1)\n"
    finding = extra_finding(tree(before_split=helper_call, set_extra="[]"))
    assert finding is not None and finding.severity == "warning"


@pytest.mark.parametrize(
    "value", ["schedule_batch.extra", "runner.compute(schedule_batch)", "runner.extra if runner.tracked else None"]
)
def test_an_optional_field_given_a_value_that_may_be_none_stays_a_warning(value: str) -> None:
    finding = extra_finding(tree(init_extra=f", extra={value}"))
    assert finding is not None and finding.severity == "warning"
    assert f"gives it a value (`extra={value}`) before the split" in finding.message


@pytest.mark.parametrize(
    "before_split",
    [
        "        with runner.lock:\n            ret.extra = []\n",
        "        try:\n            ret.extra = []\n        finally:\n            runner.release()\n",
        "        if runner.bad:\n            raise ValueError(runner)\n        ret.extra = []\n",
    ],
    ids=["with", "try-body", "below-a-raise"],
)
def test_a_never_none_value_on_every_path_that_reaches_the_split_is_an_error(before_split: str) -> None:
    finding = extra_finding(tree(before_split=before_split))
    assert finding is not None and finding.severity == "error"
