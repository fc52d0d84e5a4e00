"""The console script's entry point (`kvlint = "kvlint.cli:entry"`); the CLI itself is `kvlint.face.cli`.

`main` is the click group (what tests invoke in-process); `entry` runs it as a
command and then leaves the process without tearing the interpreter down, as
mypy does: a run holds hundreds of thousands of objects (the result cache, the
project index, LibCST's trees and modules), and freeing them one by one at
exit took 0.05 s of a one-file run on a model file and 0.15-0.18 s on a large
backend, for memory the operating system takes back at once. Under a profiler
or a coverage tool (`python -m cProfile -m kvlint`), which write their reports
at exit, it exits normally.
"""

import os
import sys

from kvlint.face.cli import main

__all__ = ["entry", "main"]


def entry() -> None:
    try:
        main()
        code = 0
    except SystemExit as stop:
        code = _exit_status(stop.code)
    # What `sys.exit` would still have written: nothing may be lost by leaving early.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            # A closed pipe (`kvlint check | head`): what it refused is not ours to keep.
            pass
    if sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    os._exit(code)


def _exit_status(code: object) -> int:
    """The status `sys.exit(code)` gives: None is 0, an int itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
