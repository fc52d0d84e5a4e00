"""The running layer: from paths to findings.

`engine.run` drives it: `discovery` finds the files, `reading` reads them (or,
where `stat_table` vouches for a file's digest, only when asked), `learn` the contract,
`plan` the rules and one request per file, `prefilter`/`preparse`/`fragment`
decide what is parsed, `checker` checks one file (in `workers`), `decide`
makes every "is this reported?" decision, `cache` keeps results, `registry`
finds the rules, `phases` logs what `-v` shows.

Nothing here imports LibCST at module level except `checker` (and what it
imports): a run the cache answers never loads the parser.
"""
