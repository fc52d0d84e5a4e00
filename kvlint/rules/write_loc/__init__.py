"""Write-location rules (KV1xx): a write door must receive a loc that carries its mark.

Helpers only this family uses live in `_raw_loc` (what a batch's raw loc looks
like, and how a fix spells the marked one) and `_batch_flow` (where a batch
built by hand goes before its mark is bound, for KV105).
"""
