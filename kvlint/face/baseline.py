"""Record today's findings so CI fails only on new ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence, TextIO

from kvlint import __version__
from kvlint.api.config import ConfigError
from kvlint.api.types import Finding


def write_baseline(out: TextIO, findings: Sequence[Finding]) -> None:
    entries = [
        {"fingerprint": f.fingerprint, "code": f.code, "path": f.path, "line": f.line, "message": f.message}
        for f in findings
    ]
    out.write(json.dumps({"kvlint": __version__, "findings": entries}, indent=2) + "\n")


def read_baseline(path: Path) -> frozenset[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return frozenset(entry["fingerprint"] for entry in data["findings"])
    except FileNotFoundError:
        raise ConfigError(f"baseline file not found: {path}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a kvlint baseline ({exc.__class__.__name__}: {exc})") from None


def without_baselined(findings: Sequence[Finding], known: frozenset[str]) -> list[Finding]:
    return [finding for finding in findings if finding.fingerprint not in known]
