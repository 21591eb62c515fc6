"""CLI verbs of the exam stage: ``ragrade exam generate|stats`` (``take`` is added by cli/sweep.py)."""

from __future__ import annotations

import typer

exam_app = typer.Typer(help="Generate, inspect and take multiple-choice exams.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``exam`` group to ``app``."""
    app.add_typer(exam_app, name="exam")
