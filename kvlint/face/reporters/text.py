"""Human output: findings grouped by file, the source line with the span marked."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape

from kvlint.running.engine import RunResult
from kvlint.running.prove import Certificate
from kvlint.api.types import Finding
from kvlint.face.fixable import fixable_counts


def render(result: RunResult, out: TextIO, *, statistics: bool = False, quiet: bool = False, **_: Any) -> None:
    console = Console(file=out, highlight=False, soft_wrap=True)
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for finding in result.findings:
        by_file[finding.path].append(finding)
    for path, findings in by_file.items():
        lines = _source_lines(path)
        if not quiet:
            console.print(f"[bold underline]{escape(path)}[/]")
        for finding in findings:
            style = "red" if finding.severity.value == "error" else "yellow"
            console.print(
                f"{escape(path)}:{finding.line}:{finding.column}: [bold {style}]{finding.code}[/] "
                f"[dim]{finding.name}[/] {escape(finding.message)}{_reach_tag(finding)}"
            )
            if quiet:
                continue
            _print_context(console, lines, finding)
            if finding.reach_reason:
                console.print(f"    [dim]reach ({finding.reach}): {escape(finding.reach_reason)}[/]")
            if finding.fix is not None:
                console.print(
                    f"    [green]fix ({finding.fix.applicability.value}):[/] {escape(finding.fix.description)}"
                )
        if not quiet:
            console.print()
    for error in result.errors:
        console.print(f"{escape(error.path)}: [bold red]error:[/] {escape(error.message)}")
    if statistics:
        _print_statistics(console, result.findings)
    noun = "finding" if len(result.findings) == 1 else "findings"
    console.print(
        f"{len(result.findings)} {noun}{_in_parentheses(fixable_counts(result.findings))} in {len(by_file)} files; "
        f"{result.files_in_scope} files in scope"
    )
    if result.prove is not None:
        _print_certificate(console, result.prove)


def _source_lines(path: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _print_context(console: Console, lines: list[str], finding: Finding) -> None:
    if not 1 <= finding.line <= len(lines):
        return
    text = lines[finding.line - 1].expandtabs(1)
    start = finding.column - 1
    end = finding.end_column - 1 if finding.end_line == finding.line else len(text)
    width = max(1, end - start)
    gutter = f"{finding.line:>5} | "
    console.print(f"[dim]{gutter}[/]{escape(text)}")
    console.print(" " * len(gutter) + " " * start + "[bold red]" + "^" * width + "[/]")


def _reach_tag(finding: Finding) -> str:
    return f" [dim]{escape(f'[{finding.reach}]')}[/]" if finding.reach else ""


def _print_statistics(console: Console, findings: list[Finding]) -> None:
    by_rule: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for finding in findings:
        by_rule[finding.code, finding.name].append(finding)
    for (code, name), found in sorted(by_rule.items()):
        console.print(f"{len(found):>6}  {code}  {name}{_in_parentheses(fixable_counts(found), '  ')}")
    by_reach: dict[str, int] = defaultdict(int)
    for finding in findings:
        by_reach[finding.reach or "undecided"] += 1
    for reach, count in sorted(by_reach.items()):
        # Named as a reach, not a rule: the same column holds codes just above.
        console.print(f"{count:>6}  reach {reach}")


def _in_parentheses(text: str, before: str = " ") -> str:
    return f"{before}({text})" if text else ""


def _print_certificate(console: Console, certificate: Certificate) -> None:
    """What `--prove` showed, in all, by reach and by top-level folder of the scope, and where the proof stops."""
    total = certificate.total
    suppressed = sum(call.suppressed for call in certificate.unproven_calls)
    console.print(
        f"prove: {total.doors} write-door calls: {total.proven} proven marked, {total.raw} raw, {total.unproven} unproven"
        + (f" ({suppressed} suppressed)" if suppressed else "")
        + (f", {total.exempt} exempt (a bare loc the pool takes by design)" if total.exempt else "")
    )
    for reach, counts in sorted(certificate.by_reach.items()):
        console.print(
            f"  reach {reach}: {counts.doors} doors, {counts.proven} proven, {counts.raw} raw, {counts.unproven} unproven"
            + (f", {counts.exempt} exempt" if counts.exempt else "")
        )
    for folder, counts in sorted(certificate.by_path.items()):
        console.print(
            f"  {escape(folder)}: {counts.doors} doors, {counts.proven} proven, {counts.raw} raw, {counts.unproven} unproven"
            + (f", {counts.exempt} exempt" if counts.exempt else "")
        )
    for path, line, why in certificate.exempt_calls:
        console.print(f"  exempt {escape(path)}:{line}: {escape(why)}")
    for call in certificate.unproven_calls:
        mark = " (suppressed)" if call.suppressed else ""
        console.print(f"  unproven {escape(call.path)}:{call.line}{mark}: {escape(call.why)}")
