"""`--output-file`: the report written atomically, so CI never collects half a report.

The report goes to a temp file beside the target, then `os.replace` puts it in
place: a run that fails or is interrupted leaves the previous report (or none),
never a truncated one. The temp file is created before the run, so a path that
cannot be written fails at once instead of after a whole-tree check.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO


class ReportFileError(Exception):
    """The report file cannot be written; the message names it and says why."""


@contextmanager
def atomic_report_file(path: Path) -> Iterator[TextIO]:
    """A text stream that becomes `path` when the block ends without an exception."""
    if path.is_dir():
        raise ReportFileError(f"cannot write the report to {path}: it is a directory")
    directory = path.parent
    try:
        handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".kvlint", dir=directory)
    except OSError as exc:
        raise ReportFileError(f"cannot write the report to {path}: {_reason(exc, directory)}") from None
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            yield out
        # mkstemp makes the file private; a report is as readable as any file the user creates.
        os.chmod(temp, _mode_for(path))
        os.replace(temp, path)
    except OSError as exc:
        raise ReportFileError(f"cannot write the report to {path}: {exc.strerror or exc}") from None
    finally:
        if temp.exists():
            temp.unlink()


def _reason(exc: OSError, directory: Path) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"directory {directory} does not exist"
    if isinstance(exc, NotADirectoryError):
        return f"{directory} is not a directory"
    return exc.strerror or str(exc)


def _mode_for(path: Path) -> int:
    """An existing report keeps its mode; a new one gets the default the umask allows."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
