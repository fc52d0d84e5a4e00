"""Code built on the engine outside its tree learns the contract from the installed engine's source.

The fixture engine is installed as upstream SGLang is: a site-packages folder holding a small
`sglang` package (its `srt/` runtime defines `KVWriteLoc` with the `physical` mark, `for_batch`,
the mark check, a gated pool with a write door, and a batch class) beside its
`sglang-0.5.22.dist-info`. The project beside it is a plugin importing it; kvlint finds the engine
through its own interpreter, `VIRTUAL_ENV`, the project's `.venv` or `engine-path`, and speaks its
vocabulary: the seed's `id_space` would be a TypeError in that engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, NoReturn

import pytest
from click.testing import CliRunner

import kvlint.learn.contract
import kvlint.store.contract_cache
from kvlint.cli import main
from kvlint.learn.installed_engine import InstalledEngine

WRITE_LOC = """\
    from dataclasses import dataclass
    from typing import Optional


    @dataclass
    class KVWriteLoc:
        loc: object
        swa_loc: Optional[object] = None
        full_loc: Optional[object] = None
        physical: bool = False

        @classmethod
        def for_batch(cls, forward_batch, *, swa_loc=None, full_loc=None):
            return cls(forward_batch.out_cache_loc, swa_loc, full_loc, physical=forward_batch.out_cache_loc_is_physical)


    def unwrap_write_loc(loc_info):
        if isinstance(loc_info, KVWriteLoc):
            return loc_info.loc, loc_info.swa_loc, loc_info.full_loc
        return loc_info, None, None


    def write_loc_is_physical(loc_info) -> bool:
        return isinstance(loc_info, KVWriteLoc) and loc_info.physical


    class UnifiedKVPool:
        requires_physical_write_loc = True

        def __init__(self, size, page_size):
            self.k_buffer = [None] * size

        def set_kv_buffer(self, layer, loc_info, cache_k, cache_v):
            if self.requires_physical_write_loc and not write_loc_is_physical(loc_info):
                raise ValueError("unmarked write loc")
            loc, _swa, _full = unwrap_write_loc(loc_info)
            self.k_buffer[layer.layer_id][loc] = cache_k
"""
FORWARD_BATCH = """\
    from dataclasses import dataclass


    @dataclass
    class ForwardBatch:
        out_cache_loc: object = None
        out_cache_loc_is_physical: bool = False
"""
# A backend of the engine's own that writes a bare loc: the engine is context, never reported.
ENGINE_BACKEND = """\
    def forward(pool, layer, forward_batch, k, v):
        pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
"""
PLUGIN = """\
    from sglang.srt.mem_cache.memory_pool import KVWriteLoc


    class MyBackend:
        def forward_extend(self, q, k, v, layer, forward_batch):
            loc = KVWriteLoc(forward_batch.out_cache_loc)
            forward_batch.token_to_kv_pool.set_kv_buffer(layer, loc, k, v)

        def forward_decode(self, q, k, v, layer, forward_batch):
            forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
"""
PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"


def install_engine(site: Path, version: str = "0.5.22", dist_info: bool = True) -> Path:
    """The fixture engine in `site` (a site-packages folder); its package folder."""
    files = {
        "sglang/__init__.py": f'__version__ = "{version}"\n',
        "sglang/srt/mem_cache/memory_pool.py": WRITE_LOC,
        "sglang/srt/model_executor/forward_batch_info.py": FORWARD_BATCH,
        "sglang/srt/layers/attention/engine_backend.py": ENGINE_BACKEND,
        # Outside the runtime package: never read.
        "sglang/bench_serving.py": "raise SystemExit('never read')\n(",
    }
    for name, text in files.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    if dist_info:
        (site / f"sglang-{version}.dist-info").mkdir()
        (site / f"sglang-{version}.dist-info" / "METADATA").write_text(f"Name: sglang\nVersion: {version}\n")
    return site / "sglang"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A plugin project importing sglang, the working directory; no engine anywhere yet."""
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = tmp_path / "plugin"
    (root / "my_backend").mkdir(parents=True)
    (root / "my_backend" / "__init__.py").write_text("")
    (root / "my_backend" / "attention.py").write_text(textwrap.dedent(PLUGIN))
    (root / "pyproject.toml").write_text('[project]\nname = "plugin"\n\n[tool.kvlint]\n')
    monkeypatch.chdir(root)
    return root


def check(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["check", "--format", "json", *args, "."], catch_exceptions=False)
    assert result.exit_code in (0, 1), result.output
    return dict(json.loads(result.stdout))


def by_code(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {finding["code"]: finding for finding in report["findings"]}


def contract_lines() -> dict[str, str]:
    result = CliRunner().invoke(main, ["contract", "."], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return {line.split()[0]: line for line in result.stdout.splitlines() if line and not line.startswith(" ")}


def assert_speaks_the_engines_words(report: dict[str, Any]) -> None:
    findings = by_code(report)
    assert set(findings) == {"KV101", "KV102"}
    kv102, kv101 = findings["KV102"], findings["KV101"]
    assert kv102["message"].startswith("`KVWriteLoc(...)` has no `physical=`: the write loc defaults to `physical=False`")
    assert "id_space" not in kv102["message"] + kv101["message"]
    assert kv102["fix"]["applicability"] == "safe"
    assert kv102["fix"]["replacement"] == "KVWriteLoc.for_batch(forward_batch)"
    assert "the batch's `physical` mark is lost, and a write door that checks the mark refuses the loc" in kv101["message"]
    assert kv101["fix"]["applicability"] == "safe"


def test_an_engine_on_kvlints_own_path_is_read_without_being_imported(project: Path, tmp_path: Path) -> None:
    engine = install_engine(tmp_path / "site")
    # The engine's package runs code when imported: kvlint must locate it, never import it.
    (engine / "__init__.py").write_text(f"open({str(tmp_path / 'IMPORTED')!r}, 'w').close()\n__version__ = '0.5.22'\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    env.pop("VIRTUAL_ENV", None)
    run = [sys.executable, "-m", "kvlint"]
    checked = subprocess.run([*run, "check", "--format", "json", "."], cwd=project, env=env, capture_output=True,
                             text=True, timeout=120)
    assert checked.returncode == 1, checked.stderr
    assert_speaks_the_engines_words(json.loads(checked.stdout))
    shown = subprocess.run([*run, "contract", "."], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    lines = {line.split()[0]: line for line in shown.stdout.splitlines() if line and not line.startswith(" ")}
    assert f"[engine sglang 0.5.22 at {engine}]" in lines["mark"]
    assert "(learned from engine sglang/srt/mem_cache/memory_pool.py:6)" in lines["mark"]
    assert lines["engine:"] == f"engine: sglang 0.5.22 at {engine}, found through kvlint's interpreter"
    assert not (tmp_path / "IMPORTED").exists()


def test_an_engine_on_sys_path_in_process(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = install_engine(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert_speaks_the_engines_words(check("--no-cache"))
    assert f"[engine sglang 0.5.22 at {engine}]" in contract_lines()["batch-factory"]


def test_an_engine_in_the_active_virtual_env(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = install_engine(tmp_path / "env" / "lib" / PYTHON / "site-packages")
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / "env"))
    assert_speaks_the_engines_words(check("--no-cache"))
    assert contract_lines()["engine:"] == f"engine: sglang 0.5.22 at {engine}, found through VIRTUAL_ENV {tmp_path / 'env'}"


def test_an_engine_in_the_projects_dot_venv(project: Path) -> None:
    # pre-commit runs kvlint in an environment of its own; the project's engine is in its .venv.
    engine = install_engine(project / ".venv" / "lib" / PYTHON / "site-packages")
    report = check("--no-cache")
    assert_speaks_the_engines_words(report)
    assert report["files_in_scope"] == 2, "the .venv is not part of the tree"
    assert contract_lines()["engine:"] == f"engine: sglang 0.5.22 at {engine}, found through .venv at {project}"


def test_an_engine_named_by_engine_path(project: Path, tmp_path: Path) -> None:
    engine = install_engine(tmp_path / "elsewhere")
    (project / "pyproject.toml").write_text('[tool.kvlint]\nengine-path = "../elsewhere/sglang"\n')
    assert_speaks_the_engines_words(check("--no-cache"))
    assert contract_lines()["engine:"] == (
        f"engine: sglang 0.5.22 at {engine}, found through engine-path in {project / 'pyproject.toml'}"
    )


def test_engine_path_wins_over_the_engine_kvlint_finds_itself(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # kvlint's own environment holds another release, spelling the mark the seed's way.
    other = install_engine(tmp_path / "kvlint-env", version="0.4.0")
    memory_pool = other / "srt" / "mem_cache" / "memory_pool.py"
    memory_pool.write_text(memory_pool.read_text().replace("physical", "id_space"))
    monkeypatch.syspath_prepend(str(tmp_path / "kvlint-env"))
    engine = install_engine(tmp_path / "project-env")
    (project / "pyproject.toml").write_text(f'[tool.kvlint]\nengine-path = "{engine}"\n')
    assert_speaks_the_engines_words(check("--no-cache"))
    assert f"[engine sglang 0.5.22 at {engine}]" in contract_lines()["mark"]


def test_the_engines_files_are_context_never_reported_or_fixed(project: Path, tmp_path: Path) -> None:
    engine = install_engine(tmp_path / "site")
    (project / "pyproject.toml").write_text(f'[tool.kvlint]\nengine-path = "{engine}"\n')
    before = {path: path.read_bytes() for path in engine.rglob("*.py")}
    report = check("--no-cache")
    assert {finding["path"] for finding in report["findings"]} == {"my_backend/attention.py"}
    assert report["files_in_scope"] == 2
    result = CliRunner().invoke(main, ["fix", "--unsafe", "."], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert {path: path.read_bytes() for path in engine.rglob("*.py")} == before
    assert "KVWriteLoc.for_batch(forward_batch)" in (project / "my_backend" / "attention.py").read_text()


def test_a_warm_run_reads_no_file_of_the_engine(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = install_engine(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert_speaks_the_engines_words(check())
    # Were a warm run to read the engine again, it would find nothing to learn from.
    shutil.rmtree(engine / "srt")

    def refuse(*_args: Any) -> NoReturn:
        raise AssertionError("the engine's source was read again")

    monkeypatch.setattr(InstalledEngine, "sources", refuse)
    assert_speaks_the_engines_words(check())
    assert "[engine sglang 0.5.22 at" in contract_lines()["mark"]


def test_an_edit_to_the_plugin_keeps_what_was_learned_from_the_engine(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_engine(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    check()
    attention = project / "my_backend" / "attention.py"
    attention.write_text(attention.read_text() + "\n\ndef helper(x):\n    return x + 1\n")

    def refuse(*_args: Any) -> NoReturn:
        raise AssertionError("learned again")

    # The edited file answers learning's questions as before: neither the tree nor the engine is learned again.
    monkeypatch.setattr(kvlint.learn.contract, "learn_asking", refuse)
    monkeypatch.setattr(InstalledEngine, "sources", refuse)
    assert_speaks_the_engines_words(check())


def test_another_version_of_the_engine_is_learned_again(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    install_engine(site)
    monkeypatch.syspath_prepend(str(site))
    check()
    # An upgrade: the dist-info beside the package names the new version.
    (site / "sglang-0.5.22.dist-info").rename(site / "sglang-0.5.23.dist-info")
    assert "[engine sglang 0.5.23 at" in contract_lines()["mark"]


def test_a_source_checkout_is_learned_again_when_its_files_change(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No dist-info beside it (an editable install, a checkout named by engine-path): its version
    # does not change with its files, so their sizes and mtimes say when to learn again.
    engine = install_engine(tmp_path / "checkout" / "python", dist_info=False)
    (project / "pyproject.toml").write_text(f'[tool.kvlint]\nengine-path = "{engine}"\n')
    assert_speaks_the_engines_words(check())
    assert "[engine sglang 0.5.22 at" in contract_lines()["mark"]
    memory_pool = engine / "srt" / "mem_cache" / "memory_pool.py"
    memory_pool.write_text(memory_pool.read_text().replace("physical", "id_space") + "# spelled the seed's way\n")
    assert '"id_space"  [engine sglang 0.5.22 at' in contract_lines()["mark"]


def test_without_an_engine_messages_say_what_kvlint_assumed_and_how_to_tell_it(project: Path) -> None:
    findings = by_code(check("--no-cache"))
    for finding in findings.values():
        message = finding["message"]
        assert "has no `id_space=`" not in message and "(`id_space=...`)" not in message
        assert "neither the scanned tree nor an installed `sglang` defines `KVWriteLoc`, so kvlint assumed the seed's " \
               "`id_space` mark and `for_batch` factory (set `engine-path` under [tool.kvlint] to sglang's package " \
               "folder, or pin `write-loc-module`, `mark`, `batch-mark` and `batch-factory`) in [tool.kvlint.contract]" \
               in message
        assert finding["fix"]["applicability"] == "unsafe"
    assert findings["KV102"]["message"].startswith("`KVWriteLoc(...)` states no mark")
    lines = contract_lines()
    assert "[fallback, missing in the tree; no installed sglang found]" in lines["mark"]
    assert lines["engine:"] == (
        "engine: no installed sglang found; looked in kvlint's interpreter, no VIRTUAL_ENV, no .venv above the scanned files"
    )


def test_without_an_engine_either_spelling_of_the_mark_states_it(project: Path) -> None:
    (project / "my_backend" / "attention.py").write_text(
        "from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n\n"
        "loc = KVWriteLoc(cache_loc, physical=True)\n"
        "other = KVWriteLoc(cache_loc, id_space='kernel')\n"
    )
    assert check("--no-cache")["findings"] == []


def test_an_unmarked_loc_of_unknown_origin_names_no_assumed_keyword(project: Path) -> None:
    (project / "my_backend" / "attention.py").write_text(
        "from sglang.srt.mem_cache.memory_pool import KVWriteLoc\n\nloc = KVWriteLoc(ctx_cache_loc)\n"
    )
    (kv102,) = check("--no-cache")["findings"]
    assert kv102["fix"] is None
    assert kv102["message"].startswith(
        "`KVWriteLoc(...)` states no mark, so the write loc is unmarked whatever its ids are; state the mark or "
        "build it with a factory: neither the scanned tree nor an installed `sglang` defines `KVWriteLoc`"
    )


def test_an_engine_installed_after_a_run_is_found_by_the_next(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert by_code(check())["KV102"]["message"].startswith("`KVWriteLoc(...)` states no mark")
    install_engine(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert_speaks_the_engines_words(check())


def test_a_tree_defining_the_write_loc_class_does_not_look_for_the_engine(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_engine(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (project / "my_backend" / "write_loc.py").write_text(
        "class KVWriteLoc:\n    loc: object\n    id_space: str = 'virtual'\n"
    )
    assert by_code(check("--no-cache"))["KV102"]["message"].startswith("`KVWriteLoc(...)` has no `id_space=`")
    assert "engine:" not in contract_lines()


@pytest.mark.parametrize(
    ("written", "error"),
    [
        ('"missing/sglang"', "engine-path 'missing/sglang' is not a folder"),
        ('"site-packages"', "engine-path 'site-packages' must name the engine's package folder (e.g. .../site-packages/sglang)"),
        ("1", "engine-path must be a str, not int"),
    ],
)
def test_a_wrong_engine_path_is_a_one_line_error_naming_the_file(project: Path, written: str, error: str) -> None:
    (project / "site-packages").mkdir()
    (project / "pyproject.toml").write_text(f"[tool.kvlint]\nengine-path = {written}\n")
    result = CliRunner().invoke(main, ["check", "."])
    assert result.exit_code == 2
    assert f"{project / 'pyproject.toml'}: {error}" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("package", [("sglang", "srt"), ("copy_of_srt",)])
def test_a_fork_of_the_engine_is_its_own_engine_and_says_the_tree_has_no_write_loc_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, package: tuple[str, ...]
) -> None:
    # A fork before the migration: the `sglang` package itself, importing its own modules, with no
    # `KVWriteLoc`. An installed sglang (another engine) has nothing to say about this tree, wherever
    # it sits: under `sglang/srt/` or copied into a folder of another name.
    install_engine(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    fork = tmp_path / "fork"
    backend = fork.joinpath(*package, "layers", "attention", "fork_backend.py")
    backend.parent.mkdir(parents=True)
    fork.joinpath(*package, "layers", "attention", "base.py").write_text("class AttentionBackend:\n    pass\n")
    backend.write_text(
        "from sglang.srt.layers.attention.base import AttentionBackend\n\n\n"
        "class ForkBackend(AttentionBackend):\n"
        "    def forward_decode(self, q, k, v, layer, forward_batch):\n"
        "        forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)\n"
    )
    (fork / "pyproject.toml").write_text("[tool.kvlint]\n")
    monkeypatch.chdir(fork)
    kv101 = by_code(check("--no-cache"))["KV101"]
    assert "the scanned tree has no `KVWriteLoc` yet, so no mark travels with the loc" in kv101["message"]
    assert "installed" not in kv101["message"] and "engine-path" not in kv101["message"]
    assert "engine:" not in contract_lines()


def test_a_plugin_vendoring_a_stand_in_module_of_the_engine_still_reads_the_installed_engine(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sglang-omni keeps `vendor/sglang/utils.py` stand-ins and imports `sglang.utils` from them; the
    # rest of its imports are the engine's, so the tree is not the engine.
    engine = install_engine(tmp_path / "site")
    monkeypatch.syspath_prepend(str(engine.parent))
    (project / "vendor" / "sglang").mkdir(parents=True)
    (project / "vendor" / "sglang" / "__init__.py").write_text("")
    (project / "vendor" / "sglang" / "utils.py").write_text("def helper():\n    return 1\n")
    (project / "my_backend" / "util_user.py").write_text("from sglang.utils import helper\n")
    assert_speaks_the_engines_words(check("--no-cache"))
    assert "engine:" in contract_lines()
