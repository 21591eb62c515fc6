"""Reading a run directory's files for the report (nothing here holds results in memory between stages)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ragrade.errors import DataError
from ragrade.io import read_json, read_jsonl


@dataclass(frozen=True)
class RunFiles:
    """A run directory; every reader returns None when its file is absent."""

    root: Path

    def path(self, rel: str) -> Path:
        """The absolute path of ``rel``."""
        return self.root / rel

    def has(self, rel: str) -> bool:
        """True when ``rel`` exists."""
        return (self.root / rel).exists()

    def json(self, rel: str) -> Any:
        """A JSON file's content, or None when absent."""
        p = self.root / rel
        return read_json(p) if p.is_file() else None

    def csv(self, rel: str) -> pd.DataFrame | None:
        """A CSV file as a DataFrame, or None when absent."""
        p = self.root / rel
        if not p.is_file():
            return None
        try:
            return pd.read_csv(p)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise DataError(f"{p}: unreadable CSV ({exc})") from exc

    def jsonl(self, rel: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """A JSONL file's header meta and records, or None when absent."""
        p = self.root / rel
        if not p.is_file():
            return None
        header, records = read_jsonl(p)
        return (dict(header.meta) if header else {}), records

    def glob(self, pattern: str) -> list[str]:
        """Relative paths matching ``pattern`` (sorted)."""
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.glob(pattern))


__all__ = ["RunFiles"]
