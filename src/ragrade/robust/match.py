"""Answer matching for the robustness testbeds: normalised, boundary-aware, CJK-aware, numbers by value.

Both the response and each accepted alias are normalised the same way
(Unicode NFKC, case folding, dash and quote variants unified, whitespace
collapsed, spaces next to CJK characters removed, so that "1 月 3 日" equals
"1月3日"; a full-width comma separates like the ideographic one, so "8，9"
lists 8 and 9). Both are then read as a sequence of characters and numbers
(:func:`ragrade.robust.numerals.number_spans`): a number is a maximal run of
Arabic digits and Chinese numerals read as one value, so numbers compare by
value ("70" equals "七十" and "70.0", "3万" equals "30000", "1,600" equals
"1600") and never match part of a longer number ("70" is not in "170", "70.5"
or "1,600"; "十六" not in "三十六"; "2" not in "2万"; "六" not in "三点六";
"1月3日" not in "11月3日"). An alias matches only where it is not glued to a
neighbouring word: "Port Alder" is not in "Port Alderney", "70" is in "70%"
and "about 70." but not in "A70" or "3.70.1". CJK characters need no boundary
(Chinese has no spaces), and Chinese numeral characters inside names are
characters of the name ("木村隆二" is found in "木村隆二25日").

Which Chinese numerals are numbers is decided by
:func:`ragrade.robust.numerals.number_spans` (see :mod:`ragrade.robust.numerals`):
runs of two or more numerals always are ("十一月九" equals "11月9"); a
lone numeral is when it reads as one ("答案是十。", "答案是八和9。", "八强",
"三%"), not inside words ("统一", "一起", "一样" never contain "1"). An
alias matches the text when, reading both this way, each number of the
alias is a whole number of the text (same value, or same characters) and
each of its other characters is the same character of the text, also where
that character is part of a number of the text: "木村隆二" is found in
"木村隆二十五日被捕", where 二十五 reads as 25, because the name is literally
there. A number of the alias is never found inside a longer number of the
text, so "十六" is still not in "三十六" although it is a substring.

The original benchmark's scorer (``--scoring rgb``,
:mod:`ragrade.robust.rgb_scoring`) finds an answer only as a raw substring:
it finds "木村隆二" and "十六" in "三十六" alike, and never finds "10" in
"答案是十。" or "8强" in "八强". We read numbers by value because a model
that answers in Chinese numerals is right, and keep the literal match for
characters that are not numbers of the alias so that reading a number never
loses a name that is there.

:func:`find_spans` and :func:`replace_all` (used to rewrite documents) work on
the raw text, character by character, with Chinese numerals counted as digits.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from ragrade.robust.numerals import number_spans

# code-point ranges treated as CJK (ideographs, kana, hangul, CJK punctuation)
_CJK_RANGES = (
    (0x2E80, 0x2FDF),
    (0x3000, 0x303F),
    (0x3040, 0x30FF),
    (0x3100, 0x312F),
    (0x3190, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)
_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" if hi <= 0xFFFF else "" for lo, hi in _CJK_RANGES) + "\U00020000-\U0002fa1f"
_SPACE_NEAR_CJK = re.compile(f"(?<=[{_CJK_CLASS}]) | (?=[{_CJK_CLASS}])")
_WS = re.compile(r"\s+")
# Chinese numerals (everyday and formal forms) that continue a number like a digit does
_CN_DIGITS = frozenset("〇零一二两三四五六七八九十百千万亿壹贰叁肆伍陆柒捌玖拾佰仟萬億")
_TRANSLATE = {
    **dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-"),
    ord("\u2018"): "'",
    ord("\u2019"): "'",
    ord("\u201a"): "'",
    ord("\u201b"): "'",
    ord("\u201c"): '"',
    ord("\u201d"): '"',
    ord("\u201e"): '"',
}
_FULLWIDTH_COMMA = {0xFF0C: "\u3001", 0xFE50: "\u3001"}  # NFKC would make them ASCII commas (thousands marks)


def is_cjk(ch: str) -> bool:
    """True when ``ch`` is a CJK ideograph, kana, hangul or CJK punctuation character."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def has_cjk(text: str) -> bool:
    """True when ``text`` contains at least one CJK character."""
    return any(is_cjk(ch) for ch in text)


def normalise(text: str) -> str:
    """The comparison form of ``text``: NFKC, case-folded, unified dashes/quotes, CJK-aware whitespace."""
    t = unicodedata.normalize("NFKC", text.translate(_FULLWIDTH_COMMA)).casefold().translate(_TRANSLATE)
    t = _WS.sub(" ", t).strip()
    return _SPACE_NEAR_CJK.sub("", t)


def _is_word(ch: str) -> bool:
    return ch.isalnum() and not is_cjk(ch)


def _is_digit(ch: str) -> bool:
    """Arabic (also full-width) digits and Chinese numerals: characters that continue a number."""
    return ch.isdigit() or ch in _CN_DIGITS


def _is_mark(ch: str) -> bool:
    """A decimal or thousands mark inside a number ("16.4", "1,070", "三点六")."""
    return ch in ".,点"


def _left_ok(text: str, i: int, first: str) -> bool:
    if i == 0:
        return True
    before = text[i - 1]
    if (_is_word(first) and _is_word(before)) or (_is_digit(first) and _is_digit(before)):
        return False
    # "16.4" or "1,070" must not yield "4" / "070": a digit after a decimal or thousands mark
    return not (_is_digit(first) and _is_mark(before) and i >= 2 and _is_digit(text[i - 2]))


def _right_ok(text: str, j: int, last: str) -> bool:
    if j >= len(text):
        return True
    after = text[j]
    if (_is_word(last) and _is_word(after)) or (_is_digit(last) and _is_digit(after)):
        return False
    return not (_is_digit(last) and _is_mark(after) and j + 1 < len(text) and _is_digit(text[j + 1]))


class _Atom(NamedTuple):
    """One character, or one whole number with its value."""

    start: int
    end: int
    text: str
    value: Fraction | None


@lru_cache(maxsize=1024)
def _atoms(text: str) -> tuple[_Atom, ...]:
    out: list[_Atom] = []
    pos = 0
    for start, end, value in number_spans(text):
        out.extend(_Atom(k, k + 1, text[k], None) for k in range(pos, start))
        out.append(_Atom(start, end, text[start:end], value))
        pos = end
    out.extend(_Atom(k, k + 1, text[k], None) for k in range(pos, len(text)))
    return tuple(out)


def _same(a: _Atom, b: _Atom) -> bool:
    return a.text == b.text or (a.value is not None and b.value is not None and a.value == b.value)


def _arabic(ch: str) -> bool:
    return "0" <= ch <= "9"


def _bounded(text: str, start: int, end: int) -> bool:
    """No word glued on either side of ``text[start:end]``, and no decimal point leading into a digit."""
    if start > 0:
        before, first = text[start - 1], text[start]
        if _is_word(first) and _is_word(before):
            return False
        if _arabic(first) and before == "." and start >= 2 and _arabic(text[start - 2]):
            return False
    if end < len(text):
        last, after = text[end - 1], text[end]
        if _is_word(last) and _is_word(after):
            return False
        if _arabic(last) and after == "." and end + 1 < len(text) and _arabic(text[end + 1]):
            return False
    return True


@lru_cache(maxsize=1024)
def _number_starts(text: str) -> dict[int, _Atom]:
    """The number atoms of ``text`` by start offset."""
    return {a.start: a for a in _atoms(text) if a.value is not None}


def _match_at(text: str, needle: tuple[_Atom, ...], start: int) -> int | None:
    """End offset of ``needle`` read from ``text[start:]``, or None: each number of the needle is a whole
    number of the text (same characters or same value), each other character the same character."""
    numbers = _number_starts(text)
    pos = start
    for atom in needle:
        if atom.value is None:
            if not text.startswith(atom.text, pos):
                return None
            pos += len(atom.text)
        else:
            hit = numbers.get(pos)
            if hit is None or not _same(hit, atom):
                return None
            pos = hit.end
    return pos


def _find_all(text: str, sub: str) -> list[int]:
    """Every offset where ``sub`` starts in ``text`` (overlapping)."""
    out: list[int] = []
    k = text.find(sub)
    while k != -1:
        out.append(k)
        k = text.find(sub, k + 1)
    return out


def contains_normalised(text: str, alias: str) -> bool:
    """Whether normalised ``alias`` occurs in normalised ``text`` at a boundary, numbers compared by value.

    The numbers of the alias must be whole numbers of the text; its other characters are matched
    character by character, also inside a number of the text ("木村隆二" in "木村隆二十五日").
    """
    if not alias:
        return False
    needle = _atoms(alias)
    if alias not in text and all(a.value is None for a in needle):  # characters only: a substring or nothing
        return False
    first = needle[0]
    starts = sorted(_number_starts(text)) if first.value is not None else _find_all(text, first.text)
    for start in starts:
        end = _match_at(text, needle, start)
        if end is not None and _bounded(text, start, end):
            return True
    return False


def same_text(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` say the same after normalisation, numbers compared by value ("70" and "七十")."""
    x, y = _atoms(normalise(a)), _atoms(normalise(b))
    return len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y, strict=True))


def contains(text: str, alias: str) -> bool:
    """Whether ``alias`` occurs in ``text`` after normalisation, at a boundary (see the module docstring)."""
    return contains_normalised(normalise(text), normalise(alias))


def match_parts(response: str, answer: Sequence[Sequence[str]]) -> list[bool]:
    """One flag per answer part: True when any alias of that part occurs in ``response``."""
    norm = normalise(response)
    return [any(contains_normalised(norm, normalise(a)) for a in aliases) for aliases in answer]


def find_spans(text: str, alias: str) -> list[tuple[int, int]]:
    """Boundary-respecting occurrences of ``alias`` in the raw ``text`` (case-insensitive, exact characters).

    Used to rewrite documents (counterfactual corruption), so offsets refer to
    ``text`` itself; only case is folded, nothing else is normalised.
    """
    if not alias:
        return []
    low, needle = text.lower(), alias.lower()
    if len(low) != len(text) or len(needle) != len(alias):  # case folding changed lengths: fall back
        low, needle = text, alias
    spans: list[tuple[int, int]] = []
    start = low.find(needle)
    while start != -1:
        end = start + len(needle)
        if _left_ok(low, start, needle[0]) and _right_ok(low, end, needle[-1]):
            spans.append((start, end))
            start = low.find(needle, end)
        else:
            start = low.find(needle, start + 1)
    return spans


def replace_all(text: str, alias: str, replacement: str) -> tuple[str, int]:
    """``text`` with every boundary-respecting occurrence of ``alias`` replaced; returns (new text, count)."""
    spans = find_spans(text, alias)
    if not spans:
        return text, 0
    out, pos = [], 0
    for s, e in spans:
        out.append(text[pos:s])
        out.append(replacement)
        pos = e
    out.append(text[pos:])
    return "".join(out), len(spans)


__all__ = [
    "contains",
    "contains_normalised",
    "find_spans",
    "has_cjk",
    "is_cjk",
    "match_parts",
    "normalise",
    "replace_all",
    "same_text",
]
