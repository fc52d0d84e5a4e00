"""What the attention backends share: helpers every backend inherits.

`_kv_write_loc` picks the loc a forward writes through: the capture buffer
while a CUDA graph is being captured, the batch's own loc otherwise. It
returns the batch's loc bare, so a backend that hands its result to a write
door drops the id-space mark (KV101, reported in the subclass that calls it:
`flashmla_backend.py : FlashMLABackend.forward_extend`).
"""

from __future__ import annotations


class AttentionBackend:
    capture_loc = None

    def _kv_write_loc(self, forward_batch):
        if self.capture_loc is not None:
            return self.capture_loc
        return forward_batch.out_cache_loc
