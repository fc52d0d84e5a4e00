"""Which page-split pools a backend can meet, by the guards the tree builds each under: a view in
a backend that never meets one keeps its safe paged-view fix although its pool's class is unknown."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.api.types import Finding
from kvlint.learn.guards import Tie, asserted_pages, dispatch_names, guard_tie
from kvlint.learn.registries import Registering, registerings, registerings_of
from kvlint.learn.registry_read import dispatch_factories
from kvlint.running.engine import RunOptions, run
from test_layout_pool_origin import POOLS

# The NPU pool is built for the `ascend` backend (through a helper method) and on NPU machines.
CONFIGURATOR = (
    "from eng.pools import NPUPool, StridedPool\n"
    "from eng.utils import is_npu\n\n"
    "_is_npu = is_npu()\n\n\n"
    "class Configurator:\n"
    "    def build(self, cfg):\n"
    "        if cfg.dsv4:\n"
    "            return StridedPool(1, 1, 1, 1, 1)\n"
    "        elif cfg.attention_backend == 'ascend' and not cfg.mamba:\n"
    "            return self._build_ascend_pool()\n"
    "        return StridedPool(1, 1, 1, 1, 1)\n\n"
    "    def _build_ascend_pool(self):\n"
    "        return NPUPool(1, 1, 1, 1, 1)\n\n"
    "    def hybrid_class(self):\n"
    "        if _is_npu:\n"
    "            return NPUPool\n"
    "        return StridedPool\n\n\n"
    "def configure(cfg):\n"
    "    configurator = Configurator()\n"
    "    return configurator.build(cfg), configurator.hybrid_class()\n"
)
REGISTRY = (
    "from eng.utils import is_musa\n\n"
    "BACKENDS = {}\n\n\n"
    "def register_attention_backend(name):\n"
    "    def decorator(fn):\n"
    "        BACKENDS[name] = fn\n"
    "        return fn\n"
    "    return decorator\n\n\n"
    "@register_attention_backend('fa3')\n"
    "def create_fa3(runner):\n"
    "    if not is_musa():\n"
    "        from eng.backends import FA3Backend\n"
    "        return FA3Backend(runner)\n"
    "    else:\n"
    "        from eng.backends import MusaBackend\n"
    "        return MusaBackend(runner)\n\n\n"
    "@register_attention_backend('aiter')\n"
    "def create_aiter(runner):\n"
    "    from eng.backends import AiterBackend\n"
    "    return AiterBackend(runner)\n\n\n"
    "@register_attention_backend('ascend')\n"
    "def create_ascend(runner):\n"
    "    from eng.backends import AscendBackend\n"
    "    return AscendBackend(runner)\n"
)
VIEW = "        return self.pool.get_key_buffer(layer.layer_id).view(-1, self.page_size, 8, 128)\n"
BACKENDS = (
    "class FA3Backend:\n"
    "    def __init__(self, runner):\n"
    "        self.pool = runner.token_to_kv_pool\n\n\n"
    "class MusaBackend(FA3Backend):\n"
    "    def decode(self, layer):\n" + VIEW + "\n\n"
    "class AiterBackend(FA3Backend):\n"
    "    def decode(self, layer):\n" + VIEW + "\n\n"
    "class AscendBackend(FA3Backend):\n"
    "    def decode(self, layer):\n" + VIEW
)
HELPERS = "def paged_kv_view(x, page_size, heads, dim):\n    return x\n"
MUSA, AITER, ASCEND = 8, 13, 18


def check(root: Path, monkeypatch: pytest.MonkeyPatch, **changed: str) -> dict[int, Finding]:
    files = {"pools.py": POOLS, "configurator.py": CONFIGURATOR, "registry.py": REGISTRY,
             "backends.py": BACKENDS, "layout/paged_view.py": HELPERS, "utils.py": "", **changed}
    for name, text in files.items():
        path = root / "eng" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "pyproject.toml").write_text("[tool.kvlint]\n")
    monkeypatch.chdir(root)
    findings = run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).findings
    return {finding.line: finding for finding in findings if finding.code == "KV201" and finding.path.endswith("backends.py")}


def applicability(finding: Finding) -> str:
    return finding.fix.applicability.value if finding.fix is not None else "none"


def test_a_backend_built_on_another_platform_than_every_page_split_build_keeps_its_safe_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = check(tmp_path, monkeypatch)
    assert applicability(found[MUSA]) == "safe"


def test_a_backend_tied_only_to_its_name_still_meets_the_pool_built_on_a_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = check(tmp_path, monkeypatch)
    assert applicability(found[AITER]) == "unsafe"
    assert applicability(found[ASCEND]) == "unsafe"


def test_without_the_platform_build_a_backend_of_another_name_never_meets_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configurator = CONFIGURATOR.replace("        if _is_npu:\n            return NPUPool\n", "")
    found = check(tmp_path, monkeypatch, **{"configurator.py": configurator})
    assert applicability(found[AITER]) == "safe"
    # The backend the pool is built for meets it.
    assert applicability(found[ASCEND]) == "unsafe"


def test_a_page_split_pool_built_anywhere_untied_can_meet_every_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configurator = CONFIGURATOR + "\n\ndef fallback():\n    return NPUPool(1, 1, 1, 1, 1)\n"
    found = check(tmp_path, monkeypatch, **{"configurator.py": configurator})
    assert applicability(found[MUSA]) == "unsafe"


def test_a_backend_class_looked_up_by_a_string_can_meet_every_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = REGISTRY + "\n\ndef by_name(module):\n    return getattr(module, 'MusaBackend')\n"
    found = check(tmp_path, monkeypatch, **{"registry.py": registry})
    assert applicability(found[MUSA]) == "unsafe"


def test_a_subclass_built_untied_leaves_its_base_unpaired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backends = BACKENDS + "\n\nclass AnyMusa(MusaBackend):\n    pass\n\n\ndef make(runner):\n    return AnyMusa(runner)\n"
    found = check(tmp_path, monkeypatch, **{"backends.py": backends})
    assert applicability(found[MUSA]) == "unsafe"


REGISTERED = frozenset({"ascend", "fa3", "aiter"})


def _tie(test: str, holds: bool = True, backends: frozenset[str] = frozenset()) -> Tie:
    expression = ast.parse(test, mode="eval").body
    return guard_tie(expression, holds, {"is_eagle": frozenset({"EAGLE", "EAGLE3"})}, backends)


def test_guards_tie_a_branch_to_backends_and_platforms() -> None:
    assert _tie("cfg.attention_backend == 'ascend'") == Tie(backends=frozenset({"ascend"}))
    assert _tie("attention_backend in ('fa3', 'fa4')") == Tie(backends=frozenset({"fa3", "fa4"}))
    assert _tie("cfg.attention_backend != 'ascend'", holds=False) == Tie(backends=frozenset({"ascend"}))
    assert _tie("cfg.attention_backend == 'ascend'", holds=False) == Tie()
    assert _tie("_is_npu") == Tie(platforms=frozenset({"npu"}))
    assert _tie("get_platform().is_musa") == Tie(platforms=frozenset({"musa"}))
    assert _tie("not is_musa()", holds=False) == Tie(platforms=frozenset({"musa"}))
    assert _tie("is_npu() and cfg.attention_backend == 'ascend'") == Tie(frozenset({"ascend"}), frozenset({"npu"}))
    # Either part may hold: neither ties the branch. A failed `or` fails both parts.
    assert _tie("_is_npu or cfg.mamba") == Tie()
    assert _tie("cfg.mamba or not _is_npu", holds=False) == Tie(platforms=frozenset({"npu"}))
    # Not a device, not a backend name.
    assert _tie("is_blackwell()") == Tie()
    assert _tie("cfg.sampling_backend == 'ascend'") == Tie()


def test_where_a_backend_comparison_fails_the_branch_runs_under_every_other_registered_name() -> None:
    others = Tie(backends=frozenset({"fa3", "aiter"}))
    assert _tie("cfg.attention_backend == 'ascend'", holds=False, backends=REGISTERED) == others
    assert _tie("cfg.attention_backend != 'ascend'", backends=REGISTERED) == others
    assert _tie("not cfg.attention_backend in ('ascend',)", backends=REGISTERED) == others
    # A failed `and` says nothing of either part.
    assert _tie("cfg.attention_backend == 'ascend' and cfg.mla", holds=False, backends=REGISTERED) == Tie()


def test_ties_are_apart_by_disjoint_backends_platforms_or_page_sizes() -> None:
    musa = Tie(frozenset({"fa3"}), frozenset({"musa"}))
    assert musa.apart(Tie(backends=frozenset({"ascend"})))
    assert musa.apart(Tie(platforms=frozenset({"npu"})))
    assert not Tie(backends=frozenset({"aiter"})).apart(Tie(platforms=frozenset({"npu"})))
    assert not musa.apart(Tie())
    # A run has one page size; an assert allowing only sizes above 1 means whole pages.
    whole = Tie(pages=frozenset({256}))
    assert whole.apart(Tie(pages=frozenset({1}))) and not whole.apart(musa)
    assert whole.whole_pages and whole.tied and not Tie(pages=frozenset({1, 256})).whole_pages
    assert musa.narrowed(whole) == Tie(frozenset({"fa3"}), frozenset({"musa"}), pages=frozenset({256}))



def test_tests_of_two_roles_backends_narrow_to_both() -> None:
    # `decode == "fa3"` inside aiter's factory: the run chose aiter for one role and fa3 for the other.
    aiter, fa3 = Tie(backends=frozenset({"aiter"})), Tie(backends=frozenset({"fa3"}))
    both = aiter.narrowed(fa3)
    assert both == Tie(backends=frozenset({"aiter", "fa3"}))
    assert both.apart(Tie(backends=frozenset({"ascend"}))) and not both.apart(aiter)
    assert Tie(backends=frozenset({"aiter", "fa3"})).narrowed(fa3) == fa3


def test_an_edit_leaving_every_answer_alone_is_not_learned_again_in_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ties hold sets; each process salts string hashing differently, and a digest taken in
    # hash order would call every answer changed, so the next run would learn the whole tree again.
    several = "\n\ndef several(cfg):\n    if cfg.attention_backend in ('ascend', 'npu_a', 'npu_b', 'npu_c', 'npu_d'):\n" \
              "        return NPUPool(1, 1, 1, 1, 1)\n"
    check(tmp_path, monkeypatch, **{"configurator.py": CONFIGURATOR + several})

    def contract_phase(seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-m", "kvlint", "check", "-v", "."], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        return next(line for line in run.stderr.splitlines() if line.startswith("kvlint: contract"))

    assert "learned from the tree" in contract_phase("1")
    with (tmp_path / "eng" / "configurator.py").open("a") as out:
        out.write("# an edit\n")
    assert "cached" in contract_phase("2")


def test_a_pool_in_a_dict_keyed_by_something_else_than_a_backend_is_untied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Keyed by device, not by the registry's names: the key says nothing of the backend that runs.
    by_device = CONFIGURATOR + "\n\nPOOLS_BY_DEVICE = {'npu': NPUPool, 'cuda': StridedPool, 'ascend': StridedPool}\n"
    found = check(tmp_path, monkeypatch, **{"configurator.py": by_device})
    assert applicability(found[MUSA]) == "unsafe"



def test_a_pool_in_a_dict_keyed_by_a_backend_name_is_that_backends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    by_backend = CONFIGURATOR + "\n\nPOOLS_BY_BACKEND = {'ascend': NPUPool, 'fa3': StridedPool, 'aiter': StridedPool}\n"
    found = check(tmp_path, monkeypatch, **{"configurator.py": by_backend})
    assert applicability(found[MUSA]) == "safe"


# The fork layout: the NPU pool built for `ascend`, every other pool in the `else` branch.
ASCEND_ONLY = (
    "from eng.pools import NPUPool, StridedPool\n\n\n"
    "def configure(cfg):\n"
    "    if cfg.attention_backend == 'ascend':\n"
    "        return NPUPool(1, 1, 1, 1, 1)\n"
    "    else:\n"
    "        return StridedPool(1, 1, 1, 1, 1)\n"
)


def test_a_backend_meeting_only_page_split_pools_has_no_view_to_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = check(tmp_path, monkeypatch, **{"configurator.py": ASCEND_ONLY})
    assert ASCEND not in found
    # The other backends meet the strided pool: flagged, with the safe fix (they never meet the NPU pool).
    assert applicability(found[MUSA]) == applicability(found[AITER]) == "safe"


@pytest.mark.parametrize("elsewhere", [
    # A strided pool built anywhere untied can meet the Ascend backend too.
    "\n\ndef fallback():\n    return StridedPool(1, 1, 1, 1, 1)\n",
    # So can one built by a method of a class the tree builds.
    "\n\nclass Helper:\n    def make(self):\n        return StridedPool(1, 1, 1, 1, 1)\n\n\n"
    "def helper():\n    return Helper()\n",
], ids=["function", "built-class"])
def test_a_strided_pool_built_untied_elsewhere_keeps_the_view_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elsewhere: str
) -> None:
    found = check(tmp_path, monkeypatch, **{"configurator.py": ASCEND_ONLY + elsewhere})
    assert applicability(found[ASCEND]) == "unsafe"


@pytest.mark.parametrize("elsewhere", [
    # A test class no code builds, whose method no code calls.
    "\n\nclass PoolTest:\n    def test_pool(self):\n        return StridedPool(1, 1, 1, 1, 1)\n",
    # A script's own block, and a class it alone builds.
    "\n\nclass Bench:\n    def run(self):\n        return StridedPool(1, 1, 1, 1, 1)\n\n\n"
    "if __name__ == '__main__':\n    Bench().run()\n    StridedPool(1, 1, 1, 1, 1)\n",
    # Reading a class attribute, and `super(Base, self)`, build nothing.
    "\n\nclass Sized(StridedPool):\n    def __init__(self):\n        super(StridedPool, self).__init__(1, 1, 1, 1, 1)\n\n\n"
    "def block(cfg):\n    return StridedPool.block_size * cfg.n\n",
], ids=["test-class", "main-block", "attribute-and-super"])
def test_code_the_engine_never_runs_builds_nothing_it_can_meet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elsewhere: str
) -> None:
    found = check(tmp_path, monkeypatch, **{"configurator.py": ASCEND_ONLY + elsewhere})
    assert ASCEND not in found


def test_a_decorated_class_may_be_built_where_no_place_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registered = "\n\n@register\nclass Plugin:\n    def make(self):\n        return StridedPool(1, 1, 1, 1, 1)\n"
    found = check(tmp_path, monkeypatch, **{"configurator.py": ASCEND_ONLY + registered})
    assert applicability(found[ASCEND]) == "unsafe"


# An older engine's registry: one method picking the backend by comparing its parameter with each name.
DISPATCH = (
    "class Runner:\n"
    "    def backend_from_str(self, backend_str):\n"
    "        if backend_str == 'fa3':\n"
    "            from eng.backends import FA3Backend\n"
    "            return FA3Backend(self)\n"
    "        elif backend_str == 'aiter':\n"
    "            from eng.backends import AiterBackend\n"
    "            return AiterBackend(self)\n"
    "        elif backend_str == 'ascend':\n"
    "            from eng.backends import AscendBackend\n"
    "            return AscendBackend(self)\n"
    "        raise ValueError(backend_str)\n"
)


def test_a_dispatching_if_chain_is_read_as_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = check(tmp_path, monkeypatch, **{"configurator.py": ASCEND_ONLY, "registry.py": DISPATCH})
    assert ASCEND not in found
    assert applicability(found[AITER]) == "safe"


def test_a_parameter_compared_with_one_name_dispatches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lone = (
        "class Runner:\n"
        "    def backend_from_str(self, backend_str):\n"
        "        if backend_str == 'ascend':\n"
        "            from eng.backends import AscendBackend\n"
        "            return AscendBackend(self)\n"
        "        from eng.backends import AiterBackend\n"
        "        return AiterBackend(self)\n"
    )
    found = check(tmp_path, monkeypatch, **{"configurator.py": ASCEND_ONLY, "registry.py": lone})
    assert applicability(found[ASCEND]) == "unsafe"


def test_dispatch_factories_read_each_branch_and_the_dispatching_parameter() -> None:
    reads = dispatch_factories(DISPATCH.encode())
    assert [(read.name, read.function, read.returned) for read in reads] == [
        ("fa3", "backend_from_str", ("FA3Backend",)),
        ("aiter", "backend_from_str", ("AiterBackend",)),
        ("ascend", "backend_from_str", ("AscendBackend",)),
    ]
    function = ast.parse(DISPATCH).body[0].body[0]  # type: ignore[attr-defined]
    assert dispatch_names(function, REGISTERED) == frozenset({"backend_str"})
    assert dispatch_names(function, frozenset({"ascend"})) == frozenset()
    # A local the function binds, compared so, dispatches too; a name it does not bind does not.
    local = ast.parse("def pick(self):\n    kind = self.kind()\n    if kind == 'fa3': pass\n    elif kind == 'aiter': pass\n"
                      "    if GLOBAL == 'fa3' or GLOBAL == 'aiter': pass\n").body[0]
    assert isinstance(local, ast.FunctionDef) and dispatch_names(local, REGISTERED) == frozenset({"kind"})
    # Inside the dispatching function, its parameter names the backend.
    test = ast.parse("backend_str == 'ascend'", mode="eval").body
    assert guard_tie(test, True, {}, REGISTERED, frozenset({"backend_str"})) == Tie(backends=frozenset({"ascend"}))
    assert guard_tie(test, True, {}, REGISTERED) == Tie()


# A plugin registry: a class registered at import, built where the registry hands it out.
POOL_REGISTRY = (
    "_FACTORIES = []\n\n\n"
    "def register_pool_factory(name, predicate, factory):\n"
    "    for existing, _, _ in _FACTORIES:\n"
    "        if existing == name:\n"
    "            return\n"
    "    _FACTORIES.append((name, predicate, factory))\n\n\n"
    "def resolve_pool_factory(cfg):\n"
    "    for name, predicate, factory in _FACTORIES:\n"
    "        if predicate(cfg):\n"
    "            return name, factory\n"
    "    return None\n"
)
PLUGIN = (
    "from eng.pools import StridedPool\n"
    "from eng.pool_registry import register_pool_factory\n\n\n"
    "class PluginPool:\n"
    "    def __init__(self, page_size):\n"
    "        self.inner = StridedPool(1, page_size, 1, 1, 1)\n\n\n"
    "register_pool_factory('plugin', lambda cfg: cfg.plugin, PluginPool)\n"
)
PLUGIN_FIRST = (
    "from eng.pools import NPUPool, StridedPool\n"
    "from eng.pool_registry import resolve_pool_factory\n\n\n"
    "def configure(cfg):\n"
    "    if cfg.plugin_model:\n"
    "        swa_page_size = cfg.page_size\n"
    "        assert swa_page_size == 256, 'plugin pools take whole pages'\n"
    "        _, factory = resolve_pool_factory(cfg)\n"
    "        return factory(swa_page_size)\n"
    "    elif cfg.attention_backend == 'ascend':\n"
    "        return NPUPool(1, 1, 1, 1, 1)\n"
    "    else:\n"
    "        return StridedPool(1, 1, 1, 1, 1)\n"
)


def test_pools_a_registry_hands_out_past_a_page_size_assert_meet_a_backend_on_whole_pages_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plugin branch comes before the Ascend one and is tied to no backend, but its pools (the
    # plugin's own strided sub-pool too) run at page size 256: the Ascend backend's views are exact.
    found = check(tmp_path, monkeypatch, **{"configurator.py": PLUGIN_FIRST, "pool_registry.py": POOL_REGISTRY,
                                           "plugin.py": PLUGIN})
    assert ASCEND not in found
    assert applicability(found[MUSA]) == applicability(found[AITER]) == "safe"
    contract = run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).contract
    assert dict(contract.page_pinned_classes)["AscendBackend"] == (
        "every pool it can meet but page-split ones is built past an `assert` on the page size "
        "(256 at eng/configurator.py:8)")


def test_the_contract_names_the_assert_again_where_an_edit_moves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"configurator.py": PLUGIN_FIRST, "pool_registry.py": POOL_REGISTRY, "plugin.py": PLUGIN}
    check(tmp_path, monkeypatch, **files)
    cached = RunOptions(paths=(Path("."),), jobs=1, cache=True)
    assert dict(run(load_config(), cached).contract.page_pinned_classes)["AscendBackend"].endswith(
        "(256 at eng/configurator.py:8)")
    # The contract is cached now; a line above the assert moves it.
    (tmp_path / "eng" / "configurator.py").write_text("# moved\n" + PLUGIN_FIRST)
    assert dict(run(load_config(), cached).contract.page_pinned_classes)["AscendBackend"].endswith(
        "(256 at eng/configurator.py:9)")


@pytest.mark.parametrize("configurator", [
    PLUGIN_FIRST.replace("        assert swa_page_size == 256, 'plugin pools take whole pages'\n", ""),
    PLUGIN_FIRST.replace("swa_page_size == 256", "swa_page_size in (1, 256)"),
    PLUGIN_FIRST + "\n\ndef fallback(cfg):\n    return resolve_pool_factory(cfg)[1](1)\n",
], ids=["no-assert", "assert-allows-1", "handed-out-elsewhere"])
def test_a_registered_pool_that_may_run_at_page_size_1_keeps_the_backends_view_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configurator: str
) -> None:
    found = check(tmp_path, monkeypatch, **{"configurator.py": configurator, "pool_registry.py": POOL_REGISTRY,
                                           "plugin.py": PLUGIN})
    assert applicability(found[ASCEND]) == "unsafe"


@pytest.mark.parametrize("pinning, meets", [
    ("torch.empty((10, 8, 128), pin_memory=True)", False),
    ("self._alloc()", False),
    ("torch.empty((10, 8, 128))", True),
    # A device buffer built beside a pinned staging tensor is still a device buffer.
    ("self._staged()", True),
], ids=["pin-memory", "registered-in-a-method", "device-buffer", "pinned-staging-only"])
def test_a_pool_of_pinned_host_memory_built_anywhere_is_no_pool_a_backend_meets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pinning: str, meets: bool
) -> None:
    mirror = (
        "\n\nimport torch\n\n\nclass HostMirror:\n"
        "    def __init__(self):\n"
        f"        self.k_buffer = {pinning}\n\n"
        "    def _alloc(self):\n"
        "        buffer = torch.empty((10, 8, 128))\n"
        "        torch.cuda.cudart().cudaHostRegister(buffer.data_ptr(), buffer.numel(), 0)\n"
        "        return buffer\n\n"
        "    def _staged(self):\n"
        "        self.staging = torch.empty((10, 8, 128), pin_memory=True)\n"
        "        buffer = torch.empty((10, 8, 128), device='cuda')\n"
        "        torch.cuda.cudart().cudaHostRegister(self.staging.data_ptr(), 1, 0)\n"
        "        return buffer\n\n\n"
        "def offload():\n    return HostMirror()\n"
    )
    found = check(tmp_path, monkeypatch, **{"configurator.py": ASCEND_ONLY + mirror})
    assert (ASCEND in found) is meets


def test_registerings_read_the_stored_parameters_and_the_functions_handing_them_out() -> None:
    coordinators = (
        b"_COORDINATORS: dict = {}\n\n\n"
        b"def register_coordinator(name, factory):\n    _COORDINATORS[name] = factory\n\n\n"
        b"def create(name, **kwargs):\n    return _COORDINATORS[name](**kwargs)\n\n\n"
        b"def unrelated():\n    return 1\n"
    )
    assert registerings(coordinators) == (Registering("register_coordinator", ((1, "factory"),), ("create",)),)
    pools, = registerings(POOL_REGISTRY.encode())
    assert pools.parameters == ((0, "name"), (1, "predicate"), (2, "factory"))
    assert pools.readers == ("resolve_pool_factory",)
    assert pools.stores(2) and pools.stores("factory") and not pools.stores(3)
    assert registerings_of(POOL_REGISTRY.encode(), "register_pool_factory") == (pools,)
    assert registerings_of(POOL_REGISTRY.encode(), "resolve_pool_factory") == ()
    # A registry no function hands out registers nothing.
    assert registerings(b"_SEEN = set()\n_ALL = []\n\n\ndef add(x):\n    _ALL.append(x)\n") == ()


@pytest.mark.parametrize("test, pages", [
    ("page_size == 256", {256}),
    ("self.page_size in (64, 128)", {64, 128}),
    ("ps == 16 and cfg.fast", {16}),
    ("ps == cfg.size", None),
    ("other == 256", None),
    ("page_size != 1", None),
])
def test_asserted_pages_read_the_sizes_an_assert_lets_past(test: str, pages: set[int] | None) -> None:
    found = asserted_pages(ast.parse(test, mode="eval").body, frozenset({"ps"}))
    assert found == (frozenset(pages) if pages is not None else None)
