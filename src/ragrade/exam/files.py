"""The exam file: JSONL with a versioned header, one multiple-choice question per line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragrade.errors import DataError
from ragrade.io import Header, JSONObject, read_jsonl, write_jsonl
from ragrade.schemas import check_question

EXAM_KIND = "exam"
EXAM_VERSION = 1
LETTERS = "ABCD"


@dataclass(frozen=True)
class Question:
    """One multiple-choice question: ``choices[answer]`` is the correct candidate.

    ``tags`` holds ``bloom`` (list of levels), ``qword`` (what/which/how/...),
    and ``topic`` (or None). ``generator`` names the generator and its parameters.
    Offline cloze questions contain exactly one blank, written ``____``.
    """

    id: str
    question: str
    choices: list[str]
    answer: int
    doc_id: str
    chunk_id: str
    source: str = ""
    tags: dict[str, Any] = field(default_factory=dict)
    generator: JSONObject = field(default_factory=dict)
    context: str = ""  # the source chunk's text (lets an oracle work across chunkings)
    span: tuple[int, int] | None = None  # the source chunk's character offsets in its document

    def to_record(self) -> JSONObject:
        """The JSONL record of this question."""
        return asdict(self)

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], where: str = "") -> Question:
        """Validate and build from a record; DataError (with ``where``) when malformed."""
        check_question(rec, where)
        try:
            choices = [str(c) for c in rec["choices"]]
            answer = int(rec["answer"])
            q = cls(
                id=str(rec["id"]),
                question=str(rec["question"]),
                choices=choices,
                answer=answer,
                doc_id=str(rec.get("doc_id", "")),
                chunk_id=str(rec.get("chunk_id", "")),
                source=str(rec.get("source", "")),
                tags=dict(rec.get("tags") or {}),
                generator=dict(rec.get("generator") or {}),
                context=str(rec.get("context", "")),
                span=(int(rec["span"][0]), int(rec["span"][1])) if rec.get("span") else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{where}: malformed question record ({exc!r})") from exc
        if not 0 <= q.answer < len(q.choices):
            raise DataError(f"{where}: answer index {q.answer} outside the {len(q.choices)} choices")
        return q


def write_exam(path: str | Path, questions: Iterable[Question], meta: Mapping[str, object] | None = None) -> int:
    """Write an exam file atomically; returns the number of questions."""
    return write_jsonl(path, (q.to_record() for q in questions), kind=EXAM_KIND, version=EXAM_VERSION, meta=meta)


def read_exam(path: str | Path) -> tuple[Header | None, list[Question]]:
    """Read and validate an exam file; DataError on a malformed or empty exam."""
    header, records = read_jsonl(path, kind=EXAM_KIND)
    questions = [Question.from_record(r, where=f"{path}:{i + 2 if header else i + 1}") for i, r in enumerate(records)]
    if not questions:
        raise DataError(f"{path}: the exam has no questions")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: duplicate question ids")
    return header, questions


__all__ = ["EXAM_KIND", "EXAM_VERSION", "LETTERS", "Question", "read_exam", "write_exam"]
