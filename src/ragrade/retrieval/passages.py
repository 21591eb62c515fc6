"""What a reader (an LLM, a terminal) is shown for a retrieved chunk.

A chunk's ``text`` is the exact slice of its document (offsets, citations and
the indexes use it); a part of a code block too large for one chunk lacks the
fences that open or close it. The shown text is :meth:`Chunk.display_text`
(fences balanced), optionally after the chunk's heading path
(``pip > Installing > From source``) on a line of its own. A passage changed by
post-processing (extractive compression keeps only some sentences) is shown as
it is, under the same heading path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragrade.corpus.types import Chunk
from ragrade.errors import DataError
from ragrade.retrieval.base import Hit

HEADING_SEPARATOR = " > "


def heading_line(chunk: Chunk) -> str:
    """The chunk's heading path as one line (``page > section > ...``; empty when it has none)."""
    path = chunk.metadata.get("heading_path")
    if not isinstance(path, list):
        return ""
    return HEADING_SEPARATOR.join(" ".join(str(p).split()) for p in path if str(p).strip())


def shown_text(text: str, chunk: Chunk | None, *, headings: bool = False) -> str:
    """The passage shown for ``text`` retrieved as ``chunk`` (``text`` unchanged when the chunk is unknown)."""
    if chunk is None:
        return text
    body = chunk.display_text() if text == chunk.text else text
    head = heading_line(chunk) if headings else ""
    return f"{head}\n{body}" if head else body


def shown_passages(hits: Sequence[Hit], lookup: Callable[[str], Chunk] | None, *, headings: bool = False) -> list[str]:
    """:func:`shown_text` of each hit; ``lookup`` maps a chunk id to its chunk (e.g. ``Index.chunk``)."""
    out = []
    for h in hits:
        chunk = None
        if lookup is not None:
            try:
                chunk = lookup(h.chunk_id)
            except DataError:  # a hit from outside the index (an external system): shown as it came
                chunk = None
        out.append(shown_text(h.text, chunk, headings=headings))
    return out


__all__ = ["HEADING_SEPARATOR", "heading_line", "shown_passages", "shown_text"]
