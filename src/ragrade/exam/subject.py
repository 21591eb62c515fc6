"""What an offline question names as its subject: the page title (or topic), and the section of the sentence."""

from __future__ import annotations

import re

from ragrade.corpus.types import Chunk


def subject_of(chunk: Chunk, topic_field: str | None = None, *, prefer: str = "title") -> str:
    """A short subject for the question: the chunk's title, else its topic (empty when neither is known).

    ``prefer="topic"`` puts the topic first (``"none"``: no subject).
    """
    if prefer == "none":
        return ""
    keys = ["title", topic_field or "topic", "topic"]
    if prefer == "topic":
        keys = [topic_field or "topic", "topic", "title"]
    for key in keys:
        val = chunk.metadata.get(key)
        if isinstance(val, str) and val.strip():
            return re.sub(r"\s+", " ", val).strip()[:80]
    return ""


def section_of(chunk: Chunk, pos: int) -> str:
    """The title of the section holding offset ``pos`` of the chunk: the last heading before it in the chunk's
    text, else the deepest section of the chunk's ``heading_path`` below the page title ("" when none)."""
    from ragrade.corpus.structure import parse_structure

    if "#" in chunk.text[:pos]:
        before = [h for h in parse_structure(chunk.text).headings if h.start < pos]
        if before:
            return re.sub(r"\s+", " ", before[-1].title).strip()
    path = chunk.metadata.get("heading_path")
    if isinstance(path, list) and len(path) > 1:
        return re.sub(r"\s+", " ", str(path[-1])).strip()
    return ""


__all__ = ["section_of", "subject_of"]
