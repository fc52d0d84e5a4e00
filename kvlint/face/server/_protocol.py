"""The language server's state and document sync: documents in, diagnostics out (`_features`
registers these handlers and `_actions`' hover and code actions).

All checking happens on one worker thread, in `kvlint.live.workspace.Workspace`,
so the event loop keeps reading the client's messages; only re-reading an
edited file's project facts whole runs on a second one, beside the checks. A change schedules a
check after a short pause (`DEBOUNCE_S`); a newer change cancels it, and a
result whose document changed meanwhile is dropped, so after an edit storm
only the final text's diagnostics are published.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Awaitable, Callable, Optional, Sequence, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace.position_codec import PositionCodec

from kvlint import __version__
from kvlint.running.reach import in_reach, with_reach
from kvlint.api.config import ConfigError
from kvlint.api.types import Finding, RunError
from kvlint.face.server._convert import diagnostic
from kvlint.live.workspace import FileCheck, Workspace

log = logging.getLogger("kvlint.server")
T = TypeVar("T")

# Seconds of quiet after a change before the document is checked.
DEBOUNCE_S = 0.05
# Seconds of quiet after a check that kept a file's project facts from an earlier text (an edit
# re-checks one function; the facts come from the whole file) before they are read again whole.
FACTS_QUIET_S = 1.0
# Seconds after the workspace is loaded before the rules are loaded for the first edit.
PREPARE_AFTER_S = 0.5


class KvlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kvlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.state: Optional[Workspace] = None
        self._ready: Optional[asyncio.Future[Workspace]] = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvlint-check")
        # Re-reading a large file's project facts whole takes seconds: beside the checks, so an
        # edit typed meanwhile is not queued behind it.
        self._facts_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvlint-facts")
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._facts_pending: dict[str, asyncio.Task[None]] = {}
        # Per open document (by path as `kvlint check` shows it): its last check and the text checked.
        self.live: dict[str, FileCheck] = {}
        self.texts: dict[str, bytes] = {}
        self.uris: dict[str, str] = {}
        # The document version each `live` check was of: a publication names the text it describes.
        self.versions: dict[str, Optional[int]] = {}
        # Project findings last published, by path.
        self.project: dict[str, list[Finding]] = {}

    async def on_worker(self, function: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._worker, function)

    async def workspace_state(self) -> Workspace:
        if self._ready is None:
            self._ready = asyncio.ensure_future(self._load())
        return await asyncio.shield(self._ready)

    async def _load(self) -> Workspace:
        root = Path(self.workspace.root_path or os.getcwd())
        # `[tool.kvlint]` is found from the root, and `kvlint check` run there shows
        # paths relative to it: the server works where that command would run.
        os.chdir(root)
        try:
            state = await self.on_worker(lambda: Workspace(root))
        except ConfigError as exc:
            # The user's mistake: said once, in the words `kvlint check` would use; nothing is checked.
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"kvlint: error: {exc}"))
            raise
        self.state = state
        asyncio.ensure_future(self._read_facts(state))
        return state

    async def _read_facts(self, state: Workspace) -> None:
        """Project facts one file at a time, so checks of open documents slip in between; then the
        helpers' facts, unless the result cache had both for the saved files as they are."""
        if state.unread_facts or state.views is None:
            while state.unread_facts:
                await self.on_worker(state.read_facts)
            await self.read_views(state)
        # Diagnostics from the result cache need no rule; the first edit does. Loading the rules
        # waits until the checks of the documents opened with the workspace are done.
        await asyncio.sleep(PREPARE_AFTER_S)
        await self.on_worker(state.prepare_checks)

    async def read_views(self, state: Workspace) -> None:
        """The helpers' facts over the saved files; then every open file is checked again with them."""
        await self.on_worker(state.read_views)
        for uri in set(self.uris.values()):
            self.schedule(uri, 0)
        await self.publish_project(state, force=True)

    def client_resolves(self) -> bool:
        """Whether the client asks for a code action's edit only when it is chosen."""
        text = self.client_capabilities.text_document
        action = text.code_action if text is not None else None
        support = action.resolve_support if action is not None else None
        return support is not None and "edit" in support.properties

    def log_errors(self, errors: Sequence[RunError]) -> None:
        for error in errors:
            kind = types.MessageType.Error if error.internal else types.MessageType.Warning
            self.window_log_message(types.LogMessageParams(type=kind, message=f"kvlint: {error.path}: {error.message}"))

    def shown(self, state: Workspace, uri: str) -> Optional[str]:
        path = to_fs_path(uri)
        if path is None or not path.endswith(".py"):
            return None
        return state.shown(Path(path))

    def schedule(self, uri: str, delay: float) -> None:
        pending = self._pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self._pending[uri] = asyncio.ensure_future(self._check_later(uri, delay))

    async def _check_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        await self._logging_failures(uri, self._check_now(uri))

    async def _logging_failures(self, uri: str, work: Awaitable[None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the server must outlive any one check
            log.exception("checking %s failed", uri)
            self.log_errors([RunError(uri, f"internal error: {exc!r}", internal=True)])

    def schedule_facts(self, uri: str, shown: str, version: Optional[int]) -> None:
        pending = self._facts_pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self._facts_pending[uri] = asyncio.ensure_future(self._logging_failures(uri, self._facts_later(shown, version)))

    async def _facts_later(self, shown: str, version: Optional[int]) -> None:
        """Read the project facts of the text checked at `version` whole, unless a newer one came."""
        await asyncio.sleep(FACTS_QUIET_S)
        state, data = self.state, self.texts.get(shown)
        if state is None or data is None or self.versions.get(shown) != version:
            return
        facts = await asyncio.get_running_loop().run_in_executor(self._facts_worker, lambda: state.facts_of(shown, data))
        checked = self.live.get(shown)
        if checked is None or self.versions.get(shown) != version:
            return
        await self.on_worker(lambda: state.keep_facts(shown, data, facts))
        if self.live.get(shown) is not checked:
            return
        checked.facts, checked.facts_stale = facts, False
        await self.publish_project(state, also=shown)

    async def _check_now(self, uri: str) -> None:
        state = await self.workspace_state()
        document = self.workspace.get_text_document(uri)
        shown = self.shown(state, uri)
        if shown is None or not await self.on_worker(lambda: state.in_scope(Path(document.path))):
            return
        version, data = document.version, document.source.encode("utf-8")
        checked = await self.on_worker(lambda: state.check(shown, data))
        if self.workspace.get_text_document(uri).version != version:
            return  # a newer change has its own check scheduled
        self.live[shown], self.texts[shown], self.uris[shown] = checked, data, uri
        self.versions[shown] = version
        self.log_errors(checked.errors)
        await self.publish_project(state, also=shown)
        if checked.facts_stale:
            self.schedule_facts(uri, shown, version)

    async def publish_project(self, state: Workspace, force: bool = False, also: Optional[str] = None) -> None:
        """Project findings; publish every file whose diagnostics changed.

        A file's project findings come from the saved content of every other
        file and its own current text: an unsaved edit elsewhere changes
        nothing here until it is saved.
        """
        live, texts = dict(self.live), dict(self.texts)

        def compute() -> tuple[dict[str, list[Finding]], list[RunError]]:
            base = state.project({}, {})
            found = dict(base.findings)
            for shown, checked in live.items():
                if texts[shown] != state.saved.get(shown):
                    own = state.project({shown: checked}, {shown: texts[shown]}, only=shown)
                    found[shown] = own.findings.get(shown, [])
            return {shown: findings for shown, findings in found.items() if findings}, base.errors

        findings, errors = await self.on_worker(compute)
        self.log_errors(errors)
        before, self.project = self.project, findings
        everywhere = set(before) | set(findings) | ({also} if also else set()) | (set(self.live) if force else set())
        for shown in sorted(everywhere):
            if force or shown == also or before.get(shown) != findings.get(shown):
                self.publish(state, shown)

    def publish(self, state: Workspace, shown: str) -> None:
        uri = self.uris.get(shown) or from_fs_path(str(state.root / shown)) or shown
        findings = [*(self.live[shown].findings if shown in self.live else ()), *self.project.get(shown, ())]
        # As `kvlint check` decides: every finding with its reach, those `reach =` reports.
        findings = in_reach(with_reach(findings, state.contract.admission), state.config.reach)
        findings.sort(key=lambda finding: finding.sort_key)
        codec, lines = self.lines_of(state, shown)
        version = self.versions.get(shown) if shown in self.live else None
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, version=version, diagnostics=[diagnostic(finding, codec, lines) for finding in findings]
            )
        )

    def lines_of(self, state: Workspace, shown: str) -> tuple[PositionCodec, Sequence[str]]:
        data = self.texts.get(shown, state.saved.get(shown, b""))
        codec = self.workspace.position_codec
        return codec, data.decode("utf-8", errors="replace").splitlines(keepends=True)

    def forget(self, uri: str) -> None:
        for pending in (self._pending.pop(uri, None), self._facts_pending.pop(uri, None)):
            if pending is not None:
                pending.cancel()
        for shown, known in list(self.uris.items()):
            if known == uri:
                del self.uris[shown], self.live[shown], self.texts[shown], self.versions[shown]
                if self.state is not None:
                    self.state.forget(shown)
                if self.state is not None and shown not in self.project:
                    self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


async def initialized(ls: KvlintServer, _params: types.InitializedParams) -> None:
    await ls.workspace_state()


def did_open(ls: KvlintServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, 0)


def did_change(ls: KvlintServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, DEBOUNCE_S)


async def did_save(ls: KvlintServer, params: types.DidSaveTextDocumentParams) -> None:
    state = await ls.workspace_state()
    uri = params.text_document.uri
    shown = ls.shown(state, uri)
    if shown is None:
        return
    text = params.text if params.text is not None else ls.workspace.get_text_document(uri).source
    await ls.on_worker(lambda: state.save(shown, text.encode("utf-8")))
    ls.schedule(uri, 0)
    if not state.unread_facts:
        # A helper defined here may be what another open file's finding goes through.
        await ls.read_views(state)


def did_close(ls: KvlintServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.forget(params.text_document.uri)
