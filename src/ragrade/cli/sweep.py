"""CLI verbs of the evaluation sweep: ``ragrade exam take`` and ``ragrade compare`` (filled in by its issue)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``compare`` to ``app`` and ``take`` to the exam group."""
