"""`kvlint server`: the Language Server Protocol over stdio, built on pygls.

Diagnostics for the unsaved text of every open Python file (exactly what
`kvlint check` run at the workspace root reports for that content), quick
fixes, "fix all safe", "add `# kvlint: ignore[CODE]`", and the rule's
`kvlint explain` text on hover. The README says how editors start it.
"""

from __future__ import annotations


def serve() -> None:
    """Serve one client over stdin/stdout until it exits."""
    # pygls, lsprotocol and the rules load only for this command: `kvlint check` never pays for them.
    from kvlint.face.server._features import build_server

    build_server().start_io()
