"""Helpers shared by the CLI modules: JSON output, progress bars, option parsing."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from ragrade.errors import ConfigError


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout."""
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def is_tty() -> bool:
    """True when stderr is an interactive terminal (progress bars are shown only then)."""
    return sys.stderr.isatty()


def split_list(value: str | None, option: str) -> list[str] | None:
    """Parse a comma-separated option value; None when not given."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise ConfigError(f"{option} needs at least one value")
    return items
