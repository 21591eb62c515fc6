"""Helpers shared by the CLI modules: JSON output, progress bars, option parsing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ragrade.errors import ConfigError

if TYPE_CHECKING:
    from ragrade.progress import Progress


def error_line(message: str) -> None:
    """Print a one-line user error to stderr (credentials in URLs masked)."""
    from ragrade.redact import redact_text

    typer.echo(f"ragrade: error: {redact_text(message)}", err=True)


def echo_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout."""
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def dry_run_requested() -> bool:
    """True when the running command was given the root option ``ragrade --dry-run``.

    Read from the command line being parsed (click's context), not from process state; a command puts it
    into its run's settings (the ``dry_run`` LLM option), which carry it to every worker.
    """
    try:  # typer >= 0.2x vendors its own click
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer on real click
        from click import get_current_context  # type: ignore[no-redef,import-not-found,unused-ignore]

    ctx = get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("dry_run"))


LOADING = "loading models, indexes and data ..."


def quiet_requested() -> bool:
    """True when the running command was given the root option ``ragrade --quiet`` (no progress display)."""
    try:  # typer >= 0.2x vendors its own click
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer on real click
        from click import get_current_context  # type: ignore[no-redef,import-not-found,unused-ignore]

    ctx = get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("quiet"))


def command_progress(name: str, *, aggregate: bool = False, status: str | None = None) -> Progress:
    """The progress display of a command (see :mod:`ragrade.progress`): bars on a terminal, plain lines
    otherwise, nothing under ``--quiet`` or ``--dry-run``; ``status``: what it sets up first."""
    from ragrade.progress import Progress

    return Progress(name, aggregate=aggregate, quiet=quiet_requested() or dry_run_requested(), status=status)


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
