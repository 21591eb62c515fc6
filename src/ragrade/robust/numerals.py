"""Numbers written with Chinese numerals, Arabic digits or both, read as exact values.

:func:`parse_number` reads one number: ``"70"``, ``"1,600"``, ``"16.4"``,
``"七十"``, ``"二十五"``, ``"两千零五"``, ``"一百零一"``, ``"十五"``, ``"3万"``,
``"1.5亿"``, ``"12万3千"``, ``"三千万"``, ``"一万亿"``, ``"三点六"``, the
digit-by-digit form ``"二〇二三"``, the colloquial shortening ``"两千五"``
(2500) and ``"一万五"`` (15000), and the formal characters (壹贰叁..., 拾佰仟).
It returns a :class:`fractions.Fraction` (exact: ``"0.1"`` is 1/10), or None
for anything that is not one well-formed number (``"十十"``, ``"万"``,
``"二25"``, ``"8,9"``).

:func:`number_spans` finds the numbers in a text (already normalised by
:func:`ragrade.robust.match.normalise`): maximal runs of digits and numerals,
each read as one value, so that ``"三十六"`` yields 36 and never 16, and
``"2万"`` yields 20000 and never 2. A run that is not one number is split
into pieces that are (``"隆二25日"``: 2 and 25). A run of two or more
numerals is always a number (``"十一月"``, ``"二十五日"``).

A lone numeral character is the hard case: 一 is a number in "答案是一。" and
a plain character in 一起, 一样, 统一. It counts as a number when

- a measure word, unit or rank follows it (``"五次"``, ``"两个"``, ``"八强"``),
  or 第, 初 or 周 comes before it (``"第一"``, ``"初五"``, ``"周三"``); or
- both of its sides are free. The left side is free at the start of the
  text, after anything that is not an ideograph (a digit, punctuation, a
  colon: ``"答案：五。"``), after the copulas 是/为/為 (``"答案是十。"``),
  after a conjunction 和/与/與/及/或 (``"八和九"``), or after a date
  character 年/月/日/号/號 (``"十一月九"``). The right side is free at the
  end of the text, before anything that is not an ideograph (punctuation,
  a digit, ``%``: ``"三%"``), or before a conjunction (``"答案是八和9。"``).

So a numeral glued to an ordinary word stays a character: 一起, 一样, 统一,
四川, 一些, 十分 (before 分, which also means "very") and 一点 ("a little")
are not numbers. The one known false reading is an idiom such as 合二为一,
whose last 一 stands after 为 at a sentence end and so reads as 1.
"""

from __future__ import annotations

import re
from fractions import Fraction

DIGITS: dict[str, int] = {
    **dict.fromkeys("零〇", 0),
    **dict.fromkeys("一壹", 1),
    **dict.fromkeys("二两贰貳兩", 2),
    **dict.fromkeys("三叁參", 3),
    **dict.fromkeys("四肆", 4),
    **dict.fromkeys("五伍", 5),
    **dict.fromkeys("六陆陸", 6),
    **dict.fromkeys("七柒", 7),
    **dict.fromkeys("八捌", 8),
    **dict.fromkeys("九玖", 9),
}
SMALL_UNITS: dict[str, int] = {**dict.fromkeys("十拾", 10), **dict.fromkeys("百佰", 100), **dict.fromkeys("千仟", 1000)}
BIG_UNITS: dict[str, int] = {**dict.fromkeys("万萬", 10**4), **dict.fromkeys("亿億", 10**8)}
UNITS = {**SMALL_UNITS, **BIG_UNITS}
NUMERAL_CHARS = frozenset(DIGITS) | frozenset(UNITS)
POINTS = frozenset("点點")
# characters before which a lone numeral reads as a number: measure words, units of time, money, size, rank
MEASURE_CHARS = frozenset(
    "个個次名位年岁歲届屆人件项項条條种種场場枚座家本部号號倍天月日周週秒元块塊米克吨噸公升强強"
    "层層期轮輪章节節集页頁张張辆輛架艘颗顆首篇句队隊所间間台臺串对對只隻栋棟回遍例"
)
ORDINAL_CHARS = frozenset("第初周週")  # after these a lone numeral is an ordinal, a day or a weekday
# after these a lone numeral may be a number (if its right side is free too): copulas, conjunctions, dates
LEFT_FREE_CHARS = frozenset("是为為和与與及或年月日号號")
RIGHT_FREE_CHARS = frozenset("和与與及或")  # before these, likewise (if its left side is free too)
_ARABIC = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_ARABIC_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")
_ARABIC_PIECE = re.compile(r"[0-9]+(?:[.,][0-9]+)*")


def _arabic(text: str) -> Fraction | None:
    """Plain (``1600``, ``16.4``) or comma-grouped (``1,600``) Arabic numbers; None otherwise."""
    if _ARABIC.fullmatch(text):
        return Fraction(text)
    if _ARABIC_GROUPED.fullmatch(text):
        return Fraction(text.replace(",", ""))
    return None


def _positional(text: str) -> Fraction | None:
    """Numerals read digit by digit (``二〇二三`` 2023), with an optional point (``三点六`` 3.6)."""
    head, sep, tail = text.partition("点") if "点" in text else text.partition("點")
    if not head or (sep and not tail) or any(c not in DIGITS for c in head + tail):
        return None
    value = Fraction(int("".join(str(DIGITS[c]) for c in head)))
    if tail:
        value += Fraction(int("".join(str(DIGITS[c]) for c in tail)), 10 ** len(tail))
    return value


def _tokens(text: str) -> list[tuple[str, Fraction | int]] | None:
    """A section as tokens: ('d', value) digit or Arabic number, ('z', 0) zero, ('u', unit)."""
    out: list[tuple[str, Fraction | int]] = []
    i = 0
    while i < len(text):
        m = _ARABIC.match(text, i)
        if m:
            out.append(("a", Fraction(m.group())))
            i = m.end()
            continue
        ch = text[i]
        if ch in "零〇":
            out.append(("z", 0))
        elif ch in DIGITS:
            out.append(("d", DIGITS[ch]))
        elif ch in SMALL_UNITS:
            out.append(("u", SMALL_UNITS[ch]))
        else:
            return None
        i += 1
    return out


def _section(text: str) -> Fraction | None:
    """A number below 10,000 written with 千, 百, 十 (``两千零五``, ``二十五``, ``十五``, ``两千五``)."""
    toks = _tokens(text)
    if not toks:
        return None
    total = Fraction(0)
    pending: Fraction | None = None
    pending_kind = ""
    last_unit = 10**4
    zero = False
    for pos, (kind, value) in enumerate(toks):
        if kind in ("d", "a"):
            if pending is not None:
                return None  # two digits in a row
            pending, pending_kind = Fraction(value), kind
        elif kind == "z":
            if pending is not None or last_unit == 10**4:
                return None
            zero = True
        else:
            if value >= last_unit:
                return None  # units must decrease: 十百 is not a number
            if pending is None:
                if not (value == 10 and pos == 0):
                    return None  # only 十 may stand without a digit, and only first (十五)
                pending = Fraction(1)
            total += pending * value
            last_unit, pending, zero = int(value), None, False
    if pending is None:
        return None if zero else total
    if last_unit == 10**4 or zero or last_unit == 10:
        return total + pending if last_unit == 10**4 or pending < last_unit else None
    if pending_kind == "d":  # 两千五: the digit counts in the next unit down
        return total + pending * (last_unit // 10)
    return None


def parse_number(text: str) -> Fraction | None:
    """The exact value of one number in Arabic digits, Chinese numerals or both (see the module docstring)."""
    if not text:
        return None
    plain = _arabic(text)
    if plain is not None:
        return plain
    if not any(c in UNITS for c in text):
        return _positional(text)
    for unit_char in ("亿億", "万萬"):
        cut = max(text.rfind(c) for c in unit_char)
        if cut < 0:
            continue
        unit = BIG_UNITS[text[cut]]
        left = parse_number(text[:cut])
        if left is None:
            return None
        right = _after_big_unit(text[cut + 1 :], unit)
        return None if right is None else left * unit + right
    point = next((k for k, c in enumerate(text) if c in POINTS), -1)
    if point < 0:
        return _section(text)
    head, tail = _section(text[:point]), text[point + 1 :]  # 十五点五: a section, then digits
    if head is None or not tail or any(c not in DIGITS for c in tail):
        return None
    return head + Fraction(int("".join(str(DIGITS[c]) for c in tail)), 10 ** len(tail))


def _after_big_unit(rest: str, unit: int) -> Fraction | None:
    """What follows 万 or 亿: nothing, a zero and a smaller number, one digit (一万五), or a smaller number."""
    if not rest:
        return Fraction(0)
    if len(rest) == 1 and rest in DIGITS and rest not in "零〇":
        return Fraction(DIGITS[rest] * unit // 10)
    stripped = rest.lstrip("零〇")
    value = parse_number(stripped) if stripped else None
    if value is None or value >= unit:
        return None
    return value


def _is_arabic(ch: str) -> bool:
    return "0" <= ch <= "9"


def _run_end(text: str, i: int) -> int:
    """End of the maximal run of digits, numerals and inner points/marks starting at ``i``."""
    j = i
    while j < len(text):
        ch = text[j]
        nxt = text[j + 1] if j + 1 < len(text) else ""
        inner_mark = ch in ".," and j > i and _is_arabic(text[j - 1]) and _is_arabic(nxt)
        inner_point = ch in POINTS and j > i and (nxt in DIGITS or _is_arabic(nxt))
        if not (_is_arabic(ch) or ch in NUMERAL_CHARS or inner_mark or inner_point):
            break
        j += 1
    return j


def _ideograph(ch: str) -> bool:
    return "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def _lone_ok(text: str, start: int, end: int) -> bool:
    """Whether a one-character numeral reads as a number (see the module docstring): before a measure
    word (五次, 八强), after 第/初/周 (第一, 初五, 周三), or with both sides free ("答案是十。", "八和9")."""
    after = text[end] if end < len(text) else ""
    before = text[start - 1] if start > 0 else ""
    if after in MEASURE_CHARS or before in ORDINAL_CHARS:
        return True
    left_free = not _ideograph(before) or before in LEFT_FREE_CHARS
    right_free = not _ideograph(after) or after in RIGHT_FREE_CHARS
    return left_free and right_free


def _pieces(text: str, start: int, end: int) -> list[tuple[int, int, Fraction]]:
    """Numbers inside a run that is not one number: Arabic pieces (with trailing units) and numeral pieces."""
    out: list[tuple[int, int, Fraction]] = []
    i = start
    while i < end:
        if _is_arabic(text[i]):
            m = _ARABIC_PIECE.match(text, i, end)
            assert m is not None
            j = m.end()
            while j < end and text[j] in UNITS:
                j += 1
            value = parse_number(text[i:j])
            if value is None:  # "8,9" or "3.6.1": each digit group is a number, the marks are characters
                out.extend((i + g.start(), i + g.end(), Fraction(g.group())) for g in re.finditer(r"[0-9]+", text[i:j]))
            else:
                out.append((i, j, value))
            i = j
        else:
            j = i
            while j < end and not _is_arabic(text[j]):
                j += 1
            value = parse_number(text[i:j])
            if value is not None and (j - i > 1 or _lone_ok(text, i, j)):
                out.append((i, j, value))
            i = j
    return out


def number_spans(text: str) -> list[tuple[int, int, Fraction]]:
    """``(start, end, value)`` of every number in ``text``, left to right (see the module docstring).

    Arabic integers with a leading zero (``007``) are left out: they are codes more often than amounts.
    """
    out: list[tuple[int, int, Fraction]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if not (_is_arabic(ch) or ch in NUMERAL_CHARS):
            i += 1
            continue
        end = _run_end(text, i)
        value = parse_number(text[i:end])
        if value is not None:
            if end - i > 1 or _is_arabic(ch) or _lone_ok(text, i, end):
                out.append((i, end, value))
        else:
            out.extend(_pieces(text, i, end))
        i = end
    return [s for s in out if not _leading_zero(text[s[0] : s[1]])]


def _leading_zero(token: str) -> bool:
    return len(token) > 1 and token[0] == "0" and token[1].isdigit()


__all__ = ["DIGITS", "MEASURE_CHARS", "NUMERAL_CHARS", "number_spans", "parse_number"]
