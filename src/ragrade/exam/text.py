"""Small text utilities shared by the exam stage: tokens, n-grams, Jaccard, sentences, ids."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

_WORD_RE = re.compile(r"[A-Za-z0-9_]+(?:['’.][A-Za-z0-9_]+)*")
# a sentence ends at . ! ? (optionally followed by a closing quote or bracket) before whitespace and a capital,
# digit, quote or bracket; common abbreviations are protected below
_SENT_END_RE = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9`])")
_ABBREVIATIONS = (
    "e.g.",
    "i.e.",
    "etc.",
    "vs.",
    "cf.",
    "Mr.",
    "Mrs.",
    "Ms.",
    "Dr.",
    "Prof.",
    "Inc.",
    "Ltd.",
    "Co.",
    "Corp.",
    "No.",
    "Fig.",
    "Eq.",
    "approx.",
    "St.",
    "Jr.",
    "Sr.",
    "U.S.",
    "U.K.",
    "al.",
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (letters, digits, underscores; inner dots and apostrophes kept)."""
    return [w.lower() for w in _WORD_RE.findall(text)]


def ngrams(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The set of ``n``-grams of ``tokens``; a text shorter than ``n`` yields itself as one gram."""
    n = max(1, int(n))
    if not tokens:
        return set()
    if len(tokens) < n:
        return {tuple(tokens)}
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def jaccard(a: set[tuple[str, ...]] | set[str], b: set[tuple[str, ...]] | set[str]) -> float:
    """Jaccard similarity |a & b| / |a | b| of two sets (0.0 when both are empty)."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def ngram_jaccard(a: str, b: str, n: int) -> float:
    """Jaccard similarity of the word ``n``-gram sets of two texts."""
    return jaccard(ngrams(words(a), n), ngrams(words(b), n))


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text`` (whitespace-trimmed, non-empty).

    Line breaks that separate blocks (blank lines, list items) also end a sentence.
    """
    protected = text
    for abbr in _ABBREVIATIONS:
        protected = protected.replace(abbr, abbr.replace(".", "\x00"))
    spans: list[tuple[int, int]] = []
    # a single line break continues the sentence unless the line ends like a sentence or a signature (and the
    # next line does not start in lower case), or the next line starts a list item
    join = r"(?:(?<![.!?:;)])\n|\n(?=[ \t]*[a-z]))(?![ \t]*(?:\n|[-*•]|\d+[.)]\s))"
    for block in re.finditer(rf"[^\n]+(?:{join}[^\n]+)*", protected):
        b_start = block.start()
        pieces = _SENT_END_RE.split(block.group(0))
        cursor = 0
        body = block.group(0)
        for piece in pieces:
            idx = body.find(piece, cursor)
            if idx < 0:
                continue
            cursor = idx + len(piece)
            s, e = b_start + idx, b_start + idx + len(piece)
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            if e > s:
                spans.append((s, e))
    return spans


_FENCE_RE = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})")
_HEADING_RE = re.compile(r"[ \t]{0,3}#{1,6}(?:[ \t]|$)")
_UNDERLINE_RE = re.compile(r"[ \t]*(?:={2,}|-{2,})[ \t]*$")  # a setext heading's underline
# a table row: Markdown/grid pipes, a rule, or cells the loaders joined with " | "
_TABLE_RE = re.compile(r"[ \t]*(?:\||\+[-=+]{2,}|[-=:]{3,}[ \t]*(?:[|+ ][ \t]*[-=:]{3,}[ \t]*)+$)|.*\S \| \S")
_MARKER_RE = re.compile(r"[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+(?=\S)")


def prose_mask(text: str, *, in_code: bool = False) -> str:
    """``text`` with everything but prose turned into line breaks (same length, so offsets stay valid).

    Fenced code blocks (``in_code``: the text starts inside one, e.g. a chunk
    that continues a split code block), heading lines (``#`` or underlined),
    table rows and rules become blank lines; list markers become line breaks
    in front of the item's text. :func:`split_sentences` of the result gives
    spans of prose sentences only, as offsets into ``text``.
    """
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    fence = "```" if in_code else ""
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        m = _FENCE_RE.match(body)
        nxt = lines[i + 1].rstrip("\r\n") if i + 1 < len(lines) else ""
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not body[m.end() :].strip():
                fence = ""
            drop = len(body)
        elif m:
            fence, drop = m.group(1), len(body)
        elif (
            _HEADING_RE.match(body)
            or _TABLE_RE.match(body)
            or (body.strip() and _UNDERLINE_RE.match(nxt))
            or (_UNDERLINE_RE.match(body) and out and not out[-1].strip())
        ):
            drop = len(body)
        elif marker := _MARKER_RE.match(body):
            drop = marker.end()
        else:
            drop = 0
        out.append("\n" * drop + line[drop:])
    return "".join(out)


def stable_hash(*parts: str, length: int = 12) -> str:
    """A short hex digest of ``parts`` (stable across processes and platforms)."""
    h = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return h[:length]


def derived_seed(seed: int, *parts: str) -> int:
    """A 32-bit seed derived from ``seed`` and ``parts`` (independent of iteration order)."""
    return int(stable_hash(str(seed), *parts, length=8), 16)


def normalise_choice(text: str) -> str:
    """A comparison key for a candidate answer: case-folded, whitespace and end punctuation removed."""
    return re.sub(r"\s+", " ", text).strip().strip(".;,:").strip().casefold()


__all__ = [
    "derived_seed",
    "jaccard",
    "ngram_jaccard",
    "ngrams",
    "normalise_choice",
    "prose_mask",
    "split_sentences",
    "stable_hash",
    "words",
]
