"""Typed configuration merged once: defaults < config file < CLI flags.

Configs are pydantic models. ``None`` in a layer means "not given" and never
overrides a lower layer; a falsy value such as ``0`` or ``False`` does.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ragrade.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``override`` into ``base`` recursively; ``None`` values in ``override`` are skipped."""
    out: dict[str, Any] = dict(base)
    for key, value in override.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            current = out.get(key)
            out[key] = deep_merge(current if isinstance(current, Mapping) else {}, value)
        else:
            out[key] = value
    return out


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file, with a ConfigError naming the file on failure."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from exc


def build_config(model: type[M], *layers: Mapping[str, Any] | None, source: str = "config") -> M:
    """Validate the merge of ``layers`` (lowest first) into ``model``.

    Validation errors become one ConfigError that names each bad field.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer:
            merged = deep_merge(merged, layer)
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid {source}: {problems}") from exc


__all__ = ["build_config", "deep_merge", "load_toml"]
