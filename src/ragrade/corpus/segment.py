"""Rule-based, offline segmentation: paragraphs, lines, sentences, words.

Every function returns *cut positions*: character offsets where a span may be
split. Pieces between cuts are trimmed of whitespace by the chunkers, so the
whitespace around a cut belongs to no piece.

The sentence rules (no model, no data download):

* ``. ! ? …`` (and ``‼ ⁇ ⁈ ⁉``, Devanagari ``। ॥``, Arabic ``؟ ۔``, Armenian ``։``,
  Ethiopic ``።``) end a sentence when followed by whitespace or the end of
  the text, after any closing quotes or brackets;
* Chinese/Japanese ends ``。 ！ ？ ｡`` (and full-width ``！？`` runs) end a sentence
  whether or not a space follows, again after closing brackets such as ``」』）】``;
* a period does *not* end a sentence after a known abbreviation (``e.g.``,
  ``Dr.``, ``Fig.`` ...), after a single capital initial (``J. Smith``), or when
  the next word starts with a lower-case letter or a digit-less continuation
  such as ``,`` or ``;``;
* a blank line always ends a sentence, and so does a line break before a list
  item (``-``, ``*``, ``•``, ``1.``, ``a)``) or a ``>>>`` prompt.
"""

from __future__ import annotations

import itertools
import re

_CLOSERS = "\"'”’»)\\]}」』）】〉》〕｣"
_WESTERN_END = ".!?…‼⁇⁈⁉।॥؟۔։።"
_CJK_END = "。！？｡"
_WESTERN_RE = re.compile(f"[{re.escape(_WESTERN_END)}]+[{re.escape(_CLOSERS)}]*(?=\\s|$)")
_CJK_RE = re.compile(f"[{re.escape(_CJK_END)}][{re.escape(_CJK_END + '!?')}]*[{re.escape(_CLOSERS)}]*")
_PARAGRAPH_RE = re.compile(r"\n[^\S\n]*\n\s*")
_LINE_RE = re.compile(r"\n\s*")
_LIST_ITEM_RE = re.compile(r"\n[^\S\n]*(?=(?:[-*•‣◦▪–]|\d{1,3}[.)]|[a-zA-Z][.)]|>>>)\s)")
_WORD_GAP_RE = re.compile(r"\s+")

# lower-case words that a period does not end a sentence after
ABBREVIATIONS = frozenset(
    {
        "a.m",
        "al",
        "approx",
        "apr",
        "aug",
        "bzw",
        "ca",
        "capt",
        "cf",
        "co",
        "col",
        "corp",
        "dept",
        "dr",
        "e.g",
        "eds",
        "eq",
        "eqs",
        "esp",
        "et",
        "fig",
        "figs",
        "i.e",
        "inc",
        "jan",
        "jr",
        "jul",
        "jun",
        "lt",
        "ltd",
        "messrs",
        "mr",
        "mrs",
        "ms",
        "mt",
        "nov",
        "oct",
        "p.m",
        "pp",
        "prof",
        "ref",
        "refs",
        "resp",
        "rev",
        "sect",
        "sep",
        "sept",
        "sgt",
        "sr",
        "st",
        "univ",
        "usw",
        "vgl",
        "viz",
        "vol",
        "vols",
        "vs",
        "z.b",
    }
)


def _is_false_period(text: str, end: int, term_start: int) -> bool:
    """True when the period run ending the candidate at ``end`` is not a sentence end."""
    terminator = text[term_start:end].rstrip(_CLOSERS)
    if not terminator.endswith(".") or terminator.endswith(".."):
        return False  # !, ?, … and "..." are real ends unless continued in lower case (checked below)
    i = term_start
    while i > 0 and term_start - i < 40 and not text[i - 1].isspace():
        i -= 1
    word = text[i:term_start].lstrip(_CLOSERS + "([{").lower()
    # an abbreviation, or an initial such as "J. Smith"
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha() and text[term_start - 1].isupper())


def _continues_lower(text: str, end: int) -> bool:
    """True when the next non-space character after ``end`` is a lower-case letter or ``,;:``."""
    n = len(text)
    i = end
    while i < n and text[i].isspace():
        if text[i] == "\n" and i + 1 < n and text[i + 1] == "\n":
            return False  # a paragraph break always ends the sentence
        i += 1
    if i >= n:
        return False
    ch = text[i]
    return ch.islower() or ch in ",;:"


def sentence_cuts(text: str, start: int = 0, end: int | None = None) -> list[int]:
    """Cut positions between the sentences of ``text[start:end]`` (absolute offsets, sorted)."""
    end = len(text) if end is None else end
    cuts: set[int] = set()
    for m in _WESTERN_RE.finditer(text, start, end):
        pos = m.end()
        if pos >= end:
            continue
        if _is_false_period(text, pos, m.start()) or _continues_lower(text, pos):
            continue
        cuts.add(pos)
    for m in _CJK_RE.finditer(text, start, end):
        if m.end() < end:
            cuts.add(m.end())
    for m in _PARAGRAPH_RE.finditer(text, start, end):
        cuts.add(m.start())
    for m in _LIST_ITEM_RE.finditer(text, start, end):
        cuts.add(m.start())
    return sorted(c for c in cuts if start < c < end)


def paragraph_cuts(text: str, start: int = 0, end: int | None = None) -> list[int]:
    """Cut positions at blank lines."""
    end = len(text) if end is None else end
    return [m.start() for m in _PARAGRAPH_RE.finditer(text, start, end) if start < m.start() < end]


def line_cuts(text: str, start: int = 0, end: int | None = None) -> list[int]:
    """Cut positions at line breaks."""
    end = len(text) if end is None else end
    return [m.start() for m in _LINE_RE.finditer(text, start, end) if start < m.start() < end]


def word_cuts(text: str, start: int = 0, end: int | None = None) -> list[int]:
    """Cut positions at whitespace."""
    end = len(text) if end is None else end
    return [m.start() for m in _WORD_GAP_RE.finditer(text, start, end) if start < m.start() < end]


def spans_from_cuts(text: str, start: int, end: int, cuts: list[int]) -> list[tuple[int, int]]:
    """The whitespace-trimmed, non-empty pieces of ``text[start:end]`` between sorted ``cuts``."""
    out: list[tuple[int, int]] = []
    bounds = [start, *cuts, end]
    for a, b in itertools.pairwise(bounds):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b:
            out.append((a, b))
    return out


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans of ``text`` (whitespace-trimmed character offsets)."""
    return spans_from_cuts(text, 0, len(text), sentence_cuts(text))


__all__ = [
    "ABBREVIATIONS",
    "line_cuts",
    "paragraph_cuts",
    "sentence_cuts",
    "spans_from_cuts",
    "split_sentences",
    "word_cuts",
]
