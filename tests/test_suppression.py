"""Suppressions are kvlint's only when they say so (issue 35, item 3).

A project built on the engine carries other tools' comments on its door lines
(`# noqa: leading-underscore`, `# noqa: E501`): those hide nothing of kvlint's.
A bare `# noqa` or `# kvlint: ignore` still hides a rule's finding, but under
`--prove` only a suppression naming KV104 hides a KV104, and the certificate
lists every unproven door by file:line, the suppressed ones marked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.running.suppression import parse_suppressions
from engine_text import PHYSICAL_WRITE_LOC

POOL = PHYSICAL_WRITE_LOC + '''

def unwrap_write_loc(loc_info):
    if isinstance(loc_info, KVWriteLoc):
        return loc_info.loc
    return loc_info


class Pool:
    def set_kv_buffer(self, layer, loc_info, k, v):
        loc = unwrap_write_loc(loc_info)
        self.k[loc] = k
'''
BACKEND = "engine/layers/backend.py"
# Line 6: a `KVWriteLoc` built without the mark (KV102). Line 9: a loc of unknown origin (KV104 under --prove).
UNMARKED_LINE, UNKNOWN_LINE = 6, 9


def backend(unmarked: Optional[str], unknown: str) -> str:
    """The backend with `unknown` ending the unknown-loc door's line; `unmarked` None leaves out the
    unmarked door, else ends its line."""
    methods = [
        "    def forward_unmarked(self, layer, forward_batch, k, v):\n"
        f"        self.pool.set_kv_buffer(layer, KVWriteLoc(forward_batch.out_cache_loc), k, v){unmarked}\n"
        if unmarked is not None else
        "    def forward_marked(self, layer, forward_batch, k, v):\n"
        "        self.pool.set_kv_buffer(layer, KVWriteLoc.for_batch(forward_batch), k, v)\n",
        "    def forward_unknown(self, layer, k, v):\n"
        f"        self.pool.set_kv_buffer(layer, self.loc_buf, k, v){unknown}\n",
    ]
    return "from engine.mem_cache.memory_pool import KVWriteLoc\n\n\nclass Backend:\n" + "\n".join(methods)


def project(root: Path, unmarked: Optional[str] = "", unknown: str = "") -> Path:
    (root / "engine" / "mem_cache").mkdir(parents=True, exist_ok=True)
    (root / "engine" / "layers").mkdir(parents=True, exist_ok=True)
    (root / "engine" / "mem_cache" / "memory_pool.py").write_text(POOL)
    (root / BACKEND).write_text(backend(unmarked, unknown))
    return root


def kvlint(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["check", *args, "."], catch_exceptions=False)
    return result.exit_code, result.stdout


def found(*args: str) -> tuple[int, set[tuple[str, int]], dict]:
    """Exit code, (code, line) of each finding, and the JSON report."""
    code, out = kvlint("--no-cache", "--format", "json", *args)
    report = json.loads(out)
    return code, {(f["code"], f["line"]) for f in report["findings"]}, report


# The parser, as ruff reads a `# noqa`.


@pytest.mark.parametrize(
    "comment", ["# noqa: leading-underscore", "# noqa: E501", "# noqa:E501,W291", "# noqa:", "# noqa : E501"]
)
def test_noqa_naming_another_tool_suppresses_nothing(comment: str) -> None:
    assert parse_suppressions(f"x = 1  {comment}\n") == {}


@pytest.mark.parametrize("comment", ["# noqa", "# NOQA", "# noqa - the reason", "# noqa E501"])
def test_noqa_without_a_colon_is_bare_and_suppresses_every_code(comment: str) -> None:
    [(line, [suppression])] = parse_suppressions(f"x = 1  {comment}\n").items()
    assert (line, suppression.codes, suppression.bare_noqa) == (1, None, True)
    assert suppression.covers("KV101")


@pytest.mark.parametrize(
    ("comment", "codes"),
    [("# noqa: KV102, E501", {"KV102"}), ("# noqa:E501,KV101 the reason", {"KV101"}), ("# noqa: kv104", {"KV104"})],
)
def test_noqa_listing_kv_codes_suppresses_only_those(comment: str, codes: set[str]) -> None:
    [[suppression]] = parse_suppressions(f"x = 1  {comment}\n").values()
    assert (suppression.codes, suppression.bare_noqa) == (codes, False)


# `kvlint check`.


def test_another_tools_noqa_on_a_door_line_hides_no_finding(in_tmp: Path) -> None:
    project(in_tmp, unmarked="  # noqa: leading-underscore")
    code, findings, _ = found()
    assert (code, findings) == (1, {("KV102", UNMARKED_LINE)})


def test_noqa_listing_kv102_among_other_codes_suppresses_kv102(in_tmp: Path) -> None:
    project(in_tmp, unmarked="  # noqa: KV102, E501")
    assert found()[:2] == (0, set())


def test_bare_noqa_still_suppresses_a_rules_finding(in_tmp: Path) -> None:
    project(in_tmp, unmarked="  # noqa")
    assert found()[:2] == (0, set())


def test_another_tools_noqa_is_never_an_unused_ignore(in_tmp: Path) -> None:
    project(in_tmp, unmarked=None, unknown="  # noqa: E501")
    assert found("--report-unused-ignores")[:2] == (0, set())
    project(in_tmp, unmarked=None, unknown="  # noqa: E501, KV101")
    code, findings, report = found("--report-unused-ignores")
    assert (code, findings) == (1, {("KV001", UNKNOWN_LINE)})
    assert report["findings"][0]["message"] == "suppression[KV101] suppresses nothing"


# `kvlint check --prove`.


def test_another_tools_noqa_hides_nothing_under_prove(in_tmp: Path) -> None:
    project(in_tmp, unmarked="  # noqa: leading-underscore", unknown="  # noqa: leading-underscore")
    code, findings, report = found("--prove")
    assert (code, findings) == (1, {("KV102", UNMARKED_LINE), ("KV104", UNKNOWN_LINE)})
    assert report["prove"]["unproven_calls"] == [
        {"path": BACKEND, "line": UNKNOWN_LINE, "suppressed": False,
         "why": f"`self.loc_buf` ({BACKEND}:{UNKNOWN_LINE}), whose origin kvlint cannot see"},
    ]


@pytest.mark.parametrize(
    "comment", ["# noqa", "# kvlint: ignore", "# kvlint: ignore[KV1]", "# noqa: KV101", "# kvlint: ignore[KV102]"]
)
def test_kv104_is_not_hidden_by_a_suppression_that_does_not_name_it(in_tmp: Path, comment: str) -> None:
    project(in_tmp, unmarked=None, unknown=f"  {comment}")
    code, findings, report = found("--prove")
    assert (code, findings) == (1, {("KV104", UNKNOWN_LINE)})
    assert [(c["line"], c["suppressed"]) for c in report["prove"]["unproven_calls"]] == [(UNKNOWN_LINE, False)]
    assert report["prove"]["unproven"] == 1


@pytest.mark.parametrize("comment", ["# kvlint: ignore[KV104]", "# noqa: KV104", "# noqa: E501, KV104"])
def test_a_suppression_naming_kv104_hides_it_and_the_certificate_still_lists_the_door(
    in_tmp: Path, comment: str
) -> None:
    project(in_tmp, unmarked=None, unknown=f"  {comment}")
    # Nothing reported is a clean run (DESIGN: exit 0 means no findings), the door still in the certificate.
    code, findings, report = found("--prove", "--report-unused-ignores")
    assert (code, findings) == (0, set())
    assert report["prove"]["unproven"] == 1
    assert [(c["path"], c["line"], c["suppressed"]) for c in report["prove"]["unproven_calls"]] == [
        (BACKEND, UNKNOWN_LINE, True)
    ]
    code, text = kvlint("--no-cache", "--prove")
    assert code == 0
    assert "prove: 2 write-door calls: 1 proven marked, 0 raw, 1 unproven (1 suppressed)" in text
    assert text.splitlines()[-1] == (
        f"  unproven {BACKEND}:{UNKNOWN_LINE} (suppressed): `self.loc_buf` ({BACKEND}:{UNKNOWN_LINE}),"
        " whose origin kvlint cannot see"
    )


def test_a_kv104_suppression_stays_used_on_a_warm_run(in_tmp: Path) -> None:
    """The proof is read from the cache on a second run: the suppression it used must not become KV001."""
    project(in_tmp, unmarked=None, unknown="  # kvlint: ignore[KV104]")
    for _run in ("cold", "warm"):
        code, out = kvlint("--prove", "--report-unused-ignores", "--format", "json")
        assert (code, json.loads(out)["findings"]) == (0, [])


def test_per_file_ignored_kv104_is_listed_as_suppressed(in_tmp: Path) -> None:
    project(in_tmp, unmarked=None)
    (in_tmp / "kvlint.toml").write_text('[per-file-ignores]\n"engine/layers/*" = ["KV104"]\n')
    code, findings, report = found("--prove")
    assert (code, findings) == (0, set())
    assert [(c["line"], c["suppressed"]) for c in report["prove"]["unproven_calls"]] == [(UNKNOWN_LINE, True)]


def test_explain_kv104_says_only_a_suppression_naming_it_hides_it() -> None:
    text = " ".join(CliRunner().invoke(main, ["explain", "KV104"]).stdout.split())
    assert "Only a suppression naming KV104 hides it: a bare `# noqa` or `# kvlint: ignore`" in text
    assert "the certificate lists every unproven door by file:line, the suppressed ones marked" in text
