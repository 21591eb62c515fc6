"""Reading and writing documents and chunks as versioned JSONL.

Documents: header kind ``documents``; one :class:`~ragrade.corpus.types.Document`
record per line. Chunks: header kind ``chunks`` whose meta holds the chunker
(``{"chunker": {"strategy": ..., "size": ..., ...}}``); one
:class:`~ragrade.corpus.types.Chunk` record per line. Readers accept files
without a header (so users can bring their own JSONL with the same fields)
and report a bad record as ``file:line``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragrade.corpus.types import CHUNKS_KIND, CHUNKS_VERSION, DOCUMENTS_KIND, DOCUMENTS_VERSION, Chunk, Document
from ragrade.errors import DataError
from ragrade.io import HEADER_KEY, JSONObject, check_file_version, iter_jsonl, write_jsonl
from ragrade.schemas import check_chunk, check_document


@dataclass
class ChunkFile:
    """The content of a chunks file: chunks plus the header meta (chunker parameters)."""

    chunks: list[Chunk]
    meta: JSONObject = field(default_factory=dict)

    @property
    def chunker(self) -> JSONObject:
        """The chunker's description recorded in the header (empty when the file has none)."""
        value = self.meta.get("chunker")
        return dict(value) if isinstance(value, dict) else {}


def write_documents(path: str | Path, docs: Iterable[Document], *, meta: Mapping[str, object] | None = None) -> int:
    """Write documents (atomically); returns the count."""
    return write_jsonl(path, (d.to_record() for d in docs), kind=DOCUMENTS_KIND, version=DOCUMENTS_VERSION, meta=meta)


def _records(path: str | Path, kind: str, version: int) -> tuple[JSONObject, list[tuple[int, JSONObject]]]:
    """The header meta (empty without a header) and the ``(line, record)`` pairs of a file, in one pass."""
    meta: JSONObject = {}
    out: list[tuple[int, JSONObject]] = []
    for lineno, rec in iter_jsonl(path):
        head = rec.get(HEADER_KEY) if len(rec) == 1 else None
        if isinstance(head, dict) and not out:
            found = str(head.get("kind", ""))
            if found != kind:
                raise DataError(f"{path}: expected a '{kind}' file, found a '{found}' file")
            check_file_version(head.get("version", 1), path, kind, version, "write it again with this one")
            meta = {k: v for k, v in head.items() if k not in ("kind", "version")}
            continue
        out.append((lineno, rec))
    return meta, out


def read_documents(path: str | Path) -> list[Document]:
    """Read a documents file; DataError with ``file:line`` on a bad record or a duplicate id."""
    docs: list[Document] = []
    seen: set[str] = set()
    for lineno, rec in _records(path, DOCUMENTS_KIND, DOCUMENTS_VERSION)[1]:
        check_document(rec, f"{path}:{lineno}")
        doc = Document.from_record(rec)
        if doc.id in seen:
            raise DataError(f"{path}:{lineno}: duplicate document id '{doc.id}'")
        seen.add(doc.id)
        docs.append(doc)
    return docs


def write_chunks(
    path: str | Path, chunks: Iterable[Chunk], *, chunker: Any = None, meta: Mapping[str, Any] | None = None
) -> int:
    """Write chunks (atomically) with the chunker's description in the header; returns the count."""
    head: JSONObject = dict(meta or {})
    if chunker is not None:
        head["chunker"] = chunker.describe() if hasattr(chunker, "describe") else dict(chunker)
    return write_jsonl(path, (c.to_record() for c in chunks), kind=CHUNKS_KIND, version=CHUNKS_VERSION, meta=head)


def read_chunk_file(path: str | Path) -> ChunkFile:
    """Read a chunks file with its header meta."""
    meta, records = _records(path, CHUNKS_KIND, CHUNKS_VERSION)
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for lineno, rec in records:
        check_chunk(rec, f"{path}:{lineno}")
        try:
            chunk = Chunk.from_record(rec)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{path}:{lineno}: malformed chunk record ({exc})") from exc
        if chunk.id in seen:
            raise DataError(f"{path}:{lineno}: duplicate chunk id '{chunk.id}'")
        seen.add(chunk.id)
        chunks.append(chunk)
    return ChunkFile(chunks=chunks, meta=meta)


def read_chunks(path: str | Path) -> list[Chunk]:
    """Read the chunks of a chunks file."""
    return read_chunk_file(path).chunks


__all__ = ["ChunkFile", "read_chunk_file", "read_chunks", "read_documents", "write_chunks", "write_documents"]
