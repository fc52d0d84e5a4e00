"""Reporters turn a run's findings into text; they never decide anything."""

from __future__ import annotations

from typing import Callable


def get_reporter(name: str) -> Callable[..., None]:
    # Only the chosen reporter is imported: the text one loads rich, which the others do not need.
    if name == "json":
        from kvlint.face.reporters.json_report import render
    elif name == "sarif":
        from kvlint.face.reporters.sarif import render
    elif name == "github":
        from kvlint.face.reporters.github import render
    else:
        from kvlint.face.reporters.text import render
    return render
