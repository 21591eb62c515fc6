"""Documents and chunks: the records that flow from the corpus stage onwards (and Skip, an unusable file)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ragrade.io import JSONObject

DOCUMENTS_KIND = "documents"
DOCUMENTS_VERSION = 1
CHUNKS_KIND = "chunks"
CHUNKS_VERSION = 1


@dataclass(frozen=True)
class Document:
    """A cleaned document: ``id`` is stable (derived from source path and content)."""

    id: str
    text: str
    source: str
    metadata: JSONObject = field(default_factory=dict)

    def to_record(self) -> JSONObject:
        """The JSONL record of this document."""
        return asdict(self)

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Document:
        """Build from a JSONL record written by :meth:`to_record`."""
        return cls(
            id=str(rec["id"]),
            text=str(rec["text"]),
            source=str(rec.get("source", "")),
            metadata=dict(rec.get("metadata") or {}),
        )


@dataclass(frozen=True)
class Chunk:
    """A span of a document: ``doc.text[start:end] == text`` exactly.

    ``metadata`` carries the document's metadata (topic, title, ...) so later
    stages can stratify or group without reading the documents again.
    ``tokens`` is the chunk's size in the chunker's unit (tokens of its
    tokenizer); ``oversize`` marks a chunk larger than the chunker's size
    because one unsplittable unit (a single tokenizer word) exceeds it.
    The chunkers add ``heading_path`` (page title > section > ...) to the
    metadata, and for a part of a code block too large for one chunk
    ``fence_open`` / ``fence_close``: the fences :meth:`display_text` adds.
    """

    id: str
    doc_id: str
    text: str
    start: int
    end: int
    strategy: str
    params: JSONObject = field(default_factory=dict)
    source: str = ""
    metadata: JSONObject = field(default_factory=dict)
    tokens: int = 0
    oversize: bool = False

    def display_text(self) -> str:
        """The text with the fences of a split code block reopened and closed (balanced fences)."""
        head = self.metadata.get("fence_open")
        tail = self.metadata.get("fence_close")
        text = f"{head}\n{self.text}" if isinstance(head, str) and head else self.text
        return f"{text}\n{tail}" if isinstance(tail, str) and tail else text

    def to_record(self) -> JSONObject:
        """The JSONL record of this chunk."""
        return asdict(self)

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Chunk:
        """Build from a JSONL record written by :meth:`to_record`."""
        return cls(
            id=str(rec["id"]),
            doc_id=str(rec["doc_id"]),
            text=str(rec["text"]),
            start=int(rec["start"]),
            end=int(rec["end"]),
            strategy=str(rec.get("strategy", "")),
            params=dict(rec.get("params") or {}),
            source=str(rec.get("source", "")),
            metadata=dict(rec.get("metadata") or {}),
            tokens=int(rec.get("tokens") or 0),
            oversize=bool(rec.get("oversize", False)),
        )


class Skip(Exception):
    """A file that cannot be used; ``kind`` groups reasons in summaries."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


__all__ = ["CHUNKS_KIND", "CHUNKS_VERSION", "DOCUMENTS_KIND", "DOCUMENTS_VERSION", "Chunk", "Document", "Skip"]
