"""Which documents an exam (or a QA file) was written from, and how much of that an index holds.

A generated exam records, in its header's ``corpus`` entry, the fingerprint of the chunks it was written
from (:func:`corpus_fingerprint`): a digest over every chunk's id and text, with the counts of chunks and
documents and a ``version``. It is cheap (one pass over the texts already in memory) and stable (the
chunks' order does not matter; the same chunks give the same digest on every machine).

Each question names its source passage (``chunk_id``, ``doc_id``, and ``context``, the passage's text).
:func:`held_share` counts how many of those source passages an index holds: a passage is held when the
index has a chunk of that id whose text is the passage's (ids alone could collide across corpora), or,
when the index was chunked differently, a chunk of the same document (document ids carry a digest of the
document's path and text, :func:`ragrade.corpus.load.make_doc_id`). An exam without a fingerprint (written
before ragrade recorded one) is checked by these ids all the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

CORPUS_KEY = "corpus"  # the header entry of an exam / QA file
CORPUS_FINGERPRINT_VERSION = 1


class ChunkLike(Protocol):
    """What a fingerprint and a share read of a chunk."""

    @property
    def id(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def text(self) -> str: ...


class SourceLike(Protocol):
    """What a share reads of a question: its source passage's ids and text."""

    @property
    def chunk_id(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def context(self) -> str: ...


def corpus_fingerprint(chunks: Iterable[ChunkLike]) -> dict[str, object]:
    """The ``corpus`` entry of a file written from ``chunks``: ``version``, ``digest`` (sha256 over every
    chunk's id and text, in id order), ``chunks`` and ``documents`` (counts)."""
    chunks = list(chunks)
    h = hashlib.sha256()
    for cid, text in sorted((c.id, c.text) for c in chunks):
        h.update(cid.encode("utf-8", "replace") + b"\0" + text.encode("utf-8", "replace") + b"\0")
    return {
        "version": CORPUS_FINGERPRINT_VERSION,
        "digest": h.hexdigest(),
        "chunks": len(chunks),
        "documents": len({c.doc_id for c in chunks}),
    }


def recorded_fingerprint(meta: Mapping[str, object] | None) -> dict[str, object] | None:
    """The ``corpus`` entry a file's header ``meta`` records (None: none, or one of a later version)."""
    entry = (meta or {}).get(CORPUS_KEY)
    if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
        return None
    version = entry.get("version")
    if not isinstance(version, int) or version > CORPUS_FINGERPRINT_VERSION:
        return None
    return dict(entry)


@dataclass(frozen=True)
class Share:
    """How many of a file's ``of`` distinct source passages an index holds (``held``); ``missing_questions``:
    the questions whose source passage it does not hold."""

    held: int
    of: int
    missing_questions: int

    @property
    def complete(self) -> bool:
        """Every source passage is held."""
        return self.held == self.of

    def percent(self) -> str:
        """The share in whole percent, never rounded up to 100% (or down to 0%) when it is not exactly that."""
        if not self.of:
            return "100%"
        pct = 100 * self.held / self.of
        shown = int(pct) if self.held < self.of else 100
        return f"{max(shown, 1) if self.held else 0}%"


def held_share(questions: Iterable[SourceLike], chunks: Iterable[ChunkLike]) -> Share:
    """How many distinct source passages of ``questions`` the index of ``chunks`` holds (see the module
    docstring); a passage is counted once however many questions it served, and a question that names no
    source (no chunk id, no document id) is left out."""
    texts: dict[str, str] = {}
    docs: set[str] = set()
    for c in chunks:
        texts[c.id] = c.text
        docs.add(c.doc_id)
    seen: dict[str, bool] = {}
    missing_questions = 0
    for q in questions:
        if not q.chunk_id and not q.doc_id:  # a question that names no source: nothing to look for
            continue
        key = q.chunk_id or f"{q.doc_id}\0{q.context}"
        if key not in seen:
            seen[key] = _holds(q, texts, docs)
        missing_questions += 0 if seen[key] else 1
    return Share(sum(seen.values()), len(seen), missing_questions)


def _holds(q: SourceLike, texts: Mapping[str, str], docs: set[str]) -> bool:
    text = texts.get(q.chunk_id) if q.chunk_id else None
    if text is not None:  # the passage's own chunk: the same text (a split code block's context adds fences)
        return not q.context or text in q.context
    return bool(q.doc_id) and q.doc_id in docs  # chunked otherwise: the same document


__all__ = [
    "CORPUS_FINGERPRINT_VERSION",
    "CORPUS_KEY",
    "Share",
    "corpus_fingerprint",
    "held_share",
    "recorded_fingerprint",
]
