"""Reach on the real tree (sglang 0.5.23's srt): what its gates admit, and two mutations of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus import sglang_srt_or_skip
from kvlint.api.reach import Admission
from kvlint.learn.admission import learn_admission
from kvlint.learn.scope import Scope
from kvlint.learn.tree import Learned
from kvlint.running.reach import verdict_at

HOOK = "arg_groups/kv_cache_hook.py"


@pytest.fixture(scope="module")
def srt() -> Path:
    return sglang_srt_or_skip()


@pytest.fixture(scope="module")
def sources(srt: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(srt.rglob("*.py"))}


def _admission(srt: Path, sources: dict[Path, bytes]) -> Admission:
    scope = Scope(sources)
    learned = Learned(shown=scope.shown)
    learn_admission(scope, learned)
    admission = learned.values["admission"]
    assert isinstance(admission, Admission)
    return admission


def test_the_tree_admits_the_backends_its_page_major_gate_allows(srt: Path, sources: dict[Path, bytes]) -> None:
    admission = _admission(srt, sources)
    assert set(admission.admitted) == {"triton", "fa3", "fa4", "flashinfer", "trtllm_mha", "trtllm_mla",
                                       "cutedsl_mla", "flashmla"}
    assert len(admission.gates) == 1 and admission.gates[0].endswith(f"{HOOK}:822")
    assert str(admission.refusal("enable_two_batch_overlap")).endswith(f"{HOOK}:653")


def test_a_raw_loc_planted_in_an_admitted_backend_is_live(srt: Path, sources: dict[Path, bytes]) -> None:
    admission = _admission(srt, sources)
    assert verdict_at("KV101", "TritonAttnBackend.forward_extend", admission).reach == "live"
    assert verdict_at("KV101", "MusaFlashAttentionBackend.forward_decode", admission).reach == "live"
    # The split refuses an uncopied field whatever the pool: two-batch overlap without unified memory runs it.
    kv301 = verdict_at("KV301", "", admission)
    assert kv301.reach == "live" and f"{HOOK}:653" in kv301.reason


def test_adding_a_refused_backend_to_the_allow_set_turns_its_findings_live(srt: Path, sources: dict[Path, bytes]) -> None:
    assert verdict_at("KV101", "WaveAttnBackend.forward_extend", _admission(srt, sources)).reach == "latent"
    hook = srt / HOOK
    text = sources[hook].decode()
    mutated = text.replace('            "trtllm_mha",\n        }', '            "trtllm_mha",\n            "wave",\n        }', 1)
    assert mutated != text
    admission = _admission(srt, {**sources, hook: mutated.encode()})
    verdict = verdict_at("KV101", "WaveAttnBackend.forward_extend", admission)
    assert verdict.reach == "live" and "`wave`" in verdict.reason


def test_a_backend_a_draft_builds_too_is_latent_only_while_the_draft_allow_set_refuses_it(
        srt: Path, sources: dict[Path, bytes]) -> None:
    aiter = verdict_at("KV201", "AiterAttnBackend.forward_extend", _admission(srt, sources))
    assert aiter.reach == "latent" and "AiterMultiStepDraftBackend.__init__" in aiter.reason
    draft = verdict_at("KV201", "AiterMultiStepDraftBackend.common_template", _admission(srt, sources))
    assert draft.reach == "latent" and f"{HOOK}:634" in draft.reason and f"{HOOK}:588" in draft.reason
    hook = srt / HOOK
    text = sources[hook].decode()
    mutated = text.replace('_SPEC_MHA_AUDITED_BACKENDS = frozenset({"triton", "flashinfer", "fa3", "trtllm_mha"})',
                           '_SPEC_MHA_AUDITED_BACKENDS = frozenset({"triton", "flashinfer", "fa3", "trtllm_mha", "aiter"})', 1)
    assert mutated != text
    admitted = _admission(srt, {**sources, hook: mutated.encode()})
    # An EAGLE draft may now run on aiter: the draft path is not refused, so neither class is latent.
    assert verdict_at("KV201", "AiterAttnBackend.forward_extend", admitted).reach != "latent"
    assert verdict_at("KV201", "AiterMultiStepDraftBackend.common_template", admitted).reach != "latent"
