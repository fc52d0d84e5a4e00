"""Layout rules (KV2xx): views and copies of paged KV tensors that a token-major
entry stride breaks.

`_paged_kv` decides which values are paged KV tensors; `_view_shape` reads the
shape arguments of a `.view(...)`.
"""
