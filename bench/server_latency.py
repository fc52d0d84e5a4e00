"""How quickly `kvlint server` answers an editor, and how much memory it holds.

    python bench/server_latency.py [TREE] [--file REL] [--edits 20] [--backends 20] [--ready-wait S]

TREE defaults to the latest `sglang` wheel's `sglang/srt` (downloaded once by
`tests/corpus.py`); the file defaults to the largest `*backend*.py` under
`layers/attention`. A real LSP client (pygls') starts `python -m kvlint server`
at TREE and measures, each from the message sent to the diagnostics received:

- startup: `initialize` to the first diagnostics of the opened file (the
  workspace is loaded: files read, contract learned);
- first diagnostics after open, once the workspace is loaded (a second file);
- after an edit, warm, `--edits` times, one edit at a time (median, min,
  max), three kinds: a comment line appended to the file or removed (nothing
  is checked again); a statement added to or removed from the body of the
  function holding the file's first finding (that function is checked
  again); and, as the baseline in the same run, the same edit plus a comment
  changed on that function's `def` line (the whole file is checked
  again: the check every edit paid before);
- the server's resident memory (VmRSS) after opening `--backends` backends.

It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

# Seconds left between kinds of edits for the server to finish reading project facts again.
QUIET_S = 8.0


class Probe:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.client = LanguageClient("kvlint-bench", "1")
        self.published: dict[str, list[tuple[float, Optional[int], int]]] = {}

        # The first line (1-based) of the first diagnostic published for each file.
        self.first_line: dict[str, int] = {}

        @self.client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def _diagnostics(params: types.PublishDiagnosticsParams) -> None:
            self.published.setdefault(params.uri, []).append((time.perf_counter(), params.version, len(params.diagnostics)))
            if params.diagnostics and params.uri not in self.first_line:
                self.first_line[params.uri] = min(d.range.start.line for d in params.diagnostics) + 1

    def uri(self, rel: str) -> str:
        return from_fs_path(str(self.root / rel)) or rel

    async def wait(self, rel: str, version: int, timeout: float = 600.0) -> tuple[float, int]:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for when, got, count in self.published.get(self.uri(rel), []):
                if got == version:
                    return when, count
            await asyncio.sleep(0.002)
        raise TimeoutError(f"no diagnostics for {rel} version {version}")

    def open(self, rel: str) -> float:
        sent = time.perf_counter()
        text = (self.root / rel).read_text(encoding="utf-8")
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(self.uri(rel), "python", 1, text)))
        return sent

    def change(self, rel: str, version: int, text: str) -> float:
        sent = time.perf_counter()
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=self.uri(rel), version=version),
                [types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return sent

    def rss_mb(self) -> float:
        pid = self.client._server.pid  # type: ignore[union-attr]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


def function_edits(text: str, line: int) -> tuple[Callable[[bool], str], Callable[[bool], str]]:
    """Two edits of the innermost function holding `line`: a statement added to its body (or not),
    and the same with a comment changed on its `def` line (no finding changes; the file is checked whole)."""
    lines = text.splitlines(keepends=True)
    holding = [
        node for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0)
    ]
    function = max(holding, key=lambda node: node.lineno)
    first = function.body[0].lineno
    indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    header = function.lineno - 1

    def body(added: bool) -> str:
        return "".join([*lines[: first - 1], *([f"{indent}_bench_probe = 0\n"] if added else []), *lines[first - 1 :]])

    def with_header(added: bool) -> str:
        edited = body(added).splitlines(keepends=True)
        edited[header] = edited[header].rstrip("\r\n") + ("  # probe a\n" if added else "  # probe b\n")
        return "".join(edited)

    return body, with_header


async def measure(root: Path, rel: str, edits: int, backends: int, ready_wait: float) -> None:
    probe = Probe(root)
    await probe.client.start_io(sys.executable, "-m", "kvlint", "server", cwd=str(root))
    started = time.perf_counter()
    await probe.client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=from_fs_path(str(root))))
    probe.client.initialized(types.InitializedParams())
    probe.open(rel)
    when, count = await probe.wait(rel, 1)
    print(f"file: {rel} ({len((root / rel).read_text().splitlines())} lines), {count} diagnostics")
    print(f"startup to first diagnostics (workspace loaded):  {when - started:7.2f} s")
    # Warm: the project facts of every file are read (the server publishes the open files again then,
    # unless the result cache had them all before the first check, which then included KV301).
    deadline = time.perf_counter() + ready_wait
    while len(probe.published.get(probe.uri(rel), [])) < 2 and time.perf_counter() < deadline:
        await asyncio.sleep(0.05)
    if len(probe.published.get(probe.uri(rel), [])) >= 2:
        print(f"startup to project facts read (KV301 ready):  {time.perf_counter() - started:7.2f} s")
    else:
        print(f"no second publication within {ready_wait:.0f} s: the first diagnostics had KV301 (result cache)")

    others = sorted(str(p.relative_to(root)) for p in (root / "layers/attention").glob("*backend*.py"))
    others = [o for o in others if o != rel][:backends]
    if others:
        sent = probe.open(others[0])
        when, _ = await probe.wait(others[0], 1)
        print(f"first diagnostics after open, warm ({others[0]}):  {when - sent:7.2f} s")

    text = (root / rel).read_text(encoding="utf-8")
    body, header = function_edits(text, probe.first_line[probe.uri(rel)])
    version = 1
    kinds = {
        "comment line at the end of the file": lambda i: text + ("# edited\n" if i % 2 == 0 else ""),
        "statement in a function's body": lambda i: body(i % 2 == 0),
        "same, with its header changed (baseline: whole file)": lambda i: header(i % 2 == 0),
    }
    for kind, edited in kinds.items():
        # A check that kept the project facts of an earlier text reads them again after a quiet second:
        # let that finish so it does not sit in front of the first edit timed.
        await asyncio.sleep(QUIET_S)
        latencies = []
        for i in range(edits):
            version += 1
            sent = probe.change(rel, version, edited(i))
            when, _ = await probe.wait(rel, version)
            latencies.append(when - sent)
        print(
            f"after an edit, warm: {kind} ({edits} edits):  median {statistics.median(latencies) * 1000:7.0f} ms,"
            f" min {min(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms"
        )

    for other in others[1:]:
        probe.open(other)
        await probe.wait(other, 1)
    print(f"server memory after opening {len(others) + 1} backends:  {probe.rss_mb():7.0f} MB (VmRSS)")
    await probe.client.shutdown_async(None)
    probe.client.exit(None)
    await probe.client.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", nargs="?", type=Path)
    parser.add_argument("--file", help="file to edit, relative to TREE (default: the largest attention backend)")
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--backends", type=int, default=20)
    parser.add_argument(
        "--ready-wait", type=float, default=3600.0,
        help="seconds to wait for the republication that says KV301's facts are read (short when `kvlint check` filled the cache)",
    )
    args = parser.parse_args()
    if args.tree is None:
        from corpus import sglang_srt  # tests/corpus.py: the wheel, downloaded once

        args.tree = sglang_srt()
    root = args.tree.resolve()
    rel = args.file or max(
        (str(p.relative_to(root)) for p in (root / "layers/attention").glob("*backend*.py")),
        key=lambda r: (root / r).stat().st_size,
    )
    asyncio.run(measure(root, rel, args.edits, args.backends, args.ready_wait))


if __name__ == "__main__":
    main()
