"""The root ``ragrade`` Typer app: its own options, and one verb module per stage registered on it.

:mod:`ragrade.cli.main` runs it with the :class:`~ragrade.cli.common.CommandSettings` every verb reads (a dry
run's temporary folder among them).
"""

from __future__ import annotations

import importlib

import typer

from ragrade._version import __version__

app = typer.Typer(
    name="ragrade",
    help="Tell which RAG pipeline to trust on your own documents, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# one module per stage; each exposes register(app)
_VERB_MODULES = ("corpus", "retrieval", "llm", "exam", "sweep", "irt", "robust", "qa", "run", "calibration")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ragrade {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Run the command without sending any LLM request: count the requests and prompt tokens it would "
        "send (an upper bound where it retries failures); its files go to a temporary folder that is deleted.",
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="No progress display (the default: bars on a terminal, a line every "
        "$RAGRADE_PROGRESS_INTERVAL seconds (10) otherwise).",
    ),
) -> None:
    """Tell which RAG pipeline to trust on your own documents, and why."""


for _name in _VERB_MODULES:
    importlib.import_module(f"ragrade.cli.{_name}").register(app)


__all__ = ["app"]
