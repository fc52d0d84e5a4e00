"""`kvlint check --prove` (issue 20 items 2, 3 and 5) on tests/fixtures/prove/.

The fixture's backend reaches its doors every way a loc is proven (a factory
argument, an alias of a conditional, an inherited helper's return, a wrapper
door, a module helper's parameter with proven callers) and every way a proof
stops (an unknown attribute through a wrapper door, an unresolvable call, a
recursion, a module helper's parameter with one bad caller among two, a call
of a function only the contract says keeps the mark, a name bound by
unpacking, a raw loc through a reassigned parameter that no rule reports, a
loc a pool's door unwraps from its own write loc and forwards bare),
plus one helper with a
raw return, which KV101 reports.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "prove"
BACKEND = "engine/layers/backend.py"
STORE = "engine/layers/store.py"
POOL = "engine/mem_cache/memory_pool.py"


@pytest.fixture
def tree(in_tmp: Path) -> Path:
    shutil.copytree(FIXTURE, in_tmp, dirs_exist_ok=True)
    return in_tmp


def kvlint(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*args, "--no-cache"] if args[0] == "check" else list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def line_of(path: Path, text: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def report(*args: str) -> dict:
    code, out = kvlint("check", "--prove", "--format", "json", *args, ".")
    assert code == 1
    return json.loads(out)


def test_each_way_a_proof_stops_is_kv104_naming_the_link(tree: Path) -> None:
    found = {(f["path"], f["line"]): f["message"] for f in report()["findings"] if f["code"] == "KV104"}
    backend = tree / BACKEND
    assert found == {
        (BACKEND, line_of(backend, "self._store(layer, self.loc_buf")): (
            f"the loc of `_store` cannot be shown marked: `self.loc_buf` ({BACKEND}:{line_of(backend, 'self.loc_buf')}),"
            " whose origin kvlint cannot see"
        ),
        (BACKEND, line_of(backend, "make_loc(")): (
            f"the loc of `set_kv_buffer` cannot be shown marked: `make_loc(forward_batch)` ({BACKEND}:"
            f"{line_of(backend, 'make_loc(')}) calls something kvlint cannot resolve"
        ),
        (BACKEND, line_of(backend, "self._again(forward_batch, 3)")): (
            f"the loc of `set_kv_buffer` cannot be shown marked: `Backend._again` ({BACKEND}:"
            f"{line_of(backend, 'def _again')}) returns a recursive call of `Backend._again` ({BACKEND}:"
            f"{line_of(backend, 'def _again')})"
        ),
        (BACKEND, line_of(backend, "translate(")): (
            "the loc of `set_kv_buffer` cannot be shown marked: `translate(KVWriteLoc.for_batch(forward_batch))` "
            f"({BACKEND}:{line_of(backend, 'translate(')}) calls something kvlint cannot resolve"
        ),
        (BACKEND, line_of(backend, "loc, _ = ") + 1): (
            "the loc of `set_kv_buffer` cannot be shown marked: `loc` is bound by `loc, _ = self._split(forward_batch)` "
            f"({BACKEND}:{line_of(backend, 'loc, _ = ')}), which kvlint does not follow"
        ),
        # Inside a door, a loc unwrapped from the door's own write loc has lost its mark; KV103 does not
        # see this spelling, so the proof reports it.
        (POOL, 39): (
            f"the loc of `set_kv_buffer` cannot be shown marked: `loc` is unwrapped from the door's own `loc_info`"
            f" ({POOL}:38), dropping its mark: a raw loc no rule reports"
        ),
        (STORE, 5): (
            f"the loc of `set_kv_buffer` cannot be shown marked: parameter `loc` of `store_kv` ({STORE}:4)"
            f" gets `self.other_loc` ({BACKEND}:{line_of(backend, 'self.other_loc')}), whose origin kvlint cannot see"
        ),
        # The caller's raw loc reaches the door only where the helper does not reassign `loc`: KV101 does not
        # follow a reassigned parameter, so the proof reports it.
        (STORE, 11): (
            f"the loc of `set_kv_buffer` cannot be shown marked: parameter `loc` of `store_or_mark` ({STORE}:8)"
            f" gets raw `forward_batch.out_cache_loc` ({BACKEND}:{line_of(backend, 'store_or_mark(')}): a raw loc"
            " no rule reports"
        ),
    }


def test_proven_and_raw_locs_raise_no_kv104_and_are_counted(tree: Path) -> None:
    result = report()
    # Every unproven call is listed where its KV104 is, none suppressed.
    assert [(c["path"], c["line"], c["suppressed"]) for c in result["prove"].pop("unproven_calls")] == sorted(
        (f["path"], f["line"], False) for f in result["findings"] if f["code"] == "KV104"
    )
    # Ten door calls in the backend (`_store` is a door: it forwards its loc), one in `_store`
    # two in the module helpers and one in the split pool.
    assert result["prove"] == {
        "doors": 14, "proven": 5, "raw": 1, "unproven": 8, "exempt": 0,
        "by_path": {"engine": {"doors": 14, "proven": 5, "raw": 1, "unproven": 8, "exempt": 0}},
        # The tree states no unified-memory gate: every door's reach is unknown.
        "by_reach": {"unknown": {"doors": 14, "proven": 5, "raw": 1, "unproven": 8, "exempt": 0}},
        "exempt_calls": [],
    }
    assert {f["line"] for f in result["findings"] if f["code"] == "KV101" and f["path"] == BACKEND} == {
        line_of(tree / BACKEND, "return forward_batch.out_cache_loc"), line_of(tree / BACKEND, "self._maybe_raw(forward_batch, True)"),
    }


def test_a_function_the_contract_says_keeps_the_mark_proves_its_argument(tree: Path) -> None:
    (tree / "kvlint.toml").write_text('[contract]\nmark-keeping = ["translate"]\n')
    result = report()
    assert line_of(tree / BACKEND, "translate(") not in {f["line"] for f in result["findings"] if f["code"] == "KV104"}
    assert result["prove"]["proven"] == 6
    listed = kvlint("contract", ".")[1]
    assert any(line.startswith("mark-keeping") and '["translate"]' in line for line in listed.splitlines())
    assert "  door set_kv_buffer: engine/mem_cache/memory_pool.py:26: `loc_info` reaches the mark check" in listed
    assert "  door _store: engine/layers/base_backend.py:9: `loc` is forwarded to the door `set_kv_buffer`" in listed


def test_certificate_in_text_and_sarif(tree: Path) -> None:
    code, text = kvlint("check", "--prove", ".")
    assert code == 1
    lines = text.splitlines()
    assert lines[-11:-8] == [
        "prove: 14 write-door calls: 5 proven marked, 1 raw, 8 unproven",
        "  reach unknown: 14 doors, 5 proven, 1 raw, 8 unproven",
        "  engine: 14 doors, 5 proven, 1 raw, 8 unproven",
    ]
    # Then each unproven door, by file:line, with where its proof stops.
    assert lines[-8].startswith(f"  unproven {BACKEND}:{line_of(tree / BACKEND, 'self._store(layer, self.loc_buf')}: ")
    assert [line.split(": ")[0] for line in lines[-8:]] == [f"  unproven {path}:{line}" for path, line in sorted(
        (f["path"], f["line"]) for f in report()["findings"] if f["code"] == "KV104"
    )]
    _code, sarif = kvlint("check", "--prove", "--format", "sarif", ".")
    assert json.loads(sarif)["runs"][0]["properties"]["prove"]["by_path"]["engine"]["unproven"] == 8
    _code, plain = kvlint("check", "--format", "json", ".")
    assert "prove" not in json.loads(plain) and "KV104" not in plain


def test_certificate_counts_by_each_path_given(tree: Path) -> None:
    code, out = kvlint("check", "--prove", "--format", "json", "engine/layers", "engine/mem_cache")
    assert code == 1
    assert {path: counts["doors"] for path, counts in json.loads(out)["prove"]["by_path"].items()} == {
        "engine/layers": 13, "engine/mem_cache": 1,
    }


def test_min_doors_fails_a_scope_that_shrank(tree: Path) -> None:
    assert kvlint("check", "--prove", "--min-doors", "14", "-q", ".")[0] == 1
    result = CliRunner().invoke(main, ["check", "--min-doors", "15", "--no-cache", "-q", "."])
    assert result.exit_code == 2
    assert "kvlint: error: 14 write-door calls seen, fewer than --min-doors 15" in result.stderr


def test_prove_key_in_the_configuration(tree: Path) -> None:
    (tree / "kvlint.toml").write_text("prove = true\n")
    assert "KV104" in kvlint("check", "-q", ".")[1]
    (tree / "kvlint.toml").write_text('prove = "yes"\n')
    result = CliRunner().invoke(main, ["check", "--no-cache", "."])
    assert result.exit_code == 2 and "prove must be a bool" in result.stderr


def test_baseline_ratchet_records_todays_unproven_doors_and_fails_new_ones(tree: Path) -> None:
    assert kvlint("baseline", "--prove", ".", "-o", "baseline.json")[0] == 0
    assert kvlint("check", "--prove", "--baseline", "baseline.json", "-q", ".")[0] == 0
    (tree / "engine" / "layers" / "new_backend.py").write_text(
        "class NewBackend:\n    def forward(self, layer, k, v):\n        self.pool.set_kv_buffer(layer, self.loc, k, v)\n"
    )
    code, out = kvlint("check", "--prove", "--baseline", "baseline.json", "-q", ".")
    assert code == 1
    findings = [line for line in out.splitlines() if not line.startswith(" ") and " KV" in line]
    assert [line.split(": ")[0] for line in findings] == ["engine/layers/new_backend.py:3:40"]


def test_a_warm_run_reads_the_proof_from_the_cache(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def warm() -> tuple[int, str]:
        result = CliRunner().invoke(main, ["check", "--prove", "--format", "json", "."], catch_exceptions=False)
        return result.exit_code, result.stdout

    cold = warm()
    with monkeypatch.context() as patch:
        # The proof is not computed again while nothing changed: a warm run must not build the tree.
        patch.setattr("kvlint.running.prove.ProofTree", None)
        assert warm() == cold
    (tree / "engine" / "layers" / "store.py").write_text("")
    code, out = warm()
    assert json.loads(out)["prove"]["doors"] == 12 and code == 1


def test_changed_proves_the_changed_files_doors_through_unchanged_ones(tree: Path) -> None:
    """Under --changed only the changed file's door calls are counted, each proven or stopped exactly
    as in a whole-tree run: its helpers, bases and callers in unchanged files are still read."""
    whole = report()
    git = lambda *a: subprocess.run(["git", *a], cwd=tree, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "fixture")
    backend = tree / BACKEND
    backend.write_text(backend.read_text() + "# touched\n")
    changed = report("--changed", "HEAD")
    assert [f for f in changed["findings"] if f["code"] == "KV104"] == [
        f for f in whole["findings"] if f["code"] == "KV104" and f["path"] == BACKEND
    ]
    assert changed["prove"]["doors"] == 10 and changed["prove"]["proven"] == 4
