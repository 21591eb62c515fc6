"""Document structure the chunkers respect: fenced code blocks and ``#`` headings.

The readers write Markdown, MyST and reST documents with headings as ``#`` lines and code as
fenced blocks (see :mod:`ragrade.corpus.markdown` and :mod:`ragrade.corpus.rst`); documents
brought as JSON/JSONL text in Markdown have the same marks. This module finds them in a
document's text (headings only outside code) and gives the chunkers their *units*:

* a fenced code block is one unit (never split when it fits in a chunk);
* a heading line is a unit of its own, which a chunk may not end on (it stays with the text it
  heads);
* the rest is cut at blank lines, as before.

It also gives each chunk its metadata: the heading path (page title > section > subsection) at
the chunk's start, and for a chunk that starts or ends inside an oversized code block, the fence
to reopen before it (``fence_open``) and the fence to close after it (``fence_close``); see
:func:`ragrade.corpus.types.Chunk.display_text`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_HEADING_RE = re.compile(r"(#{1,6})[ \t]+(\S[^\n]*?)[ \t#]*")
_BLANK_RE = re.compile(r"\n[^\S\n]*\n\s*")

Unit = tuple[int, int, str]  # (start, end, kind): kind "code", "heading" or "text"


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: ``[start, end)`` from the opening fence to the end of the closing one."""

    start: int
    end: int
    opener: str  # the opening fence line, e.g. "```python"
    fence: str  # the fence characters, e.g. "```"
    closed: bool


@dataclass(frozen=True)
class Heading:
    """A ``#`` heading line outside code."""

    start: int
    end: int
    level: int
    title: str


@dataclass(frozen=True)
class Structure:
    """The code blocks and headings of one text, in order."""

    code: tuple[CodeBlock, ...]
    headings: tuple[Heading, ...]

    def code_inside(self, pos: int) -> CodeBlock | None:
        """The code block that ``pos`` falls strictly inside (after its start, before its end)."""
        i = bisect.bisect_left([c.start for c in self.code], pos) - 1
        if i >= 0 and self.code[i].start < pos < self.code[i].end:
            return self.code[i]
        return None

    def heading_path(self, pos: int) -> list[str]:
        """Titles of the headings enclosing position ``pos`` (a heading starting at ``pos`` included)."""
        stack: list[Heading] = []
        for h in self.headings:
            if h.start > pos:
                break
            while stack and stack[-1].level >= h.level:
                stack.pop()
            stack.append(h)
        return [h.title for h in stack]


@lru_cache(maxsize=16)
def parse_structure(text: str) -> Structure:
    """Find the fenced code blocks and headings of ``text`` (a fence closes with the same mark, as long)."""
    code: list[CodeBlock] = []
    headings: list[Heading] = []
    pos = 0
    open_at: tuple[int, str, str] | None = None
    for line in text.split("\n"):
        end = pos + len(line)
        m = _FENCE_RE.match(line)
        if open_at is None:
            if m:
                open_at = (pos, line.strip(), m.group(1))
            else:
                h = _HEADING_RE.fullmatch(line)
                if h:
                    headings.append(Heading(pos, end, len(h.group(1)), h.group(2).strip()))
        elif (
            m and m.group(1)[0] == open_at[2][0] and len(m.group(1)) >= len(open_at[2]) and not line[m.end() :].strip()
        ):
            code.append(CodeBlock(open_at[0], end, open_at[1], open_at[2], True))
            open_at = None
        pos = end + 1
    if open_at is not None:
        code.append(CodeBlock(open_at[0], len(text), open_at[1], open_at[2], False))
    return Structure(tuple(code), tuple(headings))


def is_heading(text: str, start: int, end: int) -> bool:
    """True when ``text[start:end]`` is one ``#`` heading line."""
    return "\n" not in text[start:end] and _HEADING_RE.fullmatch(text, start, end) is not None


def units(text: str, start: int, end: int, struct: Structure) -> list[Unit]:
    """Raw structural units of ``text[start:end]``: code blocks whole, heading lines, blank-line paragraphs.

    Edges are not trimmed or snapped; callers do that.
    """
    out: list[Unit] = []
    pos = start
    marks = [(c.start, c.end, "code") for c in struct.code] + [(h.start, h.end, "heading") for h in struct.headings]
    for s, e, kind in sorted(marks):
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        out.extend(_paragraphs(text, pos, s))
        out.append((s, e, kind))
        pos = e
    out.extend(_paragraphs(text, pos, end))
    return out


def _paragraphs(text: str, start: int, end: int) -> list[Unit]:
    if start >= end:
        return []
    cuts = [m.start() for m in _BLANK_RE.finditer(text, start, end) if start < m.start() < end]
    bounds = [start, *cuts, end]
    return [(a, b, "text") for a, b in itertools.pairwise(bounds)]


def heading_title(text: str) -> str:
    """The title the headings of a page's text give it ("" when none does).

    The first level-1 heading; else the first heading when it heads the whole page: no text before
    it and no later heading at its level or above (one of several ``##`` sections, or a section
    after the page's opening text, names a section, not the page).
    """
    headings = parse_structure(text).headings
    first_h1 = next((h.title for h in headings if h.level == 1), "")
    if first_h1 or not headings:
        return first_h1
    first = headings[0]
    if text[: first.start].strip() or any(h.level <= first.level for h in headings[1:]):
        return ""
    return first.title


def chunk_metadata(struct: Structure, start: int, end: int, title: str | None) -> dict[str, Any]:
    """Heading path and reopened/closed fences of the chunk ``[start, end)``."""
    path = struct.heading_path(start)
    if title and (not path or path[0] != title):
        path = [title, *path]
    meta: dict[str, Any] = {"heading_path": path}
    inside = struct.code_inside(start)
    if inside is not None:
        meta["fence_open"] = inside.opener
    leaving = struct.code_inside(end)
    if leaving is not None:
        meta["fence_close"] = leaving.fence
    return meta


__all__ = [
    "CodeBlock",
    "Heading",
    "Structure",
    "Unit",
    "chunk_metadata",
    "heading_title",
    "is_heading",
    "parse_structure",
    "units",
]
