"""CLI verbs of the irt stage (filled in by its issue)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to ``app``."""
