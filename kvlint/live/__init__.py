"""The editor's live state: a workspace held in memory and checked one text at a time.

`workspace` is the language server's engine (open buffers, saved files, the
project index kept warm), `incremental` re-checks only the function an edit
changed, by the `outline` of a file's lines, and `project_rules` runs the
project rules over the saved files' facts.

Built on the run (its checker, plan and decisions) and the store; only the
server in `kvlint.face` imports it.
"""
