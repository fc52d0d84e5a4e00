"""The console script's entry point (`kvlint = "kvlint.cli:main"`); the CLI itself is `kvlint.face.cli`."""

from kvlint.face.cli import main

__all__ = ["main"]
