"""Two-batch-overlap rules (KV3xx): batch fields the TBO child builder forgets.

KV301 is a project rule; its per-file facts (`_facts`) are extracted by
`_fields` (dataclass fields), `_keys` (what the builder copies) and
`_assignments` (where a field is given a value, whether that value can be
None, `_values`, and whether the write always runs, `_conditions`; and the
calls handing a batch on, `_calls`), walked with `kvlint.analysis.ast_walk`
and positioned with `_source`. `_tree` resolves names across files, `_timing`
places each assignment before or after the split.
"""
