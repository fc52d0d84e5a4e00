"""Requests about findings: hover (the rule's `kvlint explain` text) and code actions (quick fixes,
"add `# kvlint: ignore[CODE]`", fix all safe), each fix's edit computed when it is chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence

from lsprotocol import types
from pygls.uris import from_fs_path

from kvlint.face.docs import explain_rule
from kvlint.face.server._convert import FIX_ALL_KIND, diagnostic, fix_title, ignore_edit, key_of, text_edit, workspace_edit
from kvlint.running.fix_edits import finding_key, project_fix, text_edits
from kvlint.live.workspace import Workspace

if TYPE_CHECKING:
    from kvlint.face.server._protocol import KvlintServer


def hover(ls: KvlintServer, params: types.HoverParams) -> Optional[types.Hover]:
    state = ls.state
    shown = ls.shown(state, params.text_document.uri) if state is not None else None
    if state is None or shown is None:
        return None
    codec, lines = ls.lines_of(state, shown)
    here = (params.position.line, params.position.character)
    for finding in [*(ls.live[shown].findings if shown in ls.live else ()), *ls.project.get(shown, ())]:
        found = diagnostic(finding, codec, lines).range
        if (found.start.line, found.start.character) <= here <= (found.end.line, found.end.character):
            text = explain_rule(finding.code)
            if text is not None:
                return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.PlainText, value=text), range=found)
    return None


async def code_action(ls: KvlintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    state = ls.state
    uri = params.text_document.uri
    shown = ls.shown(state, uri) if state is not None else None
    if state is None or shown is None or shown not in ls.live:
        return []
    only = params.context.only
    actions: list[types.CodeAction] = []
    version = ls.workspace.get_text_document(uri).version
    if not only or any(kind.startswith(types.CodeActionKind.QuickFix) for kind in only):
        actions += _quick_fixes(ls, state, shown, uri, version, params.context.diagnostics)
    if not only or any(FIX_ALL_KIND.startswith(kind) for kind in only):
        actions.append(
            types.CodeAction(
                title="kvlint: fix all safe findings in this file",
                kind=FIX_ALL_KIND,
                data={"uri": uri, "version": version, "fix_all": True},
            )
        )
    if not ls.client_resolves():
        actions = [await resolve(ls, action) for action in actions]
    return actions


def _quick_fixes(
    ls: KvlintServer, state: Workspace, shown: str, uri: str, version: Optional[int], diagnostics: Sequence[types.Diagnostic]
) -> list[types.CodeAction]:
    codec, lines = ls.lines_of(state, shown)
    actions = []
    for diag in diagnostics:
        key = key_of(diag)
        if key is None:
            continue
        fix = diag.data.get("fix") if isinstance(diag.data, dict) else None
        code = key[1]
        if fix is not None:
            label = "" if fix["applicability"] == "safe" else " (unsafe)"
            actions.append(
                types.CodeAction(
                    title=f"kvlint {code}: {fix['description']}{label}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    is_preferred=fix["applicability"] == "safe",
                    data={"uri": uri, "version": version, "key": list(key)},
                )
            )
        line = key[2]
        line_text = lines[line - 1] if 0 < line <= len(lines) else ""
        edit = ignore_edit(code, line_text, line)
        target = ls.uris.get(key[0]) or uri
        actions.append(
            types.CodeAction(
                title=f"kvlint {code}: add `# kvlint: ignore[{code}]` on line {line}",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diag],
                edit=types.WorkspaceEdit(changes={target: [text_edit(edit, codec, lines)]}),
            )
        )
    return actions


async def resolve(ls: KvlintServer, action: types.CodeAction) -> types.CodeAction:
    """Compute a fix's edit when it is chosen, on the checking thread: each one re-parses the whole file."""
    data: Any = action.data
    state = ls.state
    if action.edit is not None or not isinstance(data, dict) or state is None:
        return action
    uri = data["uri"]
    document = ls.workspace.get_text_document(uri)
    shown = ls.shown(state, uri)
    if shown is None or document.version != data.get("version"):
        return action
    text = document.source
    source = text.encode("utf-8")
    codec, lines = ls.workspace.position_codec, document.lines
    if data.get("fix_all"):
        fixed = await ls.on_worker(lambda: state.fix_all(shown, source))
        if fixed is not None:
            action.edit = workspace_edit(uri, text_edits(text, fixed.decode("utf-8")), codec, lines)
        return action
    path, code, line, column, end_line, end_column = data["key"]
    key = (path, code, line, column, end_line, end_column)
    found = next((project_fix(f) for f in ls.project.get(shown, ()) if finding_key(f) == key), None)
    if found is None:
        found = await ls.on_worker(lambda: state.fix(shown, source, key))
    if found is not None:
        target_uri = uri if found.path == shown else (ls.uris.get(found.path) or from_fs_path(str(state.root / found.path)))
        _, target_lines = ls.lines_of(state, found.path) if found.path != shown else (codec, lines)
        action.edit = workspace_edit(target_uri or uri, found.edits, codec, target_lines)
        action.title = fix_title(code, found)
    return action
