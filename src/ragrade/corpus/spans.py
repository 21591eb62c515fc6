"""Span arithmetic shared by the chunkers: split into pieces, merge pieces up to a size.

A *piece* is a whitespace-trimmed ``(start, end)`` span of a document whose
edges fall between tokenizer words (see :mod:`ragrade.corpus.tokens`). A
*span* is a finished chunk: ``(start, end, tokens)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ragrade.corpus.segment import line_cuts, paragraph_cuts, sentence_cuts, spans_from_cuts, word_cuts
from ragrade.corpus.structure import Structure, is_heading, units
from ragrade.corpus.tokens import TokenIndex

Piece = tuple[int, int]
Span = tuple[int, int, int]
CutFn = Callable[[str, int, int], list[int]]

# the separator hierarchy, coarsest first; "token" splits between tokenizer words
LEVELS: tuple[str, ...] = ("paragraph", "line", "sentence", "word", "token")
_CUTS: dict[str, CutFn] = {
    "paragraph": paragraph_cuts,
    "line": line_cuts,
    "sentence": sentence_cuts,
    "word": word_cuts,
}


def pieces_at(index: TokenIndex, start: int, end: int, level: str) -> list[Piece]:
    """Split ``text[start:end]`` at the separators of ``level`` into safe, trimmed pieces."""
    text = index.text
    if level == "token":
        i, j = index.words_in(start, end)
        cuts = [int(c) for c in index.starts[i + 1 : j]]
        return spans_from_cuts(text, start, end, cuts)
    raw = _CUTS[level](text, start, end)
    if not raw:
        return spans_from_cuts(text, start, end, [])
    snapped = sorted({int(c) for c in index.snap(raw) if start < c < end})
    return spans_from_cuts(text, start, end, snapped)


def structural_pieces(index: TokenIndex, start: int, end: int, struct: Structure) -> list[tuple[int, int, str]]:
    """Trimmed structural units of ``[start, end)``: whole code blocks, heading lines, paragraphs."""
    out: list[tuple[int, int, str]] = []
    for s, e, kind in units(index.text, start, end, struct):
        for a, b in spans_from_cuts(index.text, s, e, []):
            out.append((a, b, kind))
    return out


def trimmed(text: str) -> Piece | None:
    """The whole text as one trimmed piece, or None when it is blank."""
    spans = spans_from_cuts(text, 0, len(text), [])
    return spans[0] if spans else None


def merge(pieces: Sequence[Piece], index: TokenIndex, size: int, overlap: int) -> list[Span]:
    """Pack consecutive pieces into spans of at most ``size`` tokens.

    Consecutive spans share trailing pieces of at most ``overlap`` tokens (only
    whole pieces, never more than fits, and never a whole previous span). A
    single piece larger than ``size`` becomes a span of its own. A span does not
    end on a heading line (unless it is the last piece): the heading starts the next span
    (without shared pieces when only shared pieces would come before it).
    """
    n = len(pieces)
    if n == 0:
        return []
    arr = np.asarray(pieces, dtype=np.int64)
    cum = index.cum
    cs = cum[np.searchsorted(index.starts, arr[:, 0], side="left")].tolist()
    ce = cum[np.searchsorted(index.starts, arr[:, 1], side="left")].tolist()
    text = index.text
    heads = [is_heading(text, s, e) for s, e in pieces]
    out: list[Span] = []
    i = 0
    last_j = -1
    while i < n:
        j = i
        while j + 1 < n and ce[j + 1] - cs[i] <= size:
            j += 1
        while heads[j] and i < j < n - 1 and j - 1 > last_j:  # a heading stays with the text it heads
            j -= 1
        if heads[j] and i <= last_j < j < n - 1:  # only shared pieces before the heading: it starts a span, unshared
            i = j
            while j + 1 < n and ce[j + 1] - cs[i] <= size:
                j += 1
            while heads[j] and i < j < n - 1:  # nor does this span end on a heading (i is past the shared pieces)
                j -= 1
        last_j = j
        out.append((pieces[i][0], pieces[j][1], ce[j] - cs[i]))
        if j == n - 1:
            break
        k = j + 1
        if overlap > 0:
            while k - 1 > i and ce[j] - cs[k - 1] <= overlap and ce[j + 1] - cs[k - 1] <= size:
                k -= 1
        i = k
    return out


def split_to_fit(index: TokenIndex, start: int, end: int, size: int, level: int) -> list[Piece]:
    """Pieces of ``[start, end)`` no larger than ``size``, splitting at ``LEVELS[level:]`` as needed.

    Pieces that cannot be split further (one tokenizer word) are returned as they are.
    """
    out: list[Piece] = []
    for s, e in pieces_at(index, start, end, LEVELS[level]):
        if index.count(s, e) <= size or level + 1 >= len(LEVELS):
            out.append((s, e))
        else:
            out.extend(split_to_fit(index, s, e, size, level + 1))
    return out


def recursive_spans(
    index: TokenIndex, start: int, end: int, size: int, overlap: int, level: int = 0, struct: Structure | None = None
) -> list[Span]:
    """Recursive character splitting: whole pieces of the coarsest separator that fit, merged.

    Pieces larger than ``size`` are split with the next separator of
    :data:`LEVELS`; merged spans never cross the edge of such an oversized piece.
    With ``struct``, the first level is structural (code blocks whole, headings
    apart, see :mod:`ragrade.corpus.structure`), so a code block that fits is
    never split and an oversized one is split at its lines. Headings just before
    an oversized piece are split together with it, so they stay with their text.
    """
    text = index.text
    if level == 0 and struct is not None:
        pieces = structural_pieces(index, start, end, struct)
    else:
        pieces = [(a, b, "text") for a, b in pieces_at(index, start, end, LEVELS[level])]
    out: list[Span] = []
    good: list[Piece] = []
    for s, e, kind in pieces:
        n = index.count(s, e)
        k = len(good)
        while k and is_heading(text, *good[k - 1]):
            k -= 1
        # text that fits, but not with the headings before it, is split with them (code that fits is not;
        # nor is a heading that follows headings: it heads nothing of theirs, and merge keeps it with its own text)
        last = level + 1 >= len(LEVELS)
        fits_after = k == len(good) or kind == "code" or last or is_heading(text, s, e)
        if n <= size and (fits_after or index.count(good[k][0], e) <= size):
            good.append((s, e))
            continue
        if n <= size and not fits_after:  # keep with the text the longest run of its headings that fits with it
            m = k
            while m < len(good) and index.count(good[m][0], e) > size:
                m += 1
            if m < len(good):  # the headings before it head empty sections: they end a span of their own
                out.extend(merge(good[:m], index, size, overlap))
                good = [*good[m:], (s, e)]
                continue
        if k < len(good):
            s = good[k][0]
            del good[k:]
        if good:
            out.extend(merge(good, index, size, overlap))
            good = []
        if not last:
            out.extend(recursive_spans(index, s, e, size, overlap, level + 1))
        else:
            out.append((s, e, index.count(s, e)))
    if good:
        out.extend(merge(good, index, size, overlap))
    return out


__all__ = [
    "LEVELS",
    "Piece",
    "Span",
    "merge",
    "pieces_at",
    "recursive_spans",
    "split_to_fit",
    "structural_pieces",
    "trimmed",
]
