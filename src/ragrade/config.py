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
    except IsADirectoryError as exc:
        raise ConfigError(f"{path}: is a folder, expected a TOML config file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text; is it a binary file?") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: TOML nested too deeply") from exc


def describe_validation(exc: ValidationError) -> str:
    """One line naming each bad field of a pydantic error: ``k: Input should be ... (got -3)``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown key (not an option here)")
            continue
        value = err.get("input")
        shown = f" (got {value!r})" if isinstance(value, (int, float, str, bool)) and len(repr(value)) < 60 else ""
        parts.append(f"{loc}: {err['msg']}{shown}")
    return "; ".join(parts)


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
        raise ConfigError(f"invalid {source}: {describe_validation(exc)}") from exc


__all__ = ["build_config", "deep_merge", "describe_validation", "load_toml"]
