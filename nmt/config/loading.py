"""`--config`: a YAML file, or a shipped config by name (`--config transformer`); read, overridden, checked, and
its warnings said."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nmt.config.consistency import check_consistency
from nmt.config.overrides import apply_overrides
from nmt.config.parsing import ANCHORS_PREFIX, from_dict, read_yaml
from nmt.config.sections import Config
from nmt.errors import ConfigError, warn


_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def shipped_configs() -> dict[str, Path]:
    """The configs nmt ships, by name: configs/ of this checkout, or nmt/configs/ inside an installed wheel (the
    build copies configs/ there), so `--config transformer` works without a checkout."""
    package = Path(__file__).resolve().parents[1]  # nmt/
    checkout = package.parent
    folders = [package / "configs"]
    if (checkout / "pyproject.toml").is_file():  # never some other project's configs/ beside site-packages/nmt
        folders.append(checkout / "configs")
    for folder in folders:
        if folder.is_dir() and any(folder.glob("*.yaml")):
            return {path.stem: path for path in sorted(folder.glob("*.yaml"), key=lambda path: path.stem)}
    return {}


def _local_configs(path: Path) -> list[Path]:
    """Files here that a config typed without its suffix (`demo`, `configs/demo`) may mean."""
    if path.suffix:
        return []
    candidates = [path.with_suffix(".yaml")] + ([Path("configs") / f"{path.name}.yaml"] if len(path.parts) == 1 else [])
    return [candidate for candidate in candidates if candidate.is_file()]


def _shipped_config(path: Path) -> Path | None:
    """The shipped config a bare name (`demo`) stands for, else None: a path (with a folder or a suffix) is a file."""
    return shipped_configs().get(path.name) if not path.suffix and len(path.parts) == 1 else None


def _refuse_ambiguous_name(path: Path) -> None:
    """A bare name (`demo`) that is a shipped config and also, with its suffix, another file here (`demo.yaml`,
    `configs/demo.yaml` in a copy of the checkout's folder): the user may mean either, so neither is guessed."""
    shipped = _shipped_config(path)
    if shipped is None:
        return
    local = [candidate for candidate in _local_configs(path) if not candidate.samefile(shipped)]
    if local:
        raise ConfigError(f"--config {path} may mean {local[0]} here or the shipped config {path} ({shipped}): "
                          f"name the file, --config {local[0]} or --config {shipped}")


def _config_suggestion(path: Path) -> str:
    """What a missing config was probably meant to be: ' (did you mean configs/demo.yaml?)' when that file is here,
    else the shipped configs by name (`configs/demo.yaml` outside a checkout: `--config demo`)."""
    local = _local_configs(path)
    if local:
        return f" (did you mean {local[0]}?)"
    shipped = shipped_configs()
    if path.stem in shipped:
        return f" (the shipped config of that name: --config {path.stem})"
    return f" (shipped configs, by name: {', '.join(shipped)})" if shipped else ""


def load_config(path: str | Path | None, overrides: list[str] | None = None, warn=warn) -> Config:
    """Read a YAML config (or the defaults when `path` is None), apply overrides, validate. A bare name that is no
    file here (`transformer`) is the shipped config of that name."""
    raw: Any = {}
    if path is not None:
        path = Path(path)
        if not path.exists():
            _refuse_ambiguous_name(path)
            path = _shipped_config(path) or path
        # Not `is_file()`: a pipe (`--config <(...)`) or /dev/stdin is a config too; read_yaml reports the rest.
        if not path.exists():
            raise ConfigError(f"config file not found: {path}{_config_suggestion(path)}")
        if path.is_dir():
            raise ConfigError(f"config {path} is a directory, not a YAML file")
        raw = read_yaml(path) or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        raw = {key: value for key, value in raw.items() if not str(key).startswith(ANCHORS_PREFIX)}
        raw.setdefault("name", path.stem)
    config = from_dict(apply_overrides(raw, overrides or []))
    if not _RUN_NAME.fullmatch(config.name):
        raise ConfigError(f"name {config.name!r} must be a plain name (letters, digits, . _ -): "
                          "it names the directory under runs/")
    for message in check_consistency(config):
        warn(message)
    return config
