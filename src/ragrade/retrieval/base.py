"""The Retriever protocol and the Hit record (the Embedder protocol is :mod:`ragrade.embedding.base`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ragrade.io import JSONObject


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk for one query (rank starts at 1)."""

    chunk_id: str
    doc_id: str
    score: float
    rank: int
    text: str
    source: str = ""
    # character offsets into the chunk's text of the parts ``text`` keeps (set by extractive compression)
    spans: tuple[tuple[int, int], ...] | None = None


@runtime_checkable
class Retriever(Protocol):
    """Retrieves the top-k chunks for a batch of queries."""

    name: str

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """One ranked hit list (at most ``k`` hits) per query, in query order."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        ...


__all__ = ["Hit", "Retriever"]
