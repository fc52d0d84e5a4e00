"""One run: from paths to findings.

`engine.run` drives it, phase by phase: `discovery` finds the files, `reading`
reads them (or, where the stat table vouches for a file's digest, only when
asked), the contract is learned (`kvlint.learn`, through the store's contract
cache), `project_facts` builds the project index, `plan` picks the rules and
makes one request per file, `preparse`/`fragment` decide what is parsed,
`checker` checks one file (in `workers`, with a `head_start` for a few files),
`project_run` runs the project rules, `prove` the `--prove` pass, `decide` makes
every "is this reported?" decision (`suppression`, `selection`), `registry`
finds the rules and `phases` logs what `-v` shows.

Imports the store, learning, the rules, the fixes, analysis and the API; nothing
below imports it. Nothing here imports LibCST at module level except `checker`
(and what it imports): a run the cache answers never loads the parser.
"""
