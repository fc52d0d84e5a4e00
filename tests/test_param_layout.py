"""KV201/KV202 one call away: paged KV passed to a helper that pages or packs its parameter
(issue 14, the parameter fact), and the name fallback that does not survive `.to(...)`."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.api.config import load_config
from kvlint.api.types import Finding
from kvlint.running.engine import RunOptions, run

PAGING = (
    "def _paged(buf, ps):\n"
    "    return buf.view(-1, ps, 1, 512)\n"
)
CALLER = (
    "from eng.ops.paging import _paged\n\n\n"
    "class MLA:\n"
    "    def forward(self, layer, pool):\n"
    "        return _paged(pool.get_key_buffer(layer.layer_id), self.page_size)\n"
)


def check(root: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> list[Finding]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.chdir(root)
    return run(load_config(), RunOptions(paths=(Path("."),), jobs=1)).findings


def where(findings: list[Finding]) -> list[tuple[str, str, int, int]]:
    return [(finding.code, finding.path, finding.line, finding.column) for finding in findings]


def test_paged_kv_passed_to_a_paging_helper_in_another_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [finding] = check(tmp_path, monkeypatch, {"eng/ops/paging.py": PAGING, "eng/attn/mla.py": CALLER})
    # At the argument as the caller spells it.
    assert where([finding]) == [("KV201", "eng/attn/mla.py", 6, 23)]
    assert "`_paged`" in finding.message and "eng/ops/paging.py:2" in finding.message
    assert "`buf.view(-1, ps, 1, 512)`" in finding.message
    assert finding.fix is None and "no fix at this call" in finding.message


def test_the_page_size_a_helper_takes_must_be_named_one_at_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caller = CALLER.replace("self.page_size", "self.block")
    assert check(tmp_path, monkeypatch, {"eng/ops/paging.py": PAGING, "eng/attn/mla.py": caller}) == []


def test_a_chain_of_three_helpers_across_files_and_the_class_hierarchy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "eng/ops/paging.py": PAGING,
        "eng/ops/mid.py": "from eng.ops.paging import _paged\n\n\ndef _mid(x, page_size):\n    return _paged(x, page_size)\n",
        "eng/attn/base.py": (
            "from eng.ops import mid\n\n\n"
            "class Base:\n"
            "    def _kv(self, cache):\n"
            "        return mid._mid(cache, self.page_size)\n"
        ),
        "eng/attn/mla.py": (
            "from eng.attn.base import Base\n\n\n"
            "class MLA(Base):\n"
            "    def forward(self, layer, pool, dtype):\n"
            "        kv = pool.get_key_buffer(layer.layer_id)[:, :, :512].to(dtype)\n"
            "        return self._kv(kv)\n"
        ),
    }
    [finding] = check(tmp_path, monkeypatch, files)
    assert where([finding]) == [("KV201", "eng/attn/mla.py", 7, 25)]
    assert "`Base._kv`" in finding.message and "eng/ops/paging.py:2" in finding.message


def test_paged_kv_from_a_helper_passed_on_to_a_packing_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "eng/ops/rows.py": (
            "def _rows(buf):\n    return buf.reshape(-1, 512)\n\n\n"
            "def _kv(pool, layer):\n    return pool.get_key_buffer(layer.layer_id)\n"
        ),
        "eng/attn/mla.py": (
            "from eng.ops.rows import _kv, _rows\n\n\n"
            "def forward(layer, pool, page_size):\n"
            "    return _rows(_kv(pool, layer)), _rows(paged_kv_view(pool.get_key_buffer(0), page_size, 1, 512))\n"
        ),
    }
    findings = check(tmp_path, monkeypatch, files)
    # The page view's `reshape(-1, 512)` would merge pages, a view; the per-layer buffer's packs.
    assert where(findings) == [("KV202", "eng/attn/mla.py", 5, 18)]
    assert "`_rows`" in findings[0].message and "eng/ops/rows.py:2" in findings[0].message
    assert "paged KV from the helper `_kv`" in findings[0].message


def test_recursion_terminates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "eng/ops/loop.py": (
            "def _ping(buf, n):\n    return _pong(buf, n - 1) if n else buf.contiguous()\n\n\n"
            "def _pong(buf, n):\n    return _ping(buf, n)\n"
        ),
        "eng/attn/mla.py": "from eng.ops.loop import _pong\n\n\ndef forward(pool):\n    return _pong(pool.get_key_buffer(0), 3)\n",
    }
    assert where(check(tmp_path, monkeypatch, files)) == [("KV202", "eng/attn/mla.py", 5, 18)]


def test_an_unresolved_callee_gives_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caller = CALLER.replace("from eng.ops.paging import _paged", "from ext_kernels import _paged")
    assert check(tmp_path, monkeypatch, {"eng/ops/paging.py": PAGING, "eng/attn/mla.py": caller}) == []


@pytest.mark.parametrize(
    "body",
    [
        "return buf.view(buf.shape[0], -1)",
        "return paged_kv_view(buf, ps, 1, 512)",
        "return buf.flatten(1)",
        "return buf[ps].contiguous()",
    ],
)
def test_a_helper_whose_use_is_safe_gives_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    paging = f"def _paged(buf, ps):\n    {body}\n"
    assert check(tmp_path, monkeypatch, {"eng/ops/paging.py": paging, "eng/attn/mla.py": CALLER}) == []


def test_a_cache_named_parameter_is_not_enough_at_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    caller = CALLER.replace("(self, layer, pool)", "(self, layer, k_cache)").replace(
        "pool.get_key_buffer(layer.layer_id)", "k_cache"
    )
    assert check(tmp_path, monkeypatch, {"eng/ops/paging.py": PAGING, "eng/attn/mla.py": caller}) == []


def test_a_cache_named_parameter_through_to_is_not_paged_kv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # QSA's decode kernel wrapper: a compressed cache cast for the kernel; by its name alone
    # and `.to` keeping it only if the dtype matches, nothing says it is a pool view.
    kernel = (
        "def decode(q, k_cache, dtype):\n"
        "    a = k_cache.to(dtype).contiguous()\n"
        "    b = k_cache.type(dtype).flatten()\n"
        "    return a, b, k_cache.detach().contiguous()\n"
    )
    assert where(check(tmp_path, monkeypatch, {"qsa/mqa.py": kernel})) == [("KV202", "qsa/mqa.py", 4, 18)]


UNIT_PAGE = "def _rows(buf):\n    return buf.view(-1, 1, buf.shape[-1])\n"
UNIT_CALLER = "from eng.ops.rows import _rows\n\n\ndef write(pool, i):\n    return _rows(pool.kv_buffer[i])\n"


def test_a_page_size_1_split_counts_where_dim_0_holds_slots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    findings = check(tmp_path, monkeypatch, {"eng/ops/rows.py": UNIT_PAGE, "eng/attn/mla.py": UNIT_CALLER})
    assert where(findings) == [("KV201", "eng/attn/mla.py", 5, 18)]


def test_a_page_size_1_view_of_a_page_split_pools_buffer_flattens_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The NPU pools allocate `(pages, page_size, 1, D)`: `view(-1, 1, D)` is their token rows.
    pool = (
        "import torch\n\n\n"
        "class NPUPool:\n"
        "    def __init__(self, size, page_size, layers, dim):\n"
        "        self.kv_buffer = torch.zeros((layers, size // page_size + 1, page_size, 1, dim))\n"
    )
    caller = (
        "from eng.ops.rows import _rows\nfrom eng.mem.pool import NPUPool\n\n\n"
        "def write(pool: NPUPool, i):\n    return _rows(pool.kv_buffer[i])\n"
    )
    files = {"eng/mem/pool.py": pool, "eng/ops/rows.py": UNIT_PAGE, "eng/attn/mla.py": caller}
    assert check(tmp_path, monkeypatch, files) == []


def test_a_1_before_a_named_page_size_is_not_a_page_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # NPU's NZ format: `(pages, 1, H * D // 16, page_size, 16)`, not `view(-1, page_size, *row)`.
    nz = "def _nz(t, h, d, page_size):\n    return t.view(-1, 1, h * d // 16, page_size, 16)\n"
    caller = (
        "from eng.ops.nz import _nz\n\n\n"
        "def forward(self, pool, h, d):\n"
        "    k = pool.get_key_buffer(0)\n"
        "    return _nz(k, h, d, self.page_size), k.view(-1, 1, h * d // 16, self.page_size, 16)\n"
    )
    assert check(tmp_path, monkeypatch, {"eng/ops/nz.py": nz, "eng/attn/mla.py": caller}) == []
