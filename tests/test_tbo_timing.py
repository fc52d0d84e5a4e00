"""KV301 timing: a field given a value only after the TBO split cannot make the split raise.

Also: a `--changed` or hook run times it as a whole-tree run does, and reads
the rest of the tree's KV301 facts from the cache the second time.

Each tree is an engine in small: the batch class, its TBO preparer and child
builder, a model runner that splits the batch and then runs the model and the
attention backend, and the places that give a field a value.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest

from kvlint.api.config import load_config
from kvlint.api.types import Finding
from kvlint.rules.tbo.tbo_field_not_copied import TboFieldNotCopied
from kvlint.rules.tbo._tree import holds_module
from kvlint.running.engine import RunOptions, run
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
    def init_new(cls, schedule_batch):
        return cls(input_ids=schedule_batch.input_ids{init_extra})

    def prepare_split(self, runner):
{before_split}        Preparer.prepare(self)
{after_split}
    def pad(self, n):
        if self.extra is not None:
            self.extra = pad_to(self.extra, n)
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

RUNNER = """\
from eng.batch import ForwardBatch


class ModelRunner:
    def forward(self, forward_batch: ForwardBatch):
        forward_batch.prepare_split(self)
        self.attn_backend.init_forward_metadata(forward_batch)
        return self.model.forward(forward_batch.input_ids, forward_batch)
"""

MODEL = """\
from eng.batch import ForwardBatch
from eng.dp import gather


class Model:
    def forward(self, input_ids, forward_batch: ForwardBatch):
{model_body}        return gather(input_ids, forward_batch)
"""

BACKEND = """\
from eng.batch import ForwardBatch


class Backend:
    def init_forward_metadata(self, forward_batch: ForwardBatch):
{backend_body}        self.metadata = forward_batch.input_ids
"""

DP = """\
from eng.batch import ForwardBatch


def gather(hidden, forward_batch: ForwardBatch):
{dp_body}    return hidden
"""

WORKER = """\
from eng.batch import ForwardBatch


class Worker:
    def run(self, schedule_batch):
        forward_batch = ForwardBatch.init_new(schedule_batch)
        forward_batch.extra = schedule_batch.extra
        return self.model_runner.forward(forward_batch)
"""


def tree(
    *,
    init_extra: str = "",
    before_split: str = "",
    after_split: str = "",
    model_body: str = "",
    backend_body: str = "",
    dp_body: str = "",
    worker: bool = False,
) -> dict[str, str]:
    files = {
        "eng/batch.py": BATCH.format(init_extra=init_extra, before_split=before_split, after_split=after_split),
        "eng/tbo.py": TBO,
        "eng/model_runner.py": RUNNER,
        "eng/attention/backend.py": BACKEND.format(backend_body=backend_body),
        "eng/dp.py": DP.format(dp_body=dp_body),
        "eng/models/model.py": MODEL.format(model_body=model_body),
    }
    if worker:
        files["eng/worker.py"] = WORKER
    return files


def extra_finding(files: dict[str, str], strict: bool = False) -> Optional[Finding]:
    findings, _fixed = run_project(files, TboFieldNotCopied, options={"strict": strict})
    assert all("`ForwardBatch.extra`" in finding.message for finding in findings), findings
    assert len(findings) <= 1
    return findings[0] if findings else None


def test_a_field_set_only_in_the_model_forward_is_not_reported() -> None:
    files = tree(model_body="        forward_batch.extra = input_ids * 2\n")
    assert extra_finding(files) is None


def test_a_field_set_only_while_building_attention_metadata_is_not_reported() -> None:
    files = tree(backend_body="        forward_batch.extra = build_metadata(forward_batch)\n")
    assert extra_finding(files) is None


def test_a_runtime_cache_filled_by_a_helper_the_model_calls_is_not_reported() -> None:
    files = tree(dp_body="    forward_batch.extra = hidden.shape[0]\n")
    assert extra_finding(files) is None


@pytest.mark.parametrize("helper,call", [
    ("    def _stash(self, ids, fb):\n        fb.extra = ids * 2\n", "        self._stash(input_ids, forward_batch)\n"),
    ("\n\ndef _stash(ids, fb):\n    fb.extra = ids * 2\n", "        _stash(input_ids, forward=forward_batch)\n"),
], ids=["method", "module-function"])
def test_a_helper_handed_the_batch_unannotated_sets_it_where_its_caller_runs(helper: str, call: str) -> None:
    # The model forward hands the batch to a helper that does not name the batch class: after the split.
    files = tree(model_body=call)
    files["eng/models/model.py"] += helper if helper.startswith("    ") else helper.replace("fb)", "forward)").replace("fb.", "forward.")
    assert extra_finding(files) is None
    # A worker handing it to such a helper before running the batch: the helper's write counts.
    files = tree(worker=True)
    files["eng/worker.py"] = files["eng/worker.py"].replace(
        "        forward_batch.extra = schedule_batch.extra\n", "        self._fill(schedule_batch, forward_batch)\n"
    ) + "\n    def _fill(self, schedule_batch, fb):\n        fb.extra = schedule_batch.extra\n"
    finding = extra_finding(files)
    assert finding is not None and "eng/worker.py" in finding.message


SETTER = "    def set_extra(self, value):\n        self.extra = value\n\n    def pad(self, n):\n"

# The forward hands its batch on inside a tuple to helpers that name no batch class, the last of
# which sets the field through the batch's own method, on a parameter nothing types.
TUPLE_HELPERS = (
    "\n    def _core(self, state):\n        ids, inner = state\n        return self._inner(*inner)\n"
    "\n    def _inner(self, ids, fb):\n        fb.set_extra(ids * 2)\n        return ids\n"
)


def _with_setter(files: dict[str, str]) -> dict[str, str]:
    files["eng/batch.py"] = files["eng/batch.py"].replace("    def pad(self, n):\n", SETTER)
    return files


def test_a_setter_the_forward_reaches_through_a_tuple_runs_after_the_split() -> None:
    files = _with_setter(tree(model_body="        self._core((input_ids, (input_ids, forward_batch)))\n"))
    files["eng/models/model.py"] += TUPLE_HELPERS
    assert extra_finding(files) is None
    # The setter alone, called from nowhere kvlint can place: reported, with the setter's write.
    alone = _with_setter(tree())
    finding = extra_finding(alone)
    assert finding is not None and "`self.extra = value`" in finding.message


def test_a_worker_reaching_the_setter_through_a_tuple_before_running_the_batch_is_still_reported() -> None:
    # Placing calls only place what runs after the split: a worker's are no evidence either way.
    files = _with_setter(tree(worker=True))
    files["eng/worker.py"] = files["eng/worker.py"].replace(
        "        forward_batch.extra = schedule_batch.extra\n",
        "        self._core((schedule_batch, (schedule_batch.extra, forward_batch)))\n",
    ) + TUPLE_HELPERS.replace("ids * 2", "ids")
    finding = extra_finding(files)
    assert finding is not None and "`self.extra = value`" in finding.message


def test_timing_is_the_same_when_the_tree_is_checked_from_inside_its_package() -> None:
    # From inside `eng/`, paths lose the package (`dp.py`) while the imports keep it (`eng.dp`).
    files = tree(dp_body="    forward_batch.extra = hidden.shape[0]\n")
    inside = {path.removeprefix("eng/"): text for path, text in files.items()}
    assert extra_finding(inside) is None


@pytest.mark.parametrize(
    ("path", "module", "holds"),
    [
        ("sglang/srt/layers/dp.py", "sglang.srt.layers.dp", True),
        ("layers/dp.py", "sglang.srt.layers.dp", True),
        ("sglang/srt/layers/dp.py", "dp", True),
        ("layers/__init__.py", "sglang.srt.layers", True),
        ("layers/dp.py", "sglang.srt.models.dp", False),
        ("models/dp.py", "sglang.srt.layers.dp", False),
    ],
)
def test_a_file_holds_a_module_whichever_side_the_run_root_cuts(path: str, module: str, holds: bool) -> None:
    assert holds_module(path, module) is holds


def test_a_field_set_below_the_split_in_the_splitting_method_is_not_reported() -> None:
    files = tree(after_split="        self.extra = 1\n")
    assert extra_finding(files) is None


def test_strict_mode_names_the_assignment_after_the_split() -> None:
    finding = extra_finding(tree(model_body="        forward_batch.extra = input_ids * 2\n"), strict=True)
    assert finding is not None and "only after the split (eng/models/model.py:7) sets it" in finding.message


def test_the_message_cites_the_assignment_before_the_split_over_one_after_it() -> None:
    # The backend's file sorts first, but its assignment runs after the split.
    files = tree(
        before_split="        self.extra = runner.track\n",
        backend_body="        forward_batch.extra = build_metadata(forward_batch)\n",
    )
    finding = extra_finding(files)
    assert finding is not None and finding.severity == "warning"
    assert "eng/batch.py:17 gives it a value (`self.extra = runner.track`) before the split" in finding.message


def test_a_value_given_when_the_batch_is_built_is_before_the_split() -> None:
    finding = extra_finding(tree(init_extra=", extra=schedule_batch.extra"))
    assert finding is not None and "eng/batch.py:14" in finding.message and "before the split" in finding.message


def test_reshaping_the_fields_own_value_gives_it_no_value() -> None:
    # `pad` runs before the split, but only pads a value some other write gave.
    files = tree(before_split="        self.pad(8)\n")
    assert extra_finding(files) is None


def test_a_worker_filling_the_batch_before_running_it_is_still_reported() -> None:
    finding = extra_finding(tree(worker=True, model_body="        forward_batch.extra = input_ids * 2\n"))
    assert finding is not None
    assert "eng/worker.py:7 gives it a value (`forward_batch.extra = schedule_batch.extra`) that nothing shows" in (
        finding.message
    )


def _on_disk(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("[tool.kvlint]\n")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def _kv301(root: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> list[dict]:
    monkeypatch.chdir(root)
    options.setdefault("paths", (Path("."),))
    result = run(load_config(), RunOptions(select=("KV301",), jobs=1, **options))
    return [finding.to_json() for finding in result.findings]


@pytest.mark.parametrize("model_only", [True, False])
def test_changed_and_hook_runs_time_kv301_as_the_whole_tree_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_only: bool
) -> None:
    """The split, the model and the worker sit in files a run on the batch file leaves out."""
    _on_disk(tmp_path, tree(worker=not model_only, model_body="        forward_batch.extra = input_ids * 2\n"))
    (tmp_path / "eng/batch.py").write_text((tmp_path / "eng/batch.py").read_text() + "# touched\n")
    whole = [f for f in _kv301(tmp_path, monkeypatch, cache=False) if f["path"] == "eng/batch.py"]
    assert len(whole) == (0 if model_only else 1)
    for cache in (False, True, True):
        assert _kv301(tmp_path, monkeypatch, cache=cache, changed="HEAD") == whole
        assert _kv301(tmp_path, monkeypatch, cache=cache, paths=(Path("eng/batch.py"),)) == whole


def test_a_second_hook_run_takes_kv301_facts_of_the_rest_of_the_tree_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_disk(tmp_path, tree(worker=True))
    extracted: list[str] = []
    original = TboFieldNotCopied.extract

    def counting(self: TboFieldNotCopied, ctx: Any) -> Any:
        extracted.append(ctx.path)
        return original(self, ctx)

    monkeypatch.setattr(TboFieldNotCopied, "extract", counting)
    hook = {"cache": True, "paths": (Path("eng/batch.py"),)}
    first = _kv301(tmp_path, monkeypatch, **hook)
    assert "eng/worker.py" in extracted
    extracted.clear()
    assert _kv301(tmp_path, monkeypatch, **hook) == first
    assert extracted == []
