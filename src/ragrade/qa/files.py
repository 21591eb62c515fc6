"""The synthetic QA file: versioned JSONL of (question, reference answer, reference context) triplets.

Each record::

    {"id": "qa-...", "question": "...", "reference": "...",        # the reference answer
     "reference_context": "...",                                    # the source chunk's text
     "chunk_id": "...", "doc_id": "...", "source": "...",
     "relevant_chunk_ids": ["..."], "relevant_doc_ids": ["..."],   # qrels view (see below)
     "answer_span": [start, end] | null,                            # answer offsets in reference_context
     "doc_span": [start, end] | null,                               # the chunk's offsets in its document
     "metadata": {...chunk metadata: topic, title...},
     "generator": {"name": ..., "llm": ..., "baseline": bool, "seed": ..., "prompt_sha256": ...}}

Qrels: every record is also a retrieval judgement, ``question`` -> the
chunk (and document) it was generated from. :func:`qrels_records` gives the
plain shape ``{"query_id", "query", "relevant_chunk_ids", "relevant_doc_ids"}``
(one line per question) that ``ragrade qa generate --qrels`` writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ragrade.errors import DataError
from ragrade.io import Header, read_jsonl, write_jsonl
from ragrade.schemas import check_qa

QA_KIND = "qa"
QA_VERSION = 1
QRELS_KIND = "qrels"
QRELS_VERSION = 1


@dataclass(frozen=True)
class QAItem:
    """One synthetic question with its reference answer and the context it came from."""

    id: str
    question: str
    reference: str
    reference_context: str
    chunk_id: str
    doc_id: str
    source: str = ""
    answer_span: tuple[int, int] | None = None
    doc_span: tuple[int, int] | None = None
    metadata: dict[str, object] = field(default_factory=dict)
    generator: dict[str, object] = field(default_factory=dict)

    def to_record(self) -> dict[str, object]:
        """The JSONL record (with the qrels view fields)."""
        rec = asdict(self)
        rec["relevant_chunk_ids"] = [self.chunk_id] if self.chunk_id else []
        rec["relevant_doc_ids"] = [self.doc_id] if self.doc_id else []
        return rec

    @classmethod
    def from_record(cls, rec: Mapping[str, object], where: str = "") -> QAItem:
        """Validate and build from a record; DataError naming ``where`` when malformed."""
        check_qa(rec, where)
        try:
            item = cls(
                id=str(rec["id"]),
                question=str(rec["question"]),
                reference=str(rec.get("reference") or ""),
                reference_context=str(rec.get("reference_context") or ""),
                chunk_id=str(rec.get("chunk_id") or ""),
                doc_id=str(rec.get("doc_id") or ""),
                source=str(rec.get("source") or ""),
                answer_span=_span(rec.get("answer_span")),
                doc_span=_span(rec.get("doc_span")),
                metadata=_object(rec.get("metadata")),
                generator=_object(rec.get("generator")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: malformed QA record ({exc!r})") from exc
        if not item.question.strip():
            raise DataError(f"{where}: empty question")
        return item


def _span(value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple):
        raise TypeError(f"a span is [start, end], got {value!r}")
    return int(value[0]), int(value[1])


def _object(value: object) -> dict[str, object]:
    """A copy of a JSON object field (check_qa rejects any other type); empty when missing."""
    return dict(value) if isinstance(value, dict) else {}


def write_qa(path: str | Path, items: Iterable[QAItem], meta: Mapping[str, object] | None = None) -> int:
    """Write a QA file atomically; returns the number of items."""
    return write_jsonl(path, (it.to_record() for it in items), kind=QA_KIND, version=QA_VERSION, meta=meta)


def read_qa(path: str | Path) -> tuple[Header | None, list[QAItem]]:
    """Read and validate a QA file (a header is optional); DataError when empty or ids repeat."""
    header, records = read_jsonl(path, kind=QA_KIND)
    if header is not None and header.version > QA_VERSION:
        raise DataError(f"{path}: QA file version {header.version} is newer than this ragrade supports")
    offset = 2 if header else 1
    items = [QAItem.from_record(r, where=f"{path}:{i + offset}") for i, r in enumerate(records)]
    if not items:
        raise DataError(f"{path}: the QA file has no questions")
    seen: set[str] = set()
    for i, it in enumerate(items):
        if it.id in seen:
            raise DataError(f"{path}:{i + offset}: duplicate question id '{it.id}'")
        seen.add(it.id)
    return header, items


def qrels_records(items: Iterable[QAItem]) -> list[dict[str, object]]:
    """The qrels view: one record per question with its relevant chunk and document ids."""
    return [
        {
            "query_id": it.id,
            "query": it.question,
            "relevant_chunk_ids": [it.chunk_id] if it.chunk_id else [],
            "relevant_doc_ids": [it.doc_id] if it.doc_id else [],
        }
        for it in items
    ]


def write_qrels(path: str | Path, items: Iterable[QAItem]) -> int:
    """Write the qrels view of ``items`` as versioned JSONL."""
    return write_jsonl(path, qrels_records(items), kind=QRELS_KIND, version=QRELS_VERSION)


__all__ = ["QA_KIND", "QA_VERSION", "QRELS_KIND", "QAItem", "qrels_records", "read_qa", "write_qa", "write_qrels"]
