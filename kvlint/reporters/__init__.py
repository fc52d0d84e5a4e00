"""Reporters turn a run's findings into text; they never decide anything."""

from __future__ import annotations

from typing import Callable


def get_reporter(name: str) -> Callable[..., None]:
    if name == "json":
        from kvlint.reporters.json_report import render
    elif name == "sarif":
        from kvlint.reporters.sarif import render
    elif name == "github":
        from kvlint.reporters.github import render
    else:
        from kvlint.reporters.text import render
    return render
