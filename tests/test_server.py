"""`kvlint server` end to end: a real LSP client (pygls') talks to `python -m kvlint server` over stdio.

Each scenario starts one server on a small tree and compares what the editor
sees with what `kvlint check` / `kvlint fix` say for the same text.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional

from click.testing import CliRunner
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

from kvlint.cli import main
from kvlint.running.registry import rule_by_code

CONFIG = '[contract]\nwrite-loc-module = "runtime_shim"\npaged-helpers-module = "runtime_shim.paged"\n'
KV101_AND_KV201 = (
    "def write(pool, layer, fb, k, v):\n"
    "    pool.set_kv_buffer(layer, fb.out_cache_loc, k, v)\n"
    "\n\n"
    "def decode(self, pool, layer):\n"
    "    k_cache, v_cache = pool.get_kv_buffer(layer.layer_id)\n"
    "    k_cache = k_cache.view(-1, self.page_size, layer.tp_k_head_num, layer.head_dim)\n"
    "    return k_cache\n"
)
TIMEOUT = 60.0


class Session:
    """One server process and the client talking to it."""

    def __init__(self, root: Path, command: tuple[str, ...] = ("-m", "kvlint", "server")) -> None:
        self.root = root
        self.command = command
        self.client = LanguageClient("kvlint-test", "1")
        self.diagnostics: dict[str, list[types.PublishDiagnosticsParams]] = {}
        self.logs: list[str] = []
        self.versions: dict[str, int] = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.diagnostics.setdefault(params.uri, []).append(params)

        @self.client.feature(types.WINDOW_LOG_MESSAGE)
        def _log(params: types.LogMessageParams) -> None:
            self.logs.append(params.message)

    async def start(self) -> None:
        await self.client.start_io(sys.executable, *self.command, cwd=str(self.root))
        capabilities = types.ClientCapabilities(
            text_document=types.TextDocumentClientCapabilities(
                code_action=types.CodeActionClientCapabilities(
                    resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])
                )
            )
        )
        await self.client.initialize_async(
            types.InitializeParams(capabilities=capabilities, root_uri=from_fs_path(str(self.root)))
        )
        self.client.initialized(types.InitializedParams())

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    def uri(self, name: str) -> str:
        uri = from_fs_path(str(self.root / name))
        assert uri is not None
        return uri

    def open(self, name: str, text: Optional[str] = None) -> None:
        self.versions[name] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                types.TextDocumentItem(self.uri(name), "python", 1, text if text is not None else (self.root / name).read_text())
            )
        )

    def change(self, name: str, text: str) -> int:
        self.versions[name] += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=self.uri(name), version=self.versions[name]),
                [types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.versions[name]

    def save(self, name: str, text: str) -> None:
        (self.root / name).write_text(text)
        self.client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(self.uri(name)), text))

    async def until(self, condition: Callable[[], Any], what: str) -> Any:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}; logs: {self.logs}")

    async def published(self, name: str, count: int = 1) -> list[types.Diagnostic]:
        """The latest diagnostics of `name` once at least `count` publications arrived."""
        uri = self.uri(name)
        await self.until(lambda: len(self.diagnostics.get(uri, [])) >= count, f"{count} publications for {name}")
        return self.diagnostics[uri][-1].diagnostics

    def publications(self, name: str) -> int:
        return len(self.diagnostics.get(self.uri(name), []))


def run_session(root: Path, scenario: Callable[[Session], Awaitable[None]], *command: str) -> None:
    async def body() -> None:
        session = Session(root, *([command] if command else []))
        await session.start()
        try:
            await scenario(session)
        finally:
            await session.stop()

    asyncio.run(body())


def check_json(root: Path, monkeypatch: Any) -> list[dict[str, Any]]:
    """`kvlint check --format json` run at `root`, as the oracle."""
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["check", "--no-cache", "--format", "json"])
    findings: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return findings


def as_finding(diagnostic: types.Diagnostic) -> tuple[Any, ...]:
    start, end = diagnostic.range.start, diagnostic.range.end
    severity = {types.DiagnosticSeverity.Error: "error", types.DiagnosticSeverity.Warning: "warning"}[diagnostic.severity]
    return (diagnostic.code, start.line + 1, start.character + 1, end.line + 1, end.character + 1, diagnostic.message, severity)


def expected(findings: list[dict[str, Any]], path: str) -> list[tuple[Any, ...]]:
    return [
        # The editor shows no custom field: a diagnostic's message ends with the finding's reach.
        (f["code"], f["line"], f["column"], f["end_line"], f["end_column"], f"{f['message']} [{f['reach']}]", f["severity"])
        for f in findings if f["path"] == path
    ]


def apply(text: str, edits: list[types.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(len(line) for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text


def test_diagnostics_quick_fixes_fix_all_hover_and_ignore(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "kvlint.toml").write_text(CONFIG)
    (root / "backend.py").write_text(KV101_AND_KV201)
    oracle = check_json(root, monkeypatch)
    # Beside the workspace, not in it: the fixed copy imports the engine (`runtime_shim`), whose
    # source the server's contract would then learn from, and the oracle's did not.
    fixed_by_cli = tmp_path / "fixed"
    fixed_by_cli.mkdir()
    (fixed_by_cli / "kvlint.toml").write_text(CONFIG)
    (fixed_by_cli / "backend.py").write_text(KV101_AND_KV201)
    CliRunner().invoke(main, ["fix", "--no-cache", str(fixed_by_cli / "backend.py")])
    monkeypatch.chdir(root)

    async def scenario(s: Session) -> None:
        s.open("backend.py")
        diagnostics = await s.published("backend.py")
        assert sorted(as_finding(d) for d in diagnostics) == sorted(expected(oracle, "backend.py"))
        assert {d.code for d in diagnostics} == {"KV101", "KV201"}
        kv101 = next(d for d in diagnostics if d.code == "KV101")

        hover = await s.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(s.uri("backend.py")), kv101.range.start)
        )
        assert hover is not None and "KV101 bare-write-loc" in hover.contents.value and "Why is this bad?" in hover.contents.value

        actions = await s.client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(s.uri("backend.py")), kv101.range, types.CodeActionContext(diagnostics=[kv101])
            )
        )
        titles = [a.title for a in actions]
        fix = next(a for a in actions if a.is_preferred)
        assert "KVWriteLoc.for_batch(fb)" in fix.title and "(unsafe)" not in fix.title
        ignore = next(a for a in actions if "kvlint: ignore[KV101]" in a.title)
        fix_all = next(a for a in actions if a.kind == "source.fixAll.kvlint")
        assert len(titles) == 3

        ignored = apply(KV101_AND_KV201, ignore.edit.changes[s.uri("backend.py")])
        assert ignored.splitlines()[1].endswith("k, v)  # kvlint: ignore[KV101]")

        resolved = await s.client.code_action_resolve_async(fix)
        after_fix = apply(KV101_AND_KV201, resolved.edit.changes[s.uri("backend.py")])
        version = s.change("backend.py", after_fix)
        await s.until(lambda: s.diagnostics[s.uri("backend.py")][-1].version == version, "diagnostics after the fix")
        assert [d.code for d in s.diagnostics[s.uri("backend.py")][-1].diagnostics] == ["KV201"]

        # Fix all on the original text gives byte for byte what `kvlint fix` wrote.
        version = s.change("backend.py", KV101_AND_KV201)
        await s.until(lambda: s.diagnostics[s.uri("backend.py")][-1].version == version, "diagnostics after undo")
        fix_all.data["version"] = version
        resolved_all = await s.client.code_action_resolve_async(fix_all)
        after_all = apply(KV101_AND_KV201, resolved_all.edit.changes[s.uri("backend.py")])
        assert after_all == (fixed_by_cli / "backend.py").read_text() != KV101_AND_KV201
        version = s.change("backend.py", after_all)
        await s.until(lambda: s.diagnostics[s.uri("backend.py")][-1].version == version, "diagnostics after fix all")
        assert list(s.diagnostics[s.uri("backend.py")][-1].diagnostics) == []

        ignored_version = s.change("backend.py", ignored)
        await s.until(lambda: s.diagnostics[s.uri("backend.py")][-1].version == ignored_version, "suppressed")
        assert [d.code for d in s.diagnostics[s.uri("backend.py")][-1].diagnostics] == ["KV201"]

    run_session(root, scenario)


HELPER_BASE = (
    "class AttnBase:\n"
    "    def _kv_write_loc(self, forward_batch):\n"
    "        return forward_batch.out_cache_loc\n"
)
HELPER_CALLER = (
    "from eng.base import AttnBase\n\n\n"
    "class MLA(AttnBase):\n"
    "    def forward(self, layer, forward_batch, k, k_rope):\n"
    "        pool = forward_batch.token_to_kv_pool\n"
    "        pool.set_mla_kv_buffer(layer, self._kv_write_loc(forward_batch), k, k_rope)\n"
)


def test_findings_that_depend_on_another_file_follow_it_when_it_is_saved(tmp_path: Path, monkeypatch: Any) -> None:
    """A KV301 shown in the batch file; a KV101 through a helper defined in another file."""
    example = rule_by_code("KV301").INVALID[0]
    assert example.expected_fix is not None
    files = {**example.files, "eng/base.py": HELPER_BASE, "eng/mla.py": HELPER_CALLER}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "kvlint.toml").write_text("")
    oracle = check_json(tmp_path, monkeypatch)
    (batch_file, line, _severity), = example.expected
    builder_file, builder_fixed = example.expected_fix
    assert {batch_file, "eng/mla.py"} <= {f["path"] for f in oracle}
    base_saved = HELPER_BASE.replace("forward_batch.out_cache_loc", "make_loc(forward_batch)")

    async def scenario(s: Session) -> None:
        def latest(name: str) -> list[tuple[Any, ...]]:
            published = s.diagnostics.get(s.uri(name), [types.PublishDiagnosticsParams("", [])])
            return [as_finding(d) for d in published[-1].diagnostics]

        def agrees(findings: list[dict[str, Any]]) -> bool:
            """Every file the editor saw or `kvlint check` reports shows exactly `kvlint check`'s findings."""
            names = {f["path"] for f in findings} | {name for name in files if s.uri(name) in s.diagnostics}
            return all(latest(name) == expected(findings, name) for name in names)

        for name in (builder_file, "eng/mla.py", "eng/base.py"):
            s.open(name)
        diagnostics = await s.published(batch_file)
        assert [(d.code, d.range.start.line + 1) for d in diagnostics] == [("KV301", line)]
        # Helper findings come once the workspace's helpers are resolved (after the project facts).
        await s.until(lambda: agrees(oracle), "the editor showing what kvlint check reports")
        assert [f[0] for f in latest("eng/mla.py")] == ["KV101"]

        # The KV301 quick fix edits the builder file: applied, it is the rule's unsafe fix there.
        s.open(batch_file)
        await s.until(lambda: s.diagnostics[s.uri(batch_file)][-1].version == 1, "the batch file opened")
        actions = await s.client.text_document_code_action_async(
            types.CodeActionParams(
                types.TextDocumentIdentifier(s.uri(batch_file)), diagnostics[0].range,
                types.CodeActionContext(diagnostics=list(diagnostics), only=[types.CodeActionKind.QuickFix]),
            )
        )
        fix = await s.client.code_action_resolve_async(next(a for a in actions if "(unsafe)" in a.title))
        assert not fix.is_preferred and list(fix.edit.changes) == [s.uri(builder_file)]
        assert apply(example.files[builder_file], fix.edit.changes[s.uri(builder_file)]) == builder_fixed

        # Unsaved edits elsewhere change nothing; saved, they do, to what `kvlint check` then says.
        s.change(builder_file, builder_fixed)
        s.change("eng/base.py", base_saved)
        await asyncio.sleep(0.5)
        for name in (batch_file, "eng/mla.py"):
            assert latest(name) == expected(oracle, name)
        s.save(builder_file, builder_fixed)
        s.save("eng/base.py", base_saved)
        after = check_json(tmp_path, monkeypatch)
        assert not expected(after, batch_file) and not expected(after, "eng/mla.py")
        await s.until(lambda: agrees(after), "the editor following the saves")

    run_session(tmp_path, scenario)


# The server with KV201's check made to crash: what a bug in a rule looks like from the editor.
CRASHING_KV201 = (
    "import kvlint.rules.layout.stride_silent_view as rule\n"
    "def boom(self, ctx): raise RuntimeError('kaboom')\n"
    "rule.StrideSilentView.check = boom\n"
    "from kvlint.face.server import serve\n"
    "serve()\n"
)


def test_syntax_error_crashing_rule_and_edit_storm(tmp_path: Path, monkeypatch: Any) -> None:
    """One KV000 for a file that does not parse; a rule's crash logged while the others report;
    50 changes in a second end with the final text's diagnostics only."""
    (tmp_path / "kvlint.toml").write_text(CONFIG)
    broken = KV101_AND_KV201 + "def broken(:\n"
    (tmp_path / "backend.py").write_text(broken)
    (tmp_path / "other.py").write_text(KV101_AND_KV201)
    oracle = check_json(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)

    async def scenario(s: Session) -> None:
        s.open("backend.py")
        diagnostics = await s.published("backend.py")
        assert [as_finding(d) for d in diagnostics] == expected(oracle, "backend.py")
        assert [d.code for d in diagnostics] == ["KV000"]

        s.open("other.py")
        assert [d.code for d in await s.published("other.py")] == ["KV101"]
        assert sorted(d.code for d in diagnostics) == ["KV000"]
        await s.until(lambda: any("internal error in rule KV201" in m and "kaboom" in m for m in s.logs), "the log")

        before = s.publications("backend.py")
        final = KV101_AND_KV201.replace("fb.out_cache_loc", "KVWriteLoc.for_batch(fb)")
        for index in range(49):
            s.change("backend.py", KV101_AND_KV201 + f"# edit {index}\n")
            await asyncio.sleep(0.02)
        version = s.change("backend.py", final)
        await s.until(lambda: s.diagnostics[s.uri("backend.py")][-1].version == version, "the final text's diagnostics")
        await asyncio.sleep(0.5)
        published = s.diagnostics[s.uri("backend.py")][before:]
        # The final text has no finding (KV201 crashes in this server); every intermediate one has a KV101.
        assert published[-1].version == version and list(published[-1].diagnostics) == []
        # Debounced: far fewer checks than changes, and never an older text's diagnostics after a newer one's.
        assert len(published) < 25
        versions = [p.version for p in published]
        assert None not in versions and versions == sorted(versions)  # type: ignore[type-var]

    run_session(tmp_path, scenario, "-c", CRASHING_KV201)


# The server with re-reading a file's project facts whole made slow, as on a large backend.
SLOW_FACTS = (
    "import time\n"
    "from kvlint.live.workspace import Workspace\n"
    "read = Workspace.facts_of\n"
    "def slow(self, shown, data):\n"
    "    time.sleep(5)\n"
    "    return read(self, shown, data)\n"
    "Workspace.facts_of = slow\n"
    "from kvlint.face.server import serve\n"
    "serve()\n"
)
FACTS_AND_A_BODY = (
    "from model_executor.forward_batch_info import ForwardBatch\n"
    "\n\n"
    "def prepare(batch: ForwardBatch, info):\n"
    "    batch.spec_info = info\n"
    "\n\n"
    "def write(pool, layer, fb, k, v):\n"
    "    return k\n"
)


def test_an_edit_is_checked_while_the_facts_of_the_last_one_are_read(tmp_path: Path, monkeypatch: Any) -> None:
    """An edit in a function's body keeps the file's project facts from the text before; they are
    read again whole after a quiet second, beside the checks: the next edit is not queued behind it."""
    example = rule_by_code("KV301").INVALID[0]
    for name, text in {**example.files, "eng/backend.py": FACTS_AND_A_BODY}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "kvlint.toml").write_text("")
    monkeypatch.chdir(tmp_path)

    def body_edit(number: int) -> str:
        return FACTS_AND_A_BODY.replace("    return k\n", f"    k = k + {number}\n    return k\n")

    async def scenario(s: Session) -> None:
        def version_published(version: int) -> Optional[types.PublishDiagnosticsParams]:
            return next((p for p in s.diagnostics.get(s.uri("eng/backend.py"), []) if p.version == version), None)

        s.open("eng/backend.py")
        await s.published("eng/backend.py")
        edited = s.change("eng/backend.py", body_edit(1))
        await s.until(lambda: version_published(edited), "the edit's diagnostics")
        # The facts of that text are now being read (after a quiet second; 5 s in this server).
        await asyncio.sleep(1.5)
        started = time.monotonic()
        next_edit = s.change("eng/backend.py", body_edit(2))
        published = await s.until(lambda: version_published(next_edit), "the next edit's diagnostics")
        assert list(published.diagnostics) == []
        assert time.monotonic() - started < 3.0

    run_session(tmp_path, scenario, "-c", SLOW_FACTS)
