"""What each output says of reach: `--reach` scopes the report and the exit code, `--statistics`
counts by reach, the `--prove` certificate splits by it, the language server shows it.

The tree is test_reach's: a gate admitting `triton` and `fa3`, a registry whose `aiter` factory the
gate refuses, and one raw write in each of a shared helper (unknown), the `fa3` backend's
hardware subclass (live) and the `aiter` backend (latent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from test_reach import COMPUTED_GATE, _engine
from test_server import Session, run_session

from kvlint.face.cli import main

# The raw write of each reach in backends.py, by line.
UNKNOWN_LINE, LIVE_LINE, LATENT_LINE = 7, 21, 26
RAW_WRITE = "forward_batch.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)"


def kvlint(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", "--no-cache", *args, str(root)])
    return result.exit_code, result.stdout


def without_writes(root: Path, *reaches: str) -> Path:
    """`root` with the raw write of each of `reaches` replaced by `pass` (the lines stay put)."""
    backends = root / "backends.py"
    lines = backends.read_text().splitlines(keepends=True)
    for reach in reaches:
        index = {"unknown": UNKNOWN_LINE, "live": LIVE_LINE, "latent": LATENT_LINE}[reach] - 1
        indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
        lines[index] = f"{indent}pass\n"
    backends.write_text("".join(lines))
    return root


def test_reach_live_passes_a_tree_whose_findings_are_all_latent_and_prints_none(tmp_path: Path) -> None:
    root = without_writes(_engine(tmp_path), "unknown", "live")
    assert kvlint(root)[0] == 1
    code, out = kvlint(root, "--reach", "live")
    assert code == 0
    assert "KV101" not in out and RAW_WRITE not in out


def test_reach_live_fails_on_a_live_finding_and_prints_it_alone(tmp_path: Path) -> None:
    root = without_writes(_engine(tmp_path), "unknown")
    code, out = kvlint(root, "--reach", "live")
    assert code == 1
    flagged = [line for line in out.splitlines() if " KV101 " in line]
    assert len(flagged) == 1
    assert f"backends.py:{LIVE_LINE}:" in flagged[0] and flagged[0].endswith(" [live]")


def test_reach_live_keeps_an_unknown_finding_and_live_only_drops_it(tmp_path: Path) -> None:
    root = without_writes(_engine(tmp_path), "live")
    code, out = kvlint(root, "--reach", "live", "--format", "json")
    assert code == 1
    assert [(f["line"], f["reach"]) for f in json.loads(out)["findings"]] == [(UNKNOWN_LINE, "unknown")]
    code, out = kvlint(root, "--reach", "live-only", "--format", "json")
    assert code == 0
    assert json.loads(out)["findings"] == []


def test_statistics_count_the_findings_by_reach(tmp_path: Path) -> None:
    _code, out = kvlint(_engine(tmp_path), "--statistics", "--quiet")
    assert out.splitlines()[-5:-1] == [
        "     3  KV101  bare-write-loc  (3 fixable: 3 with --unsafe)",
        "     1  reach latent",
        "     1  reach live",
        "     1  reach unknown",
    ]


def test_statistics_under_reach_live_count_only_what_it_reports(tmp_path: Path) -> None:
    _code, out = kvlint(_engine(tmp_path), "--statistics", "--quiet", "--reach", "live")
    assert "     1  reach live" in out.splitlines() and "     1  reach unknown" in out.splitlines()
    assert not any("latent" in line for line in out.splitlines())


def test_the_prove_certificate_splits_its_counts_by_reach_in_json_and_text(tmp_path: Path) -> None:
    root = _engine(tmp_path)
    _code, out = kvlint(root, "--prove", "--format", "json")
    one_raw = {"doors": 1, "proven": 0, "raw": 1, "unproven": 0, "exempt": 0}
    certificate = json.loads(out)["prove"]
    assert certificate["by_reach"] == {"latent": one_raw, "live": one_raw, "unknown": one_raw}
    assert certificate["raw"] == 3
    _code, text = kvlint(root, "--prove", "--quiet")
    lines = text.splitlines()
    start = lines.index("prove: 3 write-door calls: 0 proven marked, 3 raw, 0 unproven")
    assert lines[start + 1 : start + 4] == [
        "  reach latent: 1 doors, 0 proven, 1 raw, 0 unproven",
        "  reach live: 1 doors, 0 proven, 1 raw, 0 unproven",
        "  reach unknown: 1 doors, 0 proven, 1 raw, 0 unproven",
    ]


def test_the_certificate_counts_every_door_whatever_reach_reports(tmp_path: Path) -> None:
    # A scoped job still proves the whole scope: only the findings are scoped.
    _code, out = kvlint(_engine(tmp_path), "--prove", "--reach", "live-only", "--format", "json")
    report = json.loads(out)
    assert report["prove"]["doors"] == 3 and set(report["prove"]["by_reach"]) == {"latent", "live", "unknown"}
    assert [f["reach"] for f in report["findings"]] == ["live"]


def test_the_language_server_shows_each_findings_reach(tmp_path: Path) -> None:
    root = _engine(tmp_path)
    seen: dict[str, Any] = {}

    async def scenario(s: Session) -> None:
        s.open("backends.py")
        seen["diagnostics"] = await s.published("backends.py")

    run_session(root, scenario)
    by_line = {d.range.start.line + 1: d for d in seen["diagnostics"]}
    assert sorted(by_line) == [UNKNOWN_LINE, LIVE_LINE, LATENT_LINE]
    for line, reach in ((UNKNOWN_LINE, "unknown"), (LIVE_LINE, "live"), (LATENT_LINE, "latent")):
        # On the message's one line (an editor shows no custom field), and in the data with its reason.
        assert by_line[line].message.endswith(f" [{reach}]") and "\n" not in by_line[line].message
        assert by_line[line].data["reach"] == reach
    assert "gate.py:9" in by_line[LATENT_LINE].data["reach_reason"]


def test_the_language_server_reports_what_reach_in_the_configuration_scopes(tmp_path: Path) -> None:
    root = _engine(tmp_path)
    (root / "pyproject.toml").write_text('[tool.kvlint]\nreach = "live-only"\n')
    seen: dict[str, Any] = {}

    async def scenario(s: Session) -> None:
        s.open("backends.py")
        seen["diagnostics"] = await s.published("backends.py")

    run_session(root, scenario)
    assert [(d.range.start.line + 1, d.message.rsplit(" ", 1)[-1]) for d in seen["diagnostics"]] == [(LIVE_LINE, "[live]")]


def test_a_long_allow_set_kvlint_cannot_read_is_quoted_shortened_in_each_reason(tmp_path: Path) -> None:
    computed = "load_allowed(" + ", ".join(f'"backend_{index}"' for index in range(30)) + ")"
    root = _engine(tmp_path, COMPUTED_GATE.replace("load_allowed()", computed))
    findings = json.loads(kvlint(root, "--format", "json")[1])["findings"]
    reasons = {finding["reach_reason"] for finding in findings}
    assert len(reasons) == 1
    (reason,) = reasons
    assert reason.startswith("an allow-set kvlint cannot read: ") and "gate.py:6: `load_allowed(" in reason
    assert "…" in reason and "backend_15" not in reason


def test_a_class_named_in_a_method_decorator_elsewhere_is_not_latent(tmp_path: Path) -> None:
    # Learning walks only the parts of a definition whose lines name the class; a decorator
    # stands above its `def` line, and may build the class where no gate refuses it.
    root = _engine(tmp_path)
    assert {f["line"]: f["reach"] for f in json.loads(kvlint(root, "--format", "json")[1])["findings"]}[LATENT_LINE] == "latent"
    (root / "plugins.py").write_text(
        "from backends import AiterBackend\n\n\nclass Plugins:\n    x = 1\n\n"
        "    @hook(AiterBackend)\n    def run(self):\n        pass\n"
    )
    found = {f["line"]: f for f in json.loads(kvlint(root, "--format", "json")[1])["findings"] if f["path"].endswith("backends.py")}
    assert found[LATENT_LINE]["reach"] == "unknown"
