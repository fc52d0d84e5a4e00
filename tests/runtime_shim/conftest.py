"""Shared pool shapes for the runtime_shim tests.

The review thread's figures are for 32 layers, 4 KV heads, head dim 128 in a
16-bit dtype: entry_elems = 32 * 2 * 4 * 128 = 32768.
"""

from __future__ import annotations

from typing import Any, Dict

import pytest
import torch

THREAD_GEOMETRY: Dict[str, Any] = dict(
    num_slots=1024,
    page_size=256,
    layer_num=32,
    k_heads=4,
    k_dim=128,
    v_heads=4,
    v_dim=128,
    dtype=torch.float16,
    device="cpu",
)


@pytest.fixture
def thread_geometry() -> Dict[str, Any]:
    return dict(THREAD_GEOMETRY)
