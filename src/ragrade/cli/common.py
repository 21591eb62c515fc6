"""Helpers shared by the CLI modules: JSON output, progress bars, option parsing."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, overload

import typer

from ragrade.errors import ConfigError

N = TypeVar("N", int, float)

if TYPE_CHECKING:
    from typer._click import Context

    from ragrade.progress import Progress


def error_line(message: str) -> None:
    """Print a one-line user error to stderr (credentials in URLs masked, a huge quoted input cut short)."""
    from ragrade.redact import redact_text
    from ragrade.schemas import cut_long_words

    typer.echo(f"ragrade: error: {cut_long_words(redact_text(message))}", err=True)


def warning_line(message: str) -> None:
    """Print a warning the API gave (to a ``warn`` callback) on stderr, each ``$setting`` it names spelled as
    the running command's flag (as :meth:`~ragrade.errors.RagradeError.render` does for errors)."""
    from ragrade.cli.setting_flags import flag_table, spell
    from ragrade.errors import render_settings

    ctx = _current_context()
    table = flag_table(ctx.command) if ctx is not None else {}
    text = render_settings(message, lambda name: spell(table, name))
    typer.echo(f"ragrade: warning: {text}", err=True)


def echo_json(obj: object) -> None:
    """Print ``obj`` as indented JSON on stdout."""
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


@dataclass(frozen=True)
class CommandSettings:
    """What the root command passes down to every verb (set by :func:`ragrade.cli.main.main`).

    ``dry_run_folder``: under ``ragrade --dry-run``, the temporary folder that every file of the command goes
    to (see :func:`output_path`), created and deleted by :func:`ragrade.cli.dryrun.run_dry`.
    """

    dry_run_folder: Path | None = None


def _current_context() -> Context | None:
    try:  # typer >= 0.2x vendors its own click
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer on real click
        from click import get_current_context  # type: ignore[no-redef,import-not-found,unused-ignore]

    return get_current_context(silent=True)


def command_settings() -> CommandSettings:
    """The settings the root command was run with (defaults outside a command)."""
    ctx = _current_context()
    obj = ctx.find_root().obj if ctx is not None else None
    return obj if isinstance(obj, CommandSettings) else CommandSettings()


@overload
def output_path(path: Path, name: str = "out") -> Path: ...
@overload
def output_path(path: Path | None, name: str = "out") -> Path | None: ...
def output_path(path: Path | None, name: str = "out") -> Path | None:
    """Where the command writes what its user named ``path`` (an ``--out`` or ``--qrels`` value).

    ``path`` itself, except in a dry run: then the same file name inside the run's temporary folder (``name``
    there when the option was not given), so that no non-answer lands in the user's files.
    """
    folder = command_settings().dry_run_folder
    if folder is None:
        return path
    return folder / ((path.name if path is not None else "") or name)


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


def split_numbers(value: str | None, option: str, number: type[N]) -> list[N] | None:
    """Parse a comma list of ``number`` (int or float); None when not given."""
    items = split_list(value, option)
    if items is None:
        return None
    try:
        return [number(v) for v in items]
    except ValueError as exc:
        raise ConfigError(f"{option} expects {'integers' if number is int else 'numbers'}, got '{value}'") from exc


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
