"""KV201 not in a backend class the engine only runs with whole pages: its argument handling forces
the page size above 1 for every backend the class is built for (`kvlint.learn.page_pins`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.learn.page_pins import PinRead, page_size_pins
from kvlint.running.engine import RunOptions, run
from test_pool_pairing import AITER, ASCEND, BACKENDS, MUSA, REGISTRY, VIEW, check

# sglang's post-process for a backend whose kernels need pages of 64 (hpc_ops).
CLAMP = (
    "def page_constraints(view):\n"
    "    page_size = view.page_size\n"
    "    if view.attention_backend == 'aiter' or view.decode_attention_backend == 'aiter':\n"
    "        if page_size != 64:\n"
    "            log('aiter needs 64')\n"
    "            page_size = 64\n"
    "    if page_size != view.page_size:\n"
    "        return {'page_size': page_size}\n"
    "    return {}\n"
)
# Intel XPU's: a list of sizes built in the function, the clamp returning the new size.
LISTED = (
    "def xpu_constraint(view):\n"
    "    prefill_backend, decode_backend = backends_of(view)\n"
    "    if 'aiter' in (prefill_backend, decode_backend):\n"
    "        supported = [64, 128]\n"
    "        if view.use_mla:\n"
    "            supported.extend([16, 32])\n"
    "        if view.page_size not in supported:\n"
    "            return {'page_size': 128}\n"
    "    return {}\n"
)


def flagged(root: Path, monkeypatch: pytest.MonkeyPatch, overrides: str, **changed: str) -> set[int]:
    return set(check(root, monkeypatch, **{"overrides.py": overrides, **changed}))


def test_a_backend_whose_page_size_is_clamped_above_one_has_no_paging_hazard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The unclamped backends keep theirs.
    assert flagged(tmp_path, monkeypatch, "") == {MUSA, AITER, ASCEND}
    assert flagged(tmp_path, monkeypatch, CLAMP) == {MUSA, ASCEND}


def test_a_clamp_to_a_list_the_function_builds_pins_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert flagged(tmp_path, monkeypatch, LISTED) == {MUSA, ASCEND}
    # A size of 1 among the allowed ones pins nothing.
    assert flagged(tmp_path, monkeypatch, LISTED.replace("[16, 32]", "[1, 32]")) == {MUSA, AITER, ASCEND}
    # Nor does a list grown from what kvlint cannot read.
    assert flagged(tmp_path, monkeypatch, LISTED.replace("[16, 32]", "view.sizes")) == {MUSA, AITER, ASCEND}


@pytest.mark.parametrize("changed", [
    # fa4's: the clamp holds only with the other conditions too.
    ("view.attention_backend == 'aiter' or", "view.attention_backend == 'aiter' and not view.mla and"),
    ("if page_size != 64:", "if page_size not in [1, 64]:"),
    ("            page_size = 64\n", "            page_size = view.block_size\n"),
    ("    if page_size != view.page_size:", "        page_size = view.chunk\n    if page_size != view.page_size:"),
], ids=["and-ed-with-more", "allows-one", "clamped-to-unknown", "set-again"])
def test_a_branch_that_does_not_leave_whole_pages_pins_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: tuple[str, str]
) -> None:
    assert flagged(tmp_path, monkeypatch, CLAMP.replace(*changed)) == {MUSA, AITER, ASCEND}


def test_a_clamp_missing_one_of_the_fields_naming_a_backend_pins_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file names prefill backends too: aiter chosen for prefill alone runs unclamped.
    prefill = CLAMP + "\n\ndef prefill_only(view):\n    return view.prefill_attention_backend == 'fa3'\n"
    assert flagged(tmp_path, monkeypatch, prefill) == {MUSA, AITER, ASCEND}
    covered = prefill.replace("view.decode_attention_backend == 'aiter'",
                              "view.decode_attention_backend == 'aiter' or view.prefill_attention_backend == 'aiter'")
    assert flagged(tmp_path, monkeypatch, covered) == {MUSA, ASCEND}


@pytest.mark.parametrize("elsewhere", [
    "def dllm(view):\n    if view.attention_backend == 'aiter' and view.dllm:\n        return {'page_size': view.block_size}\n",
    "def small(view):\n    if 'aiter' in (view.prefill_backend, view.decode_backend):\n        view.page_size = 1\n",
], ids=["and-ed-unreadable", "set-to-one"])
def test_a_branch_elsewhere_that_may_set_another_size_for_the_backend_undoes_its_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elsewhere: str
) -> None:
    assert flagged(tmp_path, monkeypatch, CLAMP, **{"later.py": elsewhere}) == {MUSA, AITER, ASCEND}
    # A branch for another backend leaves the pin alone.
    assert flagged(tmp_path, monkeypatch, CLAMP, **{"later.py": elsewhere.replace("'aiter'", "'fa3'")}) == {MUSA, ASCEND}


def test_a_class_also_built_outside_the_pinned_backends_keeps_its_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    anywhere = BACKENDS + "\n\nclass AnyAiter(AiterBackend):\n    pass\n\n\ndef make(runner):\n    return AnyAiter(runner)\n"
    assert flagged(tmp_path, monkeypatch, CLAMP, **{"backends.py": anywhere}) == {MUSA, AITER, ASCEND}


# A draft worker choosing its backend by a local it compares with the registry's names.
DRAFT_WORKER = (
    "from eng.backends import AiterBackend, FA3Backend\n\n\n"
    "class DraftWorker:\n"
    "    def draft_backend(self, runner):\n"
    "        kind = self.resolve_kind()\n"
    "        if kind == 'fa3':\n"
    "            return FA3Backend(runner)\n"
    "        if kind == 'aiter':\n"
    "            return self.aiter_backend(runner)\n"
    "        raise ValueError(kind)\n\n"
    "    def aiter_backend(self, runner):\n"
    "        return AiterBackend(runner)\n"
)


def test_a_class_a_worker_builds_under_a_local_naming_the_backend_stays_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert flagged(tmp_path, monkeypatch, CLAMP, **{"draft.py": DRAFT_WORKER}) == {MUSA, ASCEND}
    # A local compared with one backend name only is no choice of backend: the build is untied.
    lone = DRAFT_WORKER.replace("        if kind == 'fa3':\n            return FA3Backend(runner)\n", "")
    assert flagged(tmp_path, monkeypatch, CLAMP, **{"draft.py": lone}) == {MUSA, AITER, ASCEND}


def test_a_build_under_two_roles_backends_is_pinned_only_where_both_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inside aiter's factory, a test of the decode backend (another role): the build runs with aiter
    # for one role and fa3 for the other, and only aiter's page size is clamped.
    registry = REGISTRY.replace(
        "def create_aiter(runner):\n",
        "def create_aiter(runner):\n"
        "    decode = decode_backend_of(runner)\n"
        "    if decode == 'ascend':\n"
        "        raise ValueError(decode)\n"
        "    if decode == 'fa3':\n"
        "        from eng.backends import MusaBackend\n"
        "        return MusaBackend(runner)\n",
    ).replace("    else:\n        from eng.backends import MusaBackend\n        return MusaBackend(runner)\n", "")
    assert MUSA in flagged(tmp_path, monkeypatch, CLAMP, **{"registry.py": registry})
    contract = run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).contract
    assert "MusaBackend" not in dict(contract.page_pinned_classes)


def test_the_contract_names_each_pinned_class_with_its_backend_and_clamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check(tmp_path, monkeypatch, **{"overrides.py": CLAMP})
    contract = run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).contract
    assert dict(contract.page_pinned_classes) == {"AiterBackend": "aiter: page size 64 at eng/overrides.py:3"}


def test_an_outright_setting_under_the_backend_test_is_read() -> None:
    # sglang 0.4's ServerArgs.__post_init__.
    text = (
        "class ServerArgs:\n"
        "    def __post_init__(self):\n"
        "        if self.attention_backend == 'flashmla':\n"
        "            logger.warning('FlashMLA only supports a page_size of 64')\n"
        "            self.page_size = 64\n"
        "        if self.attention_backend == 'torch_native':\n"
        "            self.page_size = 1\n"
    )
    # A branch leaving a size of 1 is read too: it undoes any pin of its backend.
    assert page_size_pins(text.encode()) == (PinRead("flashmla", (64,), 3), PinRead("torch_native", (), 6))


def test_an_edit_to_the_clamp_is_learned_again_with_the_cache_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def cached(overrides: str) -> set[int]:
        check(tmp_path, monkeypatch, **{"overrides.py": overrides})  # writes the tree
        findings = run(load_config(), RunOptions(paths=(Path("."),), jobs=1, cache=True)).findings
        return {f.line for f in findings if f.code == "KV201" and f.path.endswith("backends.py")}

    # One tree checked three times with its result and contract caches: the clamp is read anew each time.
    assert cached(CLAMP) == {MUSA, ASCEND}
    assert cached(CLAMP.replace("page_size = 64", "page_size = 1")) == {MUSA, AITER, ASCEND}
    assert cached(CLAMP) == {MUSA, ASCEND}
    assert (tmp_path / ".kvlint_cache").is_dir()


def test_a_view_past_a_test_for_an_instance_of_a_pinned_class_runs_on_whole_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wrapper backend paging its cache only where its dense backend is the clamped one.
    wrapper = BACKENDS + (
        "\n\nclass Wrapper(FA3Backend):\n"
        "    def decode(self, layer):\n"
        "        if isinstance(self.dense, AiterBackend):\n"
        "    " + VIEW +
        "        if isinstance(self.dense, (AiterBackend, MusaBackend)):\n"
        "    " + VIEW +
        "        assert isinstance(self.dense, AiterBackend)\n" + VIEW
    )
    lines = wrapper.splitlines()
    views = [number for number, line in enumerate(lines, 1) if "view(-1" in line and number > ASCEND]
    found = flagged(tmp_path, monkeypatch, CLAMP, **{"backends.py": wrapper})
    # Past `isinstance(..., AiterBackend)` (an `if` or an `assert`) aiter runs: pages of 64. MusaBackend is not pinned.
    assert found == {MUSA, ASCEND, views[1]}


# Another subsystem of the tree (sglang's multimodal_gen) with a backend class of the same name as the
# engine's, which it builds with no backend test around it.
DIFFUSION_BACKENDS = "class AiterBackend:\n    @classmethod\n    def supported(cls):\n        return [64]\n"
DIFFUSION_PLATFORM = (
    "def backend_class_for(device):\n"
    "    from eng.diffusion.backends import AiterBackend\n"
    "    return AiterBackend.supported()\n"
)


def test_a_same_named_class_of_another_subsystem_does_not_speak_for_the_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subsystem = {"diffusion/backends.py": DIFFUSION_BACKENDS, "diffusion/platform.py": DIFFUSION_PLATFORM}
    assert flagged(tmp_path, monkeypatch, CLAMP, **subsystem) == {MUSA, ASCEND}
    # Relative, the import names the same file.
    relative = DIFFUSION_PLATFORM.replace("from eng.diffusion.backends import", "from .backends import")
    assert flagged(tmp_path, monkeypatch, CLAMP, **{**subsystem, "diffusion/platform.py": relative}) == {MUSA, ASCEND}
    # Where that code builds the engine's own class, the class is built untied again.
    engines = DIFFUSION_PLATFORM.replace("eng.diffusion.backends", "eng.backends")
    assert flagged(tmp_path, monkeypatch, CLAMP, **{**subsystem, "diffusion/platform.py": engines}) == {MUSA, AITER, ASCEND}
