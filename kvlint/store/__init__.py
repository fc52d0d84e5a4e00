"""What kvlint keeps on disk between runs, and how it knows a kept answer still holds.

`result_cache` holds each file's findings and facts keyed by everything they
depend on, with its `journal` of a run's changes; `stat_table` vouches for a
file's digest by `os.stat` alone; `contract_cache` the learned contract and what
learning read; `file_words` the names each file calls and defines;
`resolved_views` the helper views a resolution gave and what it read;
`location` where all of them live (under the project root).

Imports learning (to learn again what the contract cache no longer vouches for),
the API and `kvlint.processes`; never the run.
"""
