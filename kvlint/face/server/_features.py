"""The server with every handler registered: document sync from `_protocol`, requests about
findings from `_actions` (which reads the server's state, so the two stay one-way)."""

from __future__ import annotations

from typing import Any, Callable

from lsprotocol import types

from kvlint.face.server._actions import code_action, hover, resolve
from kvlint.face.server._convert import FIX_ALL_KIND
from kvlint.face.server._protocol import KvlintServer, did_change, did_close, did_open, did_save, initialized


def build_server() -> KvlintServer:
    """A server with every handler registered."""
    server = KvlintServer()
    action_options = types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.SourceFixAll, FIX_ALL_KIND],
        resolve_provider=True,
    )
    handlers: list[tuple[str, Callable[..., Any], Any]] = [
        (types.INITIALIZED, initialized, None),
        (types.TEXT_DOCUMENT_DID_OPEN, did_open, None),
        (types.TEXT_DOCUMENT_DID_CHANGE, did_change, None),
        (types.TEXT_DOCUMENT_DID_SAVE, did_save, types.SaveOptions(include_text=True)),
        (types.TEXT_DOCUMENT_DID_CLOSE, did_close, None),
        (types.TEXT_DOCUMENT_HOVER, hover, None),
        (types.TEXT_DOCUMENT_CODE_ACTION, code_action, action_options),
        (types.CODE_ACTION_RESOLVE, resolve, None),
    ]
    for method, handler, options in handlers:
        server.feature(method, options)(handler)
    return server
