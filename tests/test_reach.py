"""Reach: every finding says whether the engine can run its code on the unified pool today."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from engine_text import PHYSICAL_WRITE_LOC
from kvlint.api.reach import Admission
from kvlint.face.cli import main
from kvlint.running.reach import verdict_at

GATE = '''
ALLOWED = frozenset({"triton", "fa3"})


def handle_unified(cfg):
    if not cfg.enable_unified_memory:
        return
    backends = set(attention_backends_of(cfg))
    assert backends <= ALLOWED, "refused"
    assert not cfg.enable_two_batch_overlap, "no TBO"
'''

COMPUTED_GATE = '''
def handle_unified(cfg):
    if not cfg.enable_unified_memory:
        return
    backends = set(attention_backends_of(cfg))
    assert backends <= load_allowed(), "refused"
'''

REGISTRY = '''
BACKENDS = {}


def register_backend(name):
    def decorator(fn):
        BACKENDS[name] = fn
        return fn

    return decorator


@register_backend("triton")
def create_triton(runner):
    from backends import TritonBackend

    return TritonBackend(runner)


@register_backend("fa3")
def create_fa3(runner):
    if runner.musa:
        from backends import MusaFA3Backend

        return MusaFA3Backend(runner)
    from backends import FA3Backend

    return FA3Backend(runner)


@register_backend("aiter")
def create_aiter(runner):
    from backends import AiterBackend

    return AiterBackend(runner)
'''

BACKENDS = '''
class Base:
    pass


def shared_write(pool, forward_batch, k, v):
    pool.set_kv_buffer(None, forward_batch.out_cache_loc, k, v)


class TritonBackend(Base):
    def forward(self, layer, forward_batch, k, v):
        shared_write(forward_batch.token_to_kv_pool, forward_batch, k, v)


class FA3Backend(Base):
    pass


class MusaFA3Backend(FA3Backend):
    def forward(self, layer, forward_batch, k, v):
        forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)


class AiterBackend(Base):
    def forward(self, layer, forward_batch, k, v):
        forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
        shared_write(forward_batch.token_to_kv_pool, forward_batch, k, v)
'''


def _engine(root: Path, gate: str = GATE) -> Path:
    (root / "pyproject.toml").write_text("[tool.kvlint]\n")
    for name, text in {"gate.py": gate, "registry.py": REGISTRY, "backends.py": BACKENDS}.items():
        (root / name).write_text(textwrap.dedent(text))
    return root


def _findings(root: Path, *options: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", *options, str(root)])
    assert result.exit_code in (0, 1), result.output
    return list(json.loads(result.output)["findings"])


def _by_line(findings: list[dict[str, object]]) -> dict[int, dict[str, object]]:
    return {int(str(finding["line"])): finding for finding in findings}


def test_admitted_name_returning_a_hardware_subclass_on_one_branch_is_live(tmp_path: Path) -> None:
    found = _by_line(_findings(_engine(tmp_path)))
    musa = found[21]
    assert musa["reach"] == "live"
    assert "`fa3`" in str(musa["reach_reason"])


def test_backend_outside_the_allow_set_is_latent_naming_the_gate(tmp_path: Path) -> None:
    found = _by_line(_findings(_engine(tmp_path)))
    aiter = found[26]
    assert aiter["reach"] == "latent"
    assert "gate.py:9" in str(aiter["reach_reason"]) and "`aiter`" in str(aiter["reach_reason"])


def test_a_refused_backend_built_another_way_too_is_unknown_naming_that_way(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    # A multi-step draft backend builds it by class, and no gate refuses the draft path.
    (engine / "draft.py").write_text("from backends import AiterBackend\n\n\nclass AiterDraft:\n"
                                     "    def __init__(self, runner):\n        self.one = AiterBackend(runner)\n")
    aiter = _by_line(_findings(engine))[26]
    assert aiter["reach"] == "unknown"
    assert "refused backend `aiter`" in str(aiter["reach_reason"])
    assert "draft.py:6 (in AiterDraft.__init__)" in str(aiter["reach_reason"])


def test_a_same_named_class_of_another_subsystem_is_neither_latent_nor_an_escape(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    # A diffusion subsystem with an `AiterBackend` of its own, built where no gate is.
    (engine / "diffusion").mkdir()
    (engine / "diffusion" / "backends.py").write_text("class AiterBackend:\n    pass\n")
    (engine / "diffusion" / "platform.py").write_text(
        "def build():\n    from diffusion.backends import AiterBackend\n\n    return AiterBackend()\n")
    # The engine's class is latent, but a finding's reach goes by its class's name, which both carry.
    aiter = _by_line(_findings(engine))[26]
    assert aiter["reach"] == "unknown"
    assert "defines two classes `AiterBackend`" in str(aiter["reach_reason"])
    assert "the registry's is latent (backend `aiter`" in str(aiter["reach_reason"])
    # Built from the engine's own module there, the engine's class escapes the gate.
    (engine / "diffusion" / "platform.py").write_text(
        "def build():\n    from backends import AiterBackend\n\n    return AiterBackend()\n")
    aiter = _by_line(_findings(engine))[26]
    assert aiter["reach"] == "unknown" and "diffusion/platform.py:4 (in build)" in str(aiter["reach_reason"])


def test_shared_helper_called_from_admitted_and_refused_backends_is_never_latent(tmp_path: Path) -> None:
    found = _by_line(_findings(_engine(tmp_path)))
    assert found[7]["reach"] in ("live", "unknown")


def test_an_allow_set_kvlint_cannot_read_leaves_every_backend_unknown(tmp_path: Path) -> None:
    found = _findings(_engine(tmp_path, COMPUTED_GATE))
    assert found and {finding["reach"] for finding in found} == {"unknown"}
    assert all("cannot read" in str(finding["reach_reason"]) for finding in found)


def test_reach_live_drops_latent_findings_and_live_only_drops_unknown_too(tmp_path: Path) -> None:
    root = _engine(tmp_path)
    every = _findings(root)
    live = _findings(root, "--reach", "live")
    only = _findings(root, "--reach", "live-only")
    assert {f["reach"] for f in every} == {"live", "latent", "unknown"}
    assert {f["reach"] for f in live} == {"live", "unknown"}
    assert {f["reach"] for f in only} == {"live"}


def test_reach_in_the_configuration_scopes_the_run_and_its_exit_code(tmp_path: Path) -> None:
    root = _engine(tmp_path)
    (root / "backends.py").write_text(textwrap.dedent(BACKENDS).replace("shared_write(forward_batch.token_to_kv_pool, forward_batch, k, v)\n\n\nclass FA3", "pass\n\n\nclass FA3").replace(
        "class MusaFA3Backend(FA3Backend):\n    def forward(self, layer, forward_batch, k, v):\n        forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)",
        "class MusaFA3Backend(FA3Backend):\n    pass").replace("def shared_write(pool, forward_batch, k, v):\n    pool.set_kv_buffer(None, forward_batch.out_cache_loc, k, v)", "def shared_write(pool, forward_batch, k, v):\n    pass"))
    (root / "pyproject.toml").write_text('[tool.kvlint]\nreach = "live"\n')
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json", str(root)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["findings"] == []
    result = CliRunner().invoke(main, ["check", "--no-cache", "--reach", "all", "--format", "json", str(root)])
    assert result.exit_code == 1
    assert {f["reach"] for f in json.loads(result.output)["findings"]} == {"latent"}


def test_an_unknown_reach_in_the_configuration_is_a_one_line_error(tmp_path: Path) -> None:
    root = _engine(tmp_path)
    (root / "pyproject.toml").write_text('[tool.kvlint]\nreach = "sometimes"\n')
    result = CliRunner().invoke(main, ["check", "--no-cache", str(root)])
    assert result.exit_code == 2
    assert "reach" in result.output and "Traceback" not in result.output


def test_text_report_tags_reach_and_statistics_count_by_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--statistics", str(_engine(tmp_path))])
    assert "[latent]" in result.output and "[live]" in result.output
    assert "     1  reach latent" in result.output.splitlines()


def test_sarif_carries_reach_in_each_result_properties(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "sarif", str(_engine(tmp_path))])
    results = json.loads(result.output)["runs"][0]["results"]
    assert results and all(item["properties"]["reach"] in ("live", "latent", "unknown") for item in results)


# A pool of the old kind, writing its own buffer at the loc it is handed.
OLD_POOL = '''
import torch


class MHATokenToKVPool:
    def __init__(self, size):
        self.k_buffer = [torch.zeros(size, 8, 128)]

    def set_kv_buffer(self, layer, loc, k, v):
        self.k_buffer[layer.layer_id][loc] = k
'''


def test_a_tree_with_no_mark_and_no_gate_says_its_findings_are_changes_the_migration_needs(tmp_path: Path) -> None:
    # A fork that never moved to the unified pool: its own pools, no write-loc class, no door checking a mark, no gate.
    root = _engine(tmp_path, gate="")
    (root / "memory_pool.py").write_text(OLD_POOL)
    reasons = {str(finding["reach_reason"]) for finding in _findings(root)}
    assert reasons == {Admission(unmigrated=True).no_gate()}
    assert "has not moved to the unified pool" in reasons.pop()
    contract = CliRunner().invoke(main, ["contract", str(root)]).output
    assert "admission: the tree has no write mark" in contract


def test_a_tree_defining_the_mark_without_a_gate_states_no_gate_and_claims_nothing_of_its_migration(tmp_path: Path) -> None:
    root = _engine(tmp_path, gate="")
    (root / "memory_pool.py").write_text(OLD_POOL + "\n\n" + PHYSICAL_WRITE_LOC)
    reasons = {str(finding["reach_reason"]) for finding in _findings(root)}
    assert reasons == {"the tree states no unified-memory gate"}


def test_contract_lists_the_admission_with_file_and_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["contract", "--no-cache", str(_engine(tmp_path))])
    assert "admission: backends [\"fa3\", \"triton\"]" in result.output
    assert "backend aiter [refused]" in result.output and "registry.py:" in result.output
    assert "refused: enable_two_batch_overlap" in result.output and "gate.py:10" in result.output


def test_a_base_method_every_live_subclass_overrides_is_not_live_but_one_inherited_is(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    base = ("class Base:\n"
            "    def forward(self, layer, forward_batch, k, v):\n"
            "        forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n\n"
            "    def extend(self, layer, forward_batch, k, v):\n"
            "        forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n")
    fa3 = "class FA3Backend(Base):\n    def forward(self, layer, forward_batch, k, v):\n        pass\n"
    text = textwrap.dedent(BACKENDS).replace("class Base:\n    pass\n", base).replace("class FA3Backend(Base):\n    pass\n", fa3)
    (engine / "backends.py").write_text(text)
    found = _by_line(_findings(engine))
    overridden, inherited = found[4], found[7]
    assert overridden["reach"] == "unknown"
    reason = str(overridden["reach_reason"])
    assert "`Base.forward` runs on no live class" in reason
    assert "FA3Backend" in reason and "MusaFA3Backend" in reason and "TritonBackend" in reason
    assert inherited["reach"] == "live" and "a base of" in str(inherited["reach_reason"])


def test_a_split_finding_is_live_though_the_tree_refuses_two_batch_overlap_under_unified_memory() -> None:
    # The child builder refuses an uncopied field on any split, whatever the pool.
    refused = verdict_at("KV301", "", Admission(refusals=(("enable_two_batch_overlap", "gate.py:9"),)))
    assert refused.reach == "live" and "only under unified memory (gate.py:9)" in refused.reason
    assert verdict_at("KV301", "", Admission()).reach == "live"


# The speculative side of the gate: the algorithms admitted, and under EAGLE the backends a draft may run on.
DRAFT_GATE = GATE + '''
    assert cfg.speculative_algorithm in (None, "EAGLE", "DFLASH"), "refused"
    if cfg.speculative_algorithm in ("EAGLE",):
        draft = cfg.speculative_draft_attention_backend
        drafts = {draft} if draft else backends
        assert drafts <= {"triton"}, "a draft only on triton"
'''

# The algorithm enum, whose predicates say what each holds for, and the worker each algorithm gets.
SPEC = '''
class SpeculativeAlgorithm:
    EAGLE = "EAGLE"
    DFLASH = "DFLASH"
    STANDALONE = "STANDALONE"

    def is_eagle(self):
        return self in (SpeculativeAlgorithm.EAGLE, SpeculativeAlgorithm.STANDALONE)

    def is_dflash(self):
        return self == SpeculativeAlgorithm.DFLASH

    def create_worker(self):
        if self.is_dflash():
            from workers import DFlashWorker

            return DFlashWorker
        if self.is_eagle():
            from workers import EagleWorker

            return EagleWorker
        raise ValueError(self)
'''

# The draft factory's map, keyed by the draft's backend; the multi-step class builds the refused backend.
WORKERS = '''
from backends import AiterBackend, TritonBackend


class AiterDraft:
    def __init__(self, runner):
        self.steps = [AiterBackend(runner)]


class DraftFactory:
    def __init__(self, runner):
        self.runner = runner

    def create(self, name):
        return {"triton": self._triton, "aiter": self._aiter}[name]()

    def _triton(self):
        return TritonBackend(self.runner)

    def _aiter(self):
        return AiterDraft(self.runner)


class EagleWorker:
    def __init__(self, runner):
        self.draft = DraftFactory(runner).create(runner.draft_backend)


class DFlashWorker:
    def __init__(self, runner):
        self.draft = None
'''


def _draft_engine(root: Path, gate: str = DRAFT_GATE, spec: str = SPEC, workers: str = WORKERS) -> Path:
    engine = _engine(root, gate)
    for name, text in {"spec.py": spec, "workers.py": workers}.items():
        (engine / name).write_text(textwrap.dedent(text))
    return engine


def test_a_refused_backend_a_draft_builds_too_is_latent_where_the_draft_gates_refuse_it_there(tmp_path: Path) -> None:
    aiter = _by_line(_findings(_draft_engine(tmp_path)))[26]
    assert aiter["reach"] == "latent"
    reason = str(aiter["reach_reason"])
    assert "`aiter`" in reason and "AiterDraft.__init__" in reason and "draft gates refuse" in reason


def test_the_draft_class_names_the_algorithms_and_the_draft_allow_set_that_refuse_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["contract", "--no-cache", str(_draft_engine(tmp_path))])
    line = next(text for text in result.output.splitlines() if "latent AiterDraft" in text)
    assert "EAGLE, STANDALONE" in line and "gate.py:12" in line
    assert "a draft on `aiter`" in line and "gate.py:16" in line and "under EAGLE" in line


def test_without_a_draft_allow_set_the_draft_path_leaves_the_backend_unknown(tmp_path: Path) -> None:
    ungated = DRAFT_GATE.replace('        assert drafts <= {"triton"}, "a draft only on triton"\n', "")
    aiter = _by_line(_findings(_draft_engine(tmp_path, gate=ungated)))[26]
    assert aiter["reach"] == "unknown" and "AiterDraft.__init__" in str(aiter["reach_reason"])


def test_a_draft_factory_an_admitted_algorithm_without_a_draft_gate_uses_leaves_it_unknown(tmp_path: Path) -> None:
    workers = WORKERS.replace("        self.draft = None\n", "        self.draft = DraftFactory(runner).create(runner.draft_backend)\n")
    aiter = _by_line(_findings(_draft_engine(tmp_path, workers=workers)))[26]
    assert aiter["reach"] == "unknown"


def test_a_predicate_kvlint_cannot_read_ties_no_algorithm(tmp_path: Path) -> None:
    spec = SPEC.replace("return self in (SpeculativeAlgorithm.EAGLE, SpeculativeAlgorithm.STANDALONE)",
                        "return self.name.startswith(\"EAGLE\")")
    aiter = _by_line(_findings(_draft_engine(tmp_path, spec=spec)))[26]
    assert aiter["reach"] == "unknown"


def test_classes_kept_in_a_list_only_an_isinstance_test_reads_are_not_built_there(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    # A list of classes a worker only tests against: naming AiterBackend there builds nothing.
    (engine / "worker.py").write_text(textwrap.dedent('''
        from backends import AiterBackend, TritonBackend


        def graph_supported(backend):
            kinds = [TritonBackend]
            kinds.append(AiterBackend)
            return isinstance(backend, tuple(kinds))
    '''))
    assert _by_line(_findings(engine))[26]["reach"] == "latent"
    # Handed on as well, the list may be used to build: then it is a way out.
    (engine / "worker.py").write_text((engine / "worker.py").read_text().replace(
        "    return isinstance(backend, tuple(kinds))", "    build(kinds)\n    return isinstance(backend, tuple(kinds))"))
    aiter = _by_line(_findings(engine))[26]
    assert aiter["reach"] == "unknown" and "worker.py:7 (in graph_supported)" in str(aiter["reach_reason"])


def test_class_names_in_a_private_set_only_membership_tests_read_are_compared_not_looked_up(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    compared = (
        '_SKIPPED = frozenset({"AiterBackend", "TritonBackend"})\n\n\n'
        "def skips(backend):\n"
        "    return type(backend).__name__ not in _SKIPPED\n"
    )
    (engine / "verify.py").write_text(compared)
    assert _by_line(_findings(engine))[26]["reach"] == "latent"
    # Read any other way (each name looked up on a module), the set may build the class.
    (engine / "verify.py").write_text(compared + "\n\ndef build(module):\n    return [getattr(module, name) for name in _SKIPPED]\n")
    aiter = _by_line(_findings(engine))[26]
    assert aiter["reach"] == "unknown" and "spelled in a string at" in str(aiter["reach_reason"])
