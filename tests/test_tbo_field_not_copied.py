"""KV301 across files: extraction forms, severities, the seed's bug, and the runtime ratchet."""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from kvlint.cli import main

SEED = Path(__file__).parent / "fixtures" / "tbo" / "seed"

BATCH = '''
import enum
from dataclasses import dataclass, field
from typing import ClassVar, List, Optional

import torch


class Mode(enum.Enum):
    A = 1


@dataclass
class ForwardBatch:
    input_ids: torch.Tensor
    batch_size: int
    mode: Mode = Mode.A
    spec_info: Optional[object] = None
    seq_lens_cpu: Optional[List[int]] = None
    cache_hits: ClassVar[int] = 0
'''

# Copies every field of BATCH: input_ids, batch_size, mode, spec_info, seq_lens_cpu.
BUILDER_ALL = '''
from batch import ForwardBatch


def filter_batch(batch, *, start, end):
    output_dict = dict()
    for key in ["input_ids"]:
        output_dict[key] = getattr(batch, key)[start:end]
    output_dict["mode"] = batch.mode
    output_dict.update(dict(batch_size=end - start, spec_info=None, seq_lens_cpu=None))
    return ForwardBatch(**output_dict)
'''


def run_kv301(root: Path, *args: str) -> list[dict]:
    """`kvlint check --select KV301 --format json` in `root`, in-process."""
    with contextlib.chdir(root):
        result = CliRunner().invoke(
            main, ["check", "--no-cache", "--select", "KV301", "--format", "json", *args, str(root)]
        )
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    assert not report["errors"], report["errors"]
    return report["findings"]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    (root / "kvlint.toml").write_text("")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def reported(findings: list[dict]) -> dict[str, str]:
    """field name -> severity."""
    return {f["message"].split("`")[1].split(".", 1)[1]: f["severity"] for f in findings}


def test_builder_that_copies_everything_has_no_finding(tmp_path: Path) -> None:
    write_tree(tmp_path, {"batch.py": BATCH, "builder.py": BUILDER_ALL})
    assert run_kv301(tmp_path, "--strict-tbo") == []


@pytest.mark.parametrize(
    ("name", "builder"),
    [
        ("inline list loop", BUILDER_ALL),
        (
            "tuple loop and constant subscript",
            BUILDER_ALL.replace('for key in ["input_ids"]:', 'for key in ("input_ids",):'),
        ),
        (
            "module-level list the loop iterates by name",
            BUILDER_ALL.replace('for key in ["input_ids"]:', "for key in TOKEN_KEYS:").replace(
                "def filter_batch", 'TOKEN_KEYS = ["input_ids"]\n\n\ndef filter_batch'
            ),
        ),
        (
            "update with a dict literal",
            BUILDER_ALL.replace(
                "output_dict.update(dict(batch_size=end - start, spec_info=None, seq_lens_cpu=None))",
                'output_dict.update({"batch_size": end - start, "spec_info": None, "seq_lens_cpu": None})',
            ),
        ),
        (
            "setdefault and update keywords",
            BUILDER_ALL.replace(
                "output_dict.update(dict(batch_size=end - start, spec_info=None, seq_lens_cpu=None))",
                'output_dict.setdefault("batch_size", end - start)\n    output_dict.update(spec_info=None, seq_lens_cpu=None)',
            ),
        ),
        (
            "dict literal binding, renamed dict",
            BUILDER_ALL.replace("output_dict = dict()", 'child = {"mode": batch.mode, "spec_info": None}')
            .replace('    output_dict["mode"] = batch.mode\n', "")
            .replace("output_dict", "child")
            .replace("spec_info=None, ", ""),
        ),
        (
            "dict(...) binding",
            BUILDER_ALL.replace("output_dict = dict()", "output_dict = dict(mode=batch.mode)").replace(
                '    output_dict["mode"] = batch.mode\n', ""
            ),
        ),
        (
            "keywords of the returning call",
            BUILDER_ALL.replace('    output_dict["mode"] = batch.mode\n', "").replace(
                "ForwardBatch(**output_dict)", "ForwardBatch(**output_dict, mode=batch.mode)"
            ),
        ),
    ],
)
def test_every_extraction_form_counts_as_copied(tmp_path: Path, name: str, builder: str) -> None:
    write_tree(tmp_path, {"batch.py": BATCH, "builder.py": builder})
    assert run_kv301(tmp_path, "--strict-tbo") == [], name


def test_severities_error_warning_and_strict(tmp_path: Path) -> None:
    builder = BUILDER_ALL.replace('    output_dict["mode"] = batch.mode\n', "").replace(
        "output_dict.update(dict(batch_size=end - start, spec_info=None, seq_lens_cpu=None))",
        "output_dict.update(dict(batch_size=end - start))",
    )
    setter = (
        "from batch import ForwardBatch\n\n\n"
        "def attach(forward_batch: ForwardBatch, info):\n    forward_batch.spec_info = info\n"
    )
    write_tree(tmp_path, {"batch.py": BATCH, "builder.py": builder, "spec.py": setter})
    findings = run_kv301(tmp_path)
    assert reported(findings) == {"mode": "error", "spec_info": "warning"}
    warning = next(f for f in findings if f["severity"] == "warning")
    assert "spec.py:5" in warning["message"] and warning["line"] == 18 and warning["path"] == "batch.py"
    strict = reported(run_kv301(tmp_path, "--strict-tbo"))
    assert strict == {"mode": "error", "spec_info": "warning", "seq_lens_cpu": "warning"}
    (tmp_path / "kvlint.toml").write_text("[tbo]\nstrict = true\n")
    assert reported(run_kv301(tmp_path)) == strict


@pytest.mark.parametrize(
    "setter",
    [
        "def f(fb: ForwardBatch):\n    setattr(fb, 'spec_info', 1)\n",
        "def f():\n    return ForwardBatch(input_ids=None, batch_size=1, spec_info=object())\n",
        "def f(x):\n    fb = ForwardBatch.init_new(x)\n    fb.spec_info = x\n",
    ],
)
def test_each_assignment_form_makes_an_optional_field_a_warning(tmp_path: Path, setter: str) -> None:
    builder = BUILDER_ALL.replace("spec_info=None, ", "")
    write_tree(tmp_path, {"batch.py": BATCH, "builder.py": builder, "s.py": "from batch import ForwardBatch\n\n" + setter})
    assert reported(run_kv301(tmp_path)) == {"spec_info": "warning"}


def test_untyped_receiver_is_not_evidence(tmp_path: Path) -> None:
    builder = BUILDER_ALL.replace("spec_info=None, ", "")
    setter = "from batch import ForwardBatch\n\n\ndef f(batch):\n    batch.spec_info = 1\n"
    write_tree(tmp_path, {"batch.py": BATCH, "builder.py": builder, "s.py": setter})
    assert run_kv301(tmp_path) == []


def test_required_and_factory_defaults_are_errors_without_fix(tmp_path: Path) -> None:
    batch = BATCH + "    lora_ids: List[str] = field(default_factory=list)\n"
    builder = BUILDER_ALL.replace("batch_size=end - start, ", "")
    write_tree(tmp_path, {"batch.py": batch, "builder.py": builder})
    findings = {f["message"].split("`")[1]: f for f in run_kv301(tmp_path)}
    assert set(findings) == {"ForwardBatch.batch_size", "ForwardBatch.lora_ids"}
    assert all(f["severity"] == "error" for f in findings.values())
    assert findings["ForwardBatch.batch_size"]["fix"] is not None
    assert findings["ForwardBatch.lora_ids"]["fix"] is None
    assert "no fix" in findings["ForwardBatch.lora_ids"]["message"]


def test_fields_of_dataclass_bases_count_but_mixin_annotations_do_not(tmp_path: Path) -> None:
    base = (
        "from dataclasses import dataclass\n\n\n"
        "@dataclass\nclass ForwardBatchBase:\n    tp_rank: int = 0\n\n\n"
        "class ForwardBatchMixin:\n    chunk_idx: int = 0\n"
    )
    batch = BATCH.replace("class ForwardBatch:", "class ForwardBatch(ForwardBatchMixin, ForwardBatchBase):")
    batch = "from base import ForwardBatchBase, ForwardBatchMixin\n" + batch
    write_tree(tmp_path, {"base.py": base, "batch.py": batch, "builder.py": BUILDER_ALL})
    findings = run_kv301(tmp_path)
    assert reported(findings) == {"tp_rank": "error"}
    assert findings[0]["path"] == "base.py" and findings[0]["line"] == 6


def test_builder_without_a_dict_return_is_reported_not_ignored(tmp_path: Path) -> None:
    builder = "from batch import ForwardBatch\n\n\ndef filter_batch(batch):\n    return ForwardBatch(input_ids=batch.input_ids)\n"
    write_tree(tmp_path, {"batch.py": BATCH, "builder.py": builder})
    findings = run_kv301(tmp_path)
    assert len(findings) == 1 and "cannot tell which fields" in findings[0]["message"]


def test_configured_names(tmp_path: Path) -> None:
    batch = BATCH.replace("ForwardBatch", "StepBatch")
    builder = BUILDER_ALL.replace("ForwardBatch", "StepBatch").replace("filter_batch", "split_child")
    builder = builder.replace('    output_dict["mode"] = batch.mode\n', "")
    write_tree(tmp_path, {"batch.py": batch, "builder.py": builder})
    (tmp_path / "kvlint.toml").write_text('[tbo]\nbatch-class = "StepBatch"\nchild-builder = "split_child"\n')
    assert reported(run_kv301(tmp_path)) == {"mode": "error"}


@pytest.fixture
def seed_copy(tmp_path: Path) -> Path:
    for path in SEED.glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "kvlint.toml").write_text("")
    return tmp_path


@pytest.fixture
def importable(seed_copy: Path) -> Iterator[Path]:
    sys.path.insert(0, str(seed_copy))
    yield seed_copy
    sys.path.remove(str(seed_copy))
    for name in ("tbo_seed_batch", "tbo_seed_builder"):
        sys.modules.pop(name, None)


def test_seed_bug_is_an_error_and_the_unsafe_fix_silences_it(seed_copy: Path) -> None:
    findings = run_kv301(seed_copy)
    assert [(f["code"], f["severity"], f["line"]) for f in findings] == [("KV301", "error", 24)]
    assert "out_cache_loc_id_space" in findings[0]["message"]
    fix = subprocess.run(
        [sys.executable, "-m", "kvlint", "fix", "--unsafe", "--select", "KV301", str(seed_copy)],
        capture_output=True,
        text=True,
        cwd=seed_copy,
    )
    assert fix.returncode == 0, fix.stderr
    builder = (seed_copy / "tbo_seed_builder.py").read_text()
    copy = '    output_dict["out_cache_loc_id_space"] = batch.out_cache_loc_id_space\n'
    assert copy in builder
    assert builder.index(copy) > builder.index('output_dict["return_logprob"]')
    assert run_kv301(seed_copy) == []


def _parent(batch_module, **fields):
    return batch_module.ForwardBatch(
        forward_mode=batch_module.ForwardMode.EXTEND,
        batch_size=2,
        input_ids=[1, 2, 3, 4],
        out_cache_loc=[10, 11, 12, 13],
        seq_lens=[2, 2],
        **fields,
    )


def _split(builder_module, parent):
    return builder_module.filter_batch(parent, start_token_index=0, end_token_index=2, start_seq_index=0, end_seq_index=1)


def test_each_reported_error_is_exactly_what_the_runtime_ratchet_raises(importable: Path) -> None:
    errors = [f for f in run_kv301(importable) if f["severity"] == "error"]
    batch_module = importlib.import_module("tbo_seed_batch")
    builder_module = importlib.import_module("tbo_seed_builder")
    for finding in errors:
        name = finding["message"].split("`")[1].split(".", 1)[1]
        with pytest.raises(ValueError, match=rf"^Field {name} has value, but is not yet supported$"):
            _split(builder_module, _parent(batch_module, **{name: "kernel"}))

    subprocess.run(
        [sys.executable, "-m", "kvlint", "fix", "--unsafe", "--select", "KV301", str(importable)],
        check=True,
        capture_output=True,
        cwd=importable,
    )
    sys.modules.pop("tbo_seed_builder")
    fixed = importlib.import_module("tbo_seed_builder")
    child = _split(fixed, _parent(batch_module, out_cache_loc_id_space="kernel"))
    assert child.out_cache_loc_id_space == "kernel"
    assert child.input_ids == [1, 2]
