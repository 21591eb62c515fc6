"""Typed configuration merged once: defaults < config file < CLI flags.

Configs are pydantic models. ``None`` in a layer means "not given" and never
overrides a lower layer; a falsy value such as ``0`` or ``False`` does.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from ragrade.errors import ConfigError, did_you_mean, open_error

M = TypeVar("M", bound=BaseModel)


_DEPRECATIONS: set[str] = set()


def deprecated(message: str) -> None:
    """Print ``ragrade: warning: <message>`` on stderr, once per process (an old spelling of a config key or
    table, read until the next release)."""
    line = f"ragrade: warning: {message}"
    if line not in _DEPRECATIONS:
        _DEPRECATIONS.add(line)
        print(line, file=sys.stderr)


def deep_merge(base: Mapping[str, object], override: Mapping[str, object]) -> dict[str, object]:
    """Merge ``override`` into ``base`` recursively; ``None`` values in ``override`` are skipped."""
    out: dict[str, object] = dict(base)
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
    except OSError as exc:
        raise open_error(path, exc, ConfigError, "a TOML config file", "config file not found") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text; is it a binary file?") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: TOML nested too deeply") from exc


def _model_at(model: type[BaseModel], path: Sequence[int | str]) -> type[BaseModel] | None:
    """The pydantic model of the table at ``path`` inside ``model`` (list positions skipped), if any."""
    current: type[BaseModel] | None = model
    for part in path:
        if current is None or isinstance(part, int):
            continue
        field = current.model_fields.get(part) or next(
            (f for f in current.model_fields.values() if part in _aliases(f.validation_alias)), None
        )  # a table read under another name (JobConfig.llm is the [llm_options] table)
        current = _submodel(field.annotation) if field is not None else None
    return current


def _aliases(alias: object) -> list[object]:
    """The names a field's ``validation_alias`` accepts (a name, or the choices of an ``AliasChoices``)."""
    return [alias] if isinstance(alias, str) else list(getattr(alias, "choices", []))


def _submodel(annotation: object) -> type[BaseModel] | None:
    """The pydantic model in ``annotation`` (itself, or inside ``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _submodel(arg)
        if found is not None:
            return found
    return None


def describe_validation(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """One line naming each bad field of a pydantic error: ``k: Input should be ... (got -3)``.

    With ``model`` (the model validated), an unknown key gets a did-you-mean hint from the keys of its table.
    """
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        if err["type"] == "extra_forbidden":
            table = _model_at(model, err["loc"][:-1]) if model is not None else None
            hint = did_you_mean(str(err["loc"][-1]), list(table.model_fields)) if table is not None else ""
            parts.append(f"{loc}: unknown key (not an option here).{hint}".rstrip("."))
            continue
        value = err.get("input")
        shown = f" (got {value!r})" if isinstance(value, (int, float, str, bool)) and len(repr(value)) < 60 else ""
        msg = err["msg"].removeprefix("Value error, ")  # a validator's own message says what is wrong
        parts.append(f"{loc}: {msg}{shown}")
    return "; ".join(parts)


def build_config(model: type[M], *layers: Mapping[str, object] | None, source: str = "config") -> M:
    """Validate the merge of ``layers`` (lowest first) into ``model``.

    Validation errors become one ConfigError that names each bad field.
    """
    merged: dict[str, object] = {}
    for layer in layers:
        if layer:
            merged = deep_merge(merged, layer)
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(f"invalid {source}: {describe_validation(exc, model)}") from exc


__all__ = ["build_config", "deep_merge", "describe_validation", "load_toml"]
