"""What `kvlint fix` does with a run's fixed sources: write them, or show a diff."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

import click

from kvlint.running.engine import RunResult
from kvlint.api.types import Applicability, Finding, fix_allowed
from kvlint.face.fixable import unsafe_only
from kvlint.fix.writer import WriteRefused, write_fixed


def apply_or_diff(result: RunResult, allowed: Applicability, *, show_diff: bool, quiet: bool) -> int:
    written: list[str] = []
    failed: set[str] = set()
    for path, (original, fixed) in sorted(result.fixed.items()):
        if show_diff:
            sys.stdout.write(_unified_diff(path, original, fixed))
            continue
        try:
            write_fixed(Path(path), original, fixed)
            written.append(path)
        except WriteRefused as exc:
            failed.add(path)
            click.echo(f"{path}: error: {exc}", err=True)
    for error in result.errors:
        click.echo(f"{error.path}: error: {error.message}", err=True)
    fixed_paths = set(result.fixed) - failed
    remaining = [f for f in result.findings if not _was_fixed(f, allowed, fixed_paths)]
    fixed_count = len(result.findings) - len(remaining)
    if not quiet:
        for finding in remaining:
            click.echo(f"{finding.path}:{finding.line}:{finding.column}: {finding.code} {finding.message}", err=True)
    verb = "Would fix" if show_diff else "Fixed"
    # A run without --unsafe that leaves unsafe fixes says so: else `Fixed 0` after a check
    # counting them fixable reads as a fix that failed.
    more = unsafe_only(remaining) if allowed is Applicability.SAFE else 0
    click.echo(
        f"{verb} {fixed_count} findings in {len(fixed_paths)} files{f' ({more} more with --unsafe)' if more else ''}; "
        f"{len(remaining)} remaining; {result.files_in_scope} files in scope",
        err=True,
    )
    if result.has_internal_error or failed:
        return 2
    unfinished = bool(remaining) or result.has_unchecked_file
    if show_diff:
        return 1 if result.fixed or unfinished else 0
    return 1 if unfinished else 0


def _was_fixed(finding: Finding, allowed: Applicability, fixed_paths: set[str]) -> bool:
    if finding.fix is None or not fix_allowed(finding.fix.applicability, allowed):
        return False
    return (finding.fix.path or finding.path) in fixed_paths


def _unified_diff(path: str, original: bytes, fixed: bytes) -> str:
    before = original.decode("utf-8", errors="replace").splitlines(keepends=True)
    after = fixed.decode("utf-8", errors="replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, fromfile=f"a/{path}", tofile=f"b/{path}"))
