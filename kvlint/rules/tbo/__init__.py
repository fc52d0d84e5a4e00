"""Two-batch-overlap rules (KV3xx): batch fields the TBO child builder forgets.

KV301 is a project rule; its per-file facts (`_facts`) are extracted by
`_fields` (dataclass fields), `_keys` (what the builder copies) and
`_assignments` (where a field is given a value), walked with `_walk` and
positioned with `_lines`.
"""
