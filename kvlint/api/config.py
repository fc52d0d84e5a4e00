"""`[tool.kvlint]` configuration: finding it, validating it, and its defaults.

Unknown keys are errors that name the key and the file: a misspelt option that
silently does nothing is worse than no option in a CI check.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from kvlint.api.contract import AUTO, Contract
from kvlint.api.reach import REACH_SCOPES


class ConfigError(Exception):
    """A user mistake in configuration or options; the CLI prints it and exits 2."""


@dataclass(frozen=True)
class TboConfig:
    """`[tool.kvlint.tbo]`: the batch class KV301 reads, its two-batch-overlap child builder, strictness."""

    batch_class: str = "ForwardBatch"
    child_builder: str = "filter_batch"
    strict: bool = False


@dataclass(frozen=True)
class Config:
    """`[tool.kvlint]` (or kvlint.toml) as read, defaults filled in."""

    include: tuple[str, ...] = (".",)
    exclude: tuple[str, ...] = ()
    select: tuple[str, ...] = ("KV",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    cache_dir: str = ".kvlint_cache"
    # Contract keys as written, "auto" kept: kvlint.learn.contract resolves them.
    contract: tuple[tuple[str, Any], ...] = ()
    tbo: TboConfig = field(default_factory=TboConfig)
    # `prove = true`: every check runs as `kvlint check --prove`.
    prove: bool = False
    # `reach`: which findings a check reports and fails on ("all", "live", "live-only"); decided after
    # checking, so no cached result depends on it.
    reach: str = field(default="all", compare=False)
    # `engine-path`: the installed engine's package folder, as written (relative to `root`); "" for
    # none. It wins over kvlint's own search (`kvlint.learn.installed_engine`).
    engine_path: str = ""
    # The file the values came from, or None for built-in defaults.
    path: Optional[Path] = None
    # Where no file governs, the project's folder as `kvlint.api.project` found it from the paths.
    project_root: Optional[Path] = None
    # Where nothing marks a project, the paths given: they alone are the run's context.
    project_paths: Optional[tuple[Path, ...]] = None

    @property
    def root(self) -> Path:
        """The project's folder: relative paths in the config and the cache live under it."""
        if self.path is not None:
            return self.path.parent
        return self.project_root if self.project_root is not None else Path.cwd()

    @property
    def include_paths(self) -> tuple[Path, ...]:
        """What a run without paths checks: the configured `include` under the root, else the working directory."""
        base = self.root if self.path is not None else Path.cwd()
        return tuple(base / include for include in self.include)

    @property
    def context(self) -> tuple[Path, ...]:
        """The files a run reads for facts (the contract, helpers, KV301, doors), reported or not:
        the configured `include` under the root, else the whole project, else the paths given."""
        if self.project_paths is not None:
            return self.project_paths
        if self.path is not None:
            return self.include_paths
        return (self.root,)

    @property
    def engine_folder(self) -> Path:
        """`engine-path` resolved against the root."""
        return (self.root / self.engine_path).resolve()

    def contract_value(self, key: str) -> Any:
        return dict(self.contract).get(key, AUTO)


_TOP_KEYS = {
    "include", "exclude", "select", "ignore", "per-file-ignores", "cache-dir", "contract", "tbo", "prove", "engine-path",
    "reach",
}
_CONTRACT_STR_KEYS = {
    "write-loc-class",
    "mark",
    "batch-mark",
    "batch-factory",
    "layer-factory",
    "write-loc-module",
    "paged-helpers-module",
    "kv-name-fallback",
    "mark-predicate",
}
_CONTRACT_LIST_KEYS = {
    "loc-attributes", "buffer-accessors", "pool-classes", "host-cache-classes", "page-split-pools",
    "remove-write-doors", "mark-keeping",
}
_CONTRACT_DOOR_KEYS = {"write-doors", "add-write-doors"}
_CONTRACT_KEYS = _CONTRACT_STR_KEYS | _CONTRACT_LIST_KEYS | _CONTRACT_DOOR_KEYS
_TBO_KEYS = {"batch-class": str, "child-builder": str, "strict": bool}


def find_config_file(start: Path) -> Optional[Path]:
    """The nearest `kvlint.toml`, or `pyproject.toml` with a `[tool.kvlint]` table."""
    for directory in (start, *start.parents):
        candidate = directory / "kvlint.toml"
        if candidate.is_file():
            return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and "kvlint" in _read_toml(candidate).get("tool", {}):
            return candidate
    return None


def load_config(explicit: Optional[Path] = None, start: Optional[Path] = None) -> Config:
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(f"config file not found: {explicit}")
        path: Optional[Path] = explicit
    else:
        path = find_config_file((start or Path.cwd()).resolve())
    if path is None:
        return Config()
    data = _read_toml(path)
    table = data.get("tool", {}).get("kvlint", {}) if path.name == "pyproject.toml" else data
    return parse_config(table, path)


def parse_config(table: Mapping[str, Any], path: Path) -> Config:
    _reject_unknown(table, _TOP_KEYS, path, "tool.kvlint" if path.name == "pyproject.toml" else "")
    contract_table = table.get("contract", {})
    _expect(contract_table, dict, "contract", path)
    if "page-split-paths" in contract_table:
        raise ConfigError(
            f"{path}: contract.page-split-paths is gone: page-split is decided by the pool class a buffer "
            f"comes from, not its folder; name those pools in contract.page-split-pools (learned when left out)"
        )
    _reject_unknown(contract_table, _CONTRACT_KEYS, path, "contract")
    contract: dict[str, Any] = {}
    for key, value in contract_table.items():
        if key in _CONTRACT_STR_KEYS:
            _expect(value, str, f"contract.{key}", path)
        elif key in _CONTRACT_LIST_KEYS:
            contract[key] = tuple(_str_list(value, f"contract.{key}", path))
            continue
        else:
            _expect(value, dict, f"contract.{key}", path)
            for door, index in value.items():
                if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                    raise ConfigError(f"{path}: contract.{key}.{door} must be a non-negative integer")
            value = tuple(value.items())
        contract[key] = value
    tbo_table = table.get("tbo", {})
    _expect(tbo_table, dict, "tbo", path)
    _reject_unknown(tbo_table, set(_TBO_KEYS), path, "tbo")
    for key, kind in _TBO_KEYS.items():
        if key in tbo_table:
            _expect(tbo_table[key], kind, f"tbo.{key}", path)
    per_file = table.get("per-file-ignores", {})
    _expect(per_file, dict, "per-file-ignores", path)
    cache_dir = table.get("cache-dir", ".kvlint_cache")
    _expect(cache_dir, str, "cache-dir", path)
    prove = table.get("prove", False)
    _expect(prove, bool, "prove", path)
    reach = table.get("reach", "all")
    if reach not in REACH_SCOPES:
        raise ConfigError(f"{path}: `reach` must be one of {', '.join(REACH_SCOPES)}, not {reach!r}")
    engine_path = table.get("engine-path", "")
    _expect(engine_path, str, "engine-path", path)
    if engine_path:
        _expect_package_folder(path.parent / engine_path, engine_path, path)
    return Config(
        include=tuple(_str_list(table.get("include", ["."]), "include", path)),
        exclude=tuple(_str_list(table.get("exclude", []), "exclude", path)),
        select=tuple(_str_list(table.get("select", ["KV"]), "select", path)),
        ignore=tuple(_str_list(table.get("ignore", []), "ignore", path)),
        per_file_ignores=tuple(
            (glob, tuple(_str_list(codes, f"per-file-ignores.{glob}", path))) for glob, codes in per_file.items()
        ),
        cache_dir=cache_dir,
        contract=tuple(contract.items()),
        tbo=TboConfig(
            batch_class=tbo_table.get("batch-class", "ForwardBatch"),
            child_builder=tbo_table.get("child-builder", "filter_batch"),
            strict=tbo_table.get("strict", False),
        ),
        prove=prove,
        reach=reach,
        engine_path=engine_path,
        path=path,
    )


def configured_contract(config: Config) -> Contract:
    """The contract with every explicitly configured value applied; "auto" keys keep their defaults."""
    explicit = {key: value for key, value in config.contract if value != AUTO}
    contract = Contract(batch_class=config.tbo.batch_class, child_builder=config.tbo.child_builder)
    contract = contract.with_overrides(explicit)
    return replace(contract, sources=tuple((key, f"config {config.path}") for key in explicit))


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def _reject_unknown(table: Mapping[str, Any], known: set[str], path: Path, section: str) -> None:
    for key in table:
        if key not in known:
            where = f"[{section}]" if section else "top level"
            raise ConfigError(f"{path}: unknown key {key!r} in {where}; known keys: {', '.join(sorted(known))}")


def _expect(value: Any, kind: type, key: str, path: Path) -> None:
    if not isinstance(value, kind):
        raise ConfigError(f"{path}: {key} must be a {kind.__name__}, not {type(value).__name__}")


def _expect_package_folder(folder: Path, written: str, path: Path) -> None:
    if not folder.is_dir():
        raise ConfigError(f"{path}: engine-path {written!r} is not a folder")
    if not folder.resolve().name.isidentifier():
        raise ConfigError(
            f"{path}: engine-path {written!r} must name the engine's package folder (e.g. .../site-packages/sglang)"
        )


def _str_list(value: Any, key: str, path: Path) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{path}: {key} must be a list of strings")
    return list(value)
