"""The interpreter's processes and collector, for work of any kind.

`pool` says how many workers a run may use and hands them pure work (rounds of
summaries, a function over forked data); `collector` pauses CPython's cyclic
collector over work that makes many objects and no cycles.

Imports nothing of kvlint: every other package may use it.
"""
