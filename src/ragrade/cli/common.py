"""Helpers shared by the CLI modules: JSON output, progress bars, option parsing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
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


def check_out_file(path: Path, option: str = "--out") -> Path:
    """A user's output file: not a folder, and at most its own folder missing (created on write).

    ``--out new/x.jsonl`` creates ``new/``; ``--out /missing/dir/x.jsonl`` is a ConfigError rather than
    a tree of folders made from a typo.
    """
    if path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder; give a file name to write")
    parent = path.parent
    if not parent.exists() and not parent.parent.exists():
        raise ConfigError(f"{option} {path}: the folder {parent.parent} does not exist; create it first")
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"{option} {path}: {parent} is a file, not a folder")
    return path
