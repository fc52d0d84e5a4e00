"""Fill the contract's "auto" values from the scanned tree."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from kvlint.config import Config, configured_contract
from kvlint.contract import Contract


def learn_contract(config: Config, sources: Mapping[Path, bytes]) -> Contract:
    return configured_contract(config)
