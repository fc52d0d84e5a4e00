"""The batch a forward carries, with the mark that says which id space its write loc is in.

Engine code builds it through its own path (`init_new`), which binds the
iteration's plan; a runner capturing a graph builds one by hand over its own
slot buffer. Built by hand, its ``out_cache_loc_id_space`` keeps the default,
``"virtual"``, whatever ids the buffer holds, so `KVWriteLoc.for_batch` carries
that to the pool and a strict pool refuses the write (kvlint's KV105) until
something binds it (`KVIndexTranslator.bind_runner_slots`, `rebind_write_loc`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from runtime_shim.write_loc import VIRTUAL


@dataclass
class ForwardBatch:
    out_cache_loc: torch.Tensor
    out_cache_loc_id_space: str = VIRTUAL
    out_cache_loc_virtual: Optional[torch.Tensor] = None
    encoder_out_cache_loc: Optional[torch.Tensor] = None
