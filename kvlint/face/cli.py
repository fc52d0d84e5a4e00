"""The `kvlint` command: wires options to the engine and a reporter, nothing more."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TextIO, TypeVar

import click

from kvlint import DISTRIBUTION, __version__
from kvlint.api.config import ConfigError
from kvlint.api.project import project_config
from kvlint.api.types import Applicability
from kvlint.face.baseline import read_baseline, without_baselined, write_baseline
from kvlint.face.report_file import ReportFileError, atomic_report_file
from kvlint.face.reporters import get_reporter

if TYPE_CHECKING:
    from rich.progress import TaskID

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

F = TypeVar("F", bound=Callable[..., Any])


def _comma_list(_ctx: click.Context, _param: click.Parameter, value: Optional[str]) -> Optional[tuple[str, ...]]:
    if value is None:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _common_options(func: F) -> F:
    options = [
        click.argument("paths", nargs=-1, type=click.Path(path_type=Path)),
        click.option("--select", callback=_comma_list, help="Comma list of codes or prefixes to check (e.g. KV1,KV201)."),
        click.option("--ignore", callback=_comma_list, help="Comma list of codes or prefixes to skip."),
        click.option("--config", "config_file", type=click.Path(path_type=Path), help="Use this kvlint.toml or pyproject.toml."),
        click.option(
            "--changed",
            is_flag=False,
            flag_value="HEAD",
            default=None,
            metavar="[REV]",
            help="Only files changed against REV (default HEAD), staged, unstaged or untracked.",
        ),
        click.option("--jobs", "-j", type=click.IntRange(min=1), help="Worker processes (default: available cores)."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache."),
        click.option("--strict-tbo", is_flag=True, help="KV301: also report Optional fields nothing sets."),
        click.option("--quiet", "-q", is_flag=True, help="Only the finding lines and the summary."),
        click.option(
            "--verbose", "-v", count=True,
            help="On stderr: each phase, its time, and what it skipped (-vv: every skipped file).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, prog_name="kvlint", message=f"%(prog)s %(version)s (distribution {DISTRIBUTION})"
)
def main() -> None:
    """Lint and migrate code for token-major KV-cache pools.

    kvlint finds the code that goes silently wrong when a serving engine's KV
    cache becomes a token-major unified pool: unmarked write locations,
    stride-silent paged views, layout-dropping copies, and batch fields the
    two-batch-overlap builder forgets. `kvlint fix` rewrites the safe ones.

    Exit codes: 0 no findings, 1 findings, 2 usage, configuration or internal error.
    """


@main.command()
@_common_options
@click.option("--format", "output_format", type=click.Choice(["text", "json", "sarif", "github"]), default="text", show_default=True)
@click.option(
    "--output-file", type=click.Path(path_type=Path),
    help="Write the --format report to this file, atomically; stdout then shows the text report.",
)
@click.option("--baseline", "baseline_file", type=click.Path(path_type=Path), help="Hide findings recorded in this baseline file.")
@click.option("--min-files", type=click.IntRange(min=0), help="Exit 2 when fewer files than this are in scope.")
@click.option("--prove", is_flag=True, help="Prove every write door's loc marked; KV104 for what cannot be shown.")
@click.option("--min-doors", type=click.IntRange(min=0), help="With --prove: exit 2 when fewer write-door calls are seen.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--statistics", is_flag=True, help="Print a count per rule.")
@click.option("--report-unused-ignores", is_flag=True, help="Report suppressions that suppress nothing (KV001).")
@click.option(
    "--reach", type=click.Choice(["all", "live", "live-only"]),
    help="Report and fail on: every finding (all, the default), live and unknown ones (live), live ones only (live-only).",
)
def check(**kwargs: Any) -> None:
    """Check PATHS (default: the configured include, else ".")."""
    _guarded(lambda: _check(**kwargs))


@main.command()
@_common_options
@click.option("--unsafe", is_flag=True, help="Also apply unsafe fixes.")
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff and write nothing.")
def fix(**kwargs: Any) -> None:
    """Apply safe fixes in place (with --unsafe, unsafe ones too)."""
    _guarded(lambda: _fix(**kwargs))


@main.command()
@click.argument("code")
def explain(code: str) -> None:
    """Print the documentation of rule CODE."""
    # The rule docs import every rule, and the rules LibCST: only the commands that show them pay.
    from kvlint.face.docs import explain_rule

    text = explain_rule(code)
    if text is None:
        _fail(f"unknown rule code: {code!r} (see `kvlint rules`)")
    click.echo(text)


@main.command()
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def rules(output_format: str) -> None:
    """List every rule: code, name, severity, fix."""
    # As in `explain`: the rule docs load every rule.
    from kvlint.face.docs import rules_table

    click.echo(rules_table(output_format))


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="Baseline file to write.")
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@click.option("--prove", is_flag=True, help="Record today's unproven write locs (KV104) too.")
def baseline(paths: tuple[Path, ...], output: Path, config_file: Optional[Path], prove: bool) -> None:
    """Record today's findings in PATHS so `check --baseline` reports only new ones."""

    def record() -> int:
        # Opened first: an unwritable path fails before the run, and a failed run keeps the old baseline.
        with atomic_report_file(output) as out:
            result = _run(paths, config_file=config_file, prove=prove)
            write_baseline(out, result.findings)
        click.echo(f"recorded {len(result.findings)} findings in {output}", err=True)
        return EXIT_CLEAN

    _guarded(record)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@click.option("--no-cache", is_flag=True, help="Neither read nor write the contract cache.")
def contract(paths: tuple[Path, ...], config_file: Optional[Path], no_cache: bool) -> None:
    """Print the contract in force for PATHS and where each value came from."""

    def show() -> int:
        # As in `explain` and `_run`: the rule docs and the run machinery load only for the commands using them.
        from kvlint.face.docs import contract_table
        from kvlint.running.engine import contract_in_force

        click.echo(contract_table(contract_in_force(project_config(paths, config_file), paths, cache=not no_cache)))
        return EXIT_CLEAN

    _guarded(show)


@main.command()
@click.option("--stdio", is_flag=True, help="Talk over stdin/stdout (the default and only transport).")
def server(stdio: bool) -> None:
    """Run the language server (LSP over stdio) for editors: diagnostics, quick fixes, hover."""
    # The server loads pygls and the rules: only this command pays for them.
    from kvlint.face.server import serve

    serve()


def _guarded(action: Callable[[], int]) -> None:
    """User mistakes become one line and exit 2; only genuine bugs show a traceback."""
    try:
        code = action()
    except (ConfigError, ReportFileError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(code)


def _fail(message: str) -> None:
    click.echo(f"kvlint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _run(
    paths: tuple[Path, ...],
    *,
    config_file: Optional[Path] = None,
    progress: bool = False,
    verbose: int = 0,
    **options: Any,
) -> Any:
    # The run machinery loads only for commands that run: `--help` and `--version` stay quick.
    from kvlint.running.head_start import start_early

    # Before the run machinery: see `start_early`. `--changed` names its files only once git is asked.
    named = paths if options.get("changed") is None else ()
    started = start_early(named, options.get("cache", False), options.get("jobs"))
    callback = None
    try:
        from kvlint.running.engine import run
        from kvlint.running.plan import RunOptions

        if verbose:
            _log_to_stderr(logging.DEBUG if verbose > 1 else logging.INFO)
        config = project_config(paths, config_file)
        callback = _progress_bar() if progress else None
        return run(config, RunOptions(paths=paths, **options), progress=callback, started=started)
    finally:
        # Also where the run never began (a configuration error): a worker left waiting holds stdout open.
        if started is not None:
            started.close()
        if callback is not None:
            callback.close()


def _log_to_stderr(level: int) -> None:
    logger = logging.getLogger("kvlint")
    # One handler, on the stderr of this invocation (a test runner swaps it per call).
    for old in [handler for handler in logger.handlers if getattr(handler, "kvlint_cli", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("kvlint: %(message)s"))
    handler.kvlint_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)
    # A library's logging.config call (disable_existing_loggers) may have switched it off.
    logger.disabled = False


class _ProgressBar:
    """A rich progress bar on stderr, only when stderr is a terminal."""

    def __init__(self) -> None:
        # rich is slow to import; only a terminal that shows the bar needs it.
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self._progress = Progress(
            "checking", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), transient=True,
        )
        self._task: Optional[TaskID] = None

    def __call__(self, done: int, total: int) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task("checking", total=total)
        self._progress.update(self._task, completed=done)

    def close(self) -> None:
        if self._task is not None:
            self._progress.stop()


def _progress_bar() -> Optional[_ProgressBar]:
    return _ProgressBar() if sys.stderr.isatty() else None


def _run_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {
        "select": kwargs["select"],
        "ignore": kwargs["ignore"] or (),
        "changed": kwargs["changed"],
        "jobs": kwargs["jobs"],
        "strict_tbo": kwargs["strict_tbo"],
        "cache": not kwargs["no_cache"],
        "verbose": kwargs["verbose"],
    }


def _check(**kwargs: Any) -> int:
    if kwargs["output_file"] is None:
        return _check_into(sys.stdout, **kwargs)
    # Opened before the run: a path that cannot be written fails before a whole-tree check.
    with atomic_report_file(kwargs["output_file"]) as report:
        code = _check_into(report, **kwargs)
    if not kwargs["quiet"]:
        click.echo(f"kvlint: {kwargs['output_format']} report written to {kwargs['output_file']}", err=True)
    return code


def _check_into(report: TextIO, **kwargs: Any) -> int:
    """Check, write the `--format` report to `report`, and (when that is a file) the text report to stdout."""
    known = read_baseline(kwargs["baseline_file"]) if kwargs["baseline_file"] else None
    show_progress = (kwargs["output_format"] == "text" or report is not sys.stdout) and not kwargs["quiet"]
    result = _run(
        kwargs["paths"],
        config_file=kwargs["config_file"],
        progress=show_progress,
        report_unused_ignores=kwargs["report_unused_ignores"],
        prove=kwargs["prove"] or kwargs["min_doors"] is not None,
        reach=kwargs["reach"],
        **_run_options(kwargs),
    )
    if known is not None:
        result.findings = without_baselined(result.findings, known)
    fixes = _sarif_fixes(result, kwargs) if kwargs["output_format"] == "sarif" else None
    get_reporter(kwargs["output_format"])(
        result, report, statistics=kwargs["statistics"], quiet=kwargs["quiet"], fixes=fixes
    )
    if report is not sys.stdout:
        get_reporter("text")(result, sys.stdout, statistics=kwargs["statistics"], quiet=kwargs["quiet"])
    if kwargs["min_files"] is not None and result.files_in_scope < kwargs["min_files"]:
        click.echo(
            f"kvlint: error: {result.files_in_scope} files in scope, fewer than --min-files {kwargs['min_files']}",
            err=True,
        )
        return EXIT_ERROR
    doors = result.prove.total.doors if result.prove is not None else 0
    if kwargs["min_doors"] is not None and doors < kwargs["min_doors"]:
        click.echo(f"kvlint: error: {doors} write-door calls seen, fewer than --min-doors {kwargs['min_doors']}", err=True)
        return EXIT_ERROR
    if result.has_internal_error:
        return EXIT_ERROR
    if (result.findings or result.has_unchecked_file) and not kwargs["exit_zero"]:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _sarif_fixes(result: Any, kwargs: dict[str, Any]) -> Any:
    """Each reported finding's fix as edits, for SARIF `fixes`: re-parses only the files that have one."""
    # As in `_run`: the run machinery loads only for commands that run.
    from kvlint.running.fix_edits import run_fixes
    from kvlint.running.plan import RunOptions

    options = RunOptions(
        select=kwargs["select"], ignore=kwargs["ignore"] or (), strict_tbo=kwargs["strict_tbo"],
        report_unused_ignores=kwargs["report_unused_ignores"],
    )
    return run_fixes(project_config(kwargs["paths"], kwargs["config_file"]), options, result.contract, result.findings)


def _fix(**kwargs: Any) -> int:
    # The fix summary imports the engine's result type: loaded only for `fix`.
    from kvlint.face.fix_output import apply_or_diff

    applicability = Applicability.UNSAFE if kwargs["unsafe"] else Applicability.SAFE
    result = _run(
        kwargs["paths"],
        config_file=kwargs["config_file"],
        progress=not kwargs["quiet"],
        fix=applicability,
        **_run_options(kwargs),
    )
    return apply_or_diff(result, applicability, show_diff=kwargs["show_diff"], quiet=kwargs["quiet"])
