"""A tolerant parser for judge verdicts.

Judges are asked for JSON, but real models (and servers without structured
output) answer in many shapes: fenced JSON, ``Score: 4/5``, ``4 out of 5``,
``**Verdict: YES**``, a bare number on the first line, ... This module reads
what it can and says ``unparsed`` for everything else. It never guesses a
number from text it does not understand: an unparsed verdict stays unparsed,
with its raw text kept by the caller.

Rules are tried from the most to the least explicit (JSON, then labelled
values, then a bare leading value). Within one rule, several candidates that
disagree make the verdict unparsed ("conflicting") rather than picking one.

Before any rule, a reply that was cut off or that repeats the prompt's
placeholders (``"reason": "<one short sentence>"``) is unparsed, by the one
rule every reader of generated replies shares
(:func:`ragrade.llm.replies.reply_problem`). A reason is the model's own
words: a JSON ``reason`` field, or the lines after the verdict without JSON
syntax, other fields or a ``Reason:`` label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from ragrade.io import JSONObject
from ragrade.llm.replies import reply_problem

Status = Literal["ok", "unparsed"]

_SCORE_KEYS = ("score", "rating", "grade", "correctness", "value", "mark")
_VERDICT_KEYS = (
    "verdict",
    "answer",
    "decision",
    "judgement",
    "judgment",
    "result",
    "label",
    "supported",
    "faithful",
    "relevant",
    "passing",
    "pass",
)
_REASON_KEYS = ("reason", "reasoning", "explanation", "rationale", "justification", "feedback")

_YES = {"yes", "y", "true", "supported", "pass", "passed", "faithful", "relevant", "correct", "1"}
_NO = {
    "no",
    "n",
    "false",
    "unsupported",
    "not supported",
    "fail",
    "failed",
    "unfaithful",
    "not relevant",
    "irrelevant",
    "incorrect",
    "0",
}

_NUM = r"([+-]?\d+(?:\.\d+)?)"
_FRACTION = re.compile(_NUM + r"\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
_LABELLED_SCORE = re.compile(
    r"\b(?:score|rating|grade|correctness|overall)\b[^\n\d]{0,20}?(?<![-+\d])(\d+(?:\.\d+)?)", re.IGNORECASE
)
_LEADING_NUMBER = re.compile(r"^\s*" + _NUM + r"\s*(?:[.)\]:,-]\s*)?(?:\n|$)")
_VERDICT_WORDS = (
    r"(not\s+supported|not\s+relevant|yes|no|true|false|supported|unsupported|pass|fail|irrelevant|relevant)"
)
_LABELLED_VERDICT = re.compile(
    r"\b(?:verdict|answer|decision|judge?ment|result|final\s+answer|label|conclusion)\b[\"']?\s*[:=\-]?\s*[*_`\"']*\s*"
    + _VERDICT_WORDS
    + r"\b",
    re.IGNORECASE,
)
_LEADING_VERDICT = re.compile(r"^[\s*_#>`\"'\[(]*" + _VERDICT_WORDS + r"\b", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_FIELD_LINE = re.compile(r"^[*_]*\"?([A-Za-z_ ]{1,30}?)\"?[*_]*\s*:\s*(.*?)\s*,?$")  # "key": value / Reason: text


@dataclass(frozen=True)
class Parsed:
    """The outcome of parsing one judge output.

    ``value`` is set only when ``status == "ok"``. ``method`` names the rule
    that matched (``json``, ``fraction``, ``label``, ``leading``); ``note``
    explains an ``unparsed`` outcome.
    """

    status: Status
    value: float | None = None
    reason: str | None = None
    method: str | None = None
    note: str | None = None


def json_objects(text: str) -> Iterator[JSONObject]:
    """JSON objects found in ``text``: fenced blocks first, then the whole text, then embedded ``{...}``."""
    seen: list[str] = []
    for block in _FENCE.findall(text):
        seen.append(block.strip())
    seen.append(text.strip())
    decoder = json.JSONDecoder()
    for cand in seen:
        try:
            obj = json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            obj = None
        if isinstance(obj, dict):
            yield obj
            return
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            obj, _ = decoder.raw_decode(text[start:])
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(obj, dict):
            yield obj
            return


def _lower_keys(obj: JSONObject) -> JSONObject:
    return {str(k).lower().strip(): v for k, v in obj.items()}


def _json_reason(obj: JSONObject) -> str | None:
    low = _lower_keys(obj)
    for key in _REASON_KEYS:
        if isinstance(low.get(key), str):
            return str(low[key])
    return None


def _to_number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        frac = _FRACTION.search(value)
        if frac and float(frac.group(2)) != 0:
            return float(frac.group(1)) if float(frac.group(2)) == 5 else None
        m = re.fullmatch(r"\s*" + _NUM + r"\s*", value)
        if m:
            return float(m.group(1))
    return None


def to_verdict(value: object) -> float | None:
    """A yes/no verdict as 1.0/0.0 (a bool, 0/1, or a word such as yes, no, true, false); None otherwise."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return float(value)
    if isinstance(value, str):
        word = " ".join(value.strip().strip("*_`\"'.!").lower().split())
        if word in _YES:
            return 1.0
        if word in _NO:
            return 0.0
    return None


def _unique(values: list[float], method: str, reason: str | None) -> Parsed | None:
    if not values:
        return None
    if len(set(values)) > 1:
        return Parsed("unparsed", method=method, note=f"conflicting values {sorted(set(values))}")
    return Parsed("ok", value=values[0], reason=reason, method=method)


def _in_range(parsed: Parsed, low: float, high: float) -> Parsed:
    if parsed.status == "ok" and parsed.value is not None and not low <= parsed.value <= high:
        return Parsed("unparsed", method=parsed.method, note=f"value {parsed.value:g} outside [{low:g}, {high:g}]")
    return parsed


def _text_reason(text: str) -> str | None:
    """The lines after the verdict, as the model's words: no JSON syntax, no other fields, no ``Reason:`` label."""
    kept: list[str] = []
    for line in [ln.strip() for ln in text.strip().splitlines() if ln.strip()][1:]:
        if line.startswith("```") or not line.strip("{}[],` "):
            continue
        field = _FIELD_LINE.match(line)
        if field:
            key = field.group(1).strip().lower()
            if key in _SCORE_KEYS or key in _VERDICT_KEYS:
                continue
            if key in _REASON_KEYS:
                line = field.group(2).strip().strip('"').strip()
        if line:
            kept.append(line)
    return "\n".join(kept) or None


def _parse_json(text: str, keys: tuple[str, ...], convert: Callable[[object], float | None]) -> Parsed | None:
    for obj in json_objects(text):
        low = _lower_keys(obj)
        for key in keys:
            if key in low:
                value = convert(low[key])
                if value is None:
                    return Parsed("unparsed", method="json", note=f"JSON field '{key}' holds {low[key]!r}")
                return Parsed("ok", value=value, reason=_json_reason(obj), method="json")
    return None


def _unusable(text: str, finish_reason: str | None, template: str | None) -> Parsed | None:
    """Unparsed when the reply was cut off or repeats the prompt's placeholders (None when it can be read)."""
    problem = reply_problem(text, finish_reason, template)
    return None if problem is None else Parsed("unparsed", note=problem.note)


def parse_score(
    text: str | None,
    low: float = 1.0,
    high: float = 5.0,
    *,
    finish_reason: str | None = None,
    template: str | None = None,
) -> Parsed:
    """Parse a numeric score in ``[low, high]`` (default a 1-5 scale) from a judge's output.

    ``finish_reason`` and ``template`` (the prompt before filling) serve the shared reply rule (module docstring).
    """
    if text is None or not text.strip():
        return Parsed("unparsed", note="empty output")
    if (bad := _unusable(text, finish_reason, template)) is not None:
        return bad
    got = _parse_json(text, _SCORE_KEYS, _to_number)
    if got is not None:
        return _in_range(got, low, high)
    stripped = text.replace("*", "").replace("`", "")
    fractions = [(float(a), float(b)) for a, b in _FRACTION.findall(stripped)]
    if fractions:
        if any(b != high for _, b in fractions):
            return Parsed(
                "unparsed",
                method="fraction",
                note=f"score on another scale ({', '.join(f'{a:g}/{b:g}' for a, b in fractions)})",
            )
        got = _unique([a for a, _ in fractions], "fraction", _text_reason(text))
        if got is not None:
            return _in_range(got, low, high)
    labelled = [float(v) for v in _LABELLED_SCORE.findall(stripped)]
    got = _unique(labelled, "label", _text_reason(text))
    if got is not None:
        return _in_range(got, low, high)
    lead = _LEADING_NUMBER.match(stripped)
    if lead:
        return _in_range(
            Parsed("ok", value=float(lead.group(1)), reason=_text_reason(text), method="leading"), low, high
        )
    return Parsed("unparsed", note="no score found")


def parse_verdict(text: str | None, *, finish_reason: str | None = None, template: str | None = None) -> Parsed:
    """Parse a binary verdict (1.0 = yes/supported, 0.0 = no) from a judge's output (arguments: :func:`parse_score`)."""
    if text is None or not text.strip():
        return Parsed("unparsed", note="empty output")
    if (bad := _unusable(text, finish_reason, template)) is not None:
        return bad
    got = _parse_json(text, _VERDICT_KEYS + _SCORE_KEYS, to_verdict)
    if got is not None:
        return got
    stripped = text.replace("*", "").replace("`", "")
    labelled = [to_verdict(w) for w in _LABELLED_VERDICT.findall(stripped)]
    got = _unique([v for v in labelled if v is not None], "label", _text_reason(text))
    if got is not None:
        return got
    lead = _LEADING_VERDICT.match(stripped)
    if lead:
        value = to_verdict(lead.group(1))
        if value is not None:
            return Parsed("ok", value=value, reason=_text_reason(text), method="leading")
    last = stripped.strip().splitlines()[-1] if stripped.strip() else ""
    value = to_verdict(last)
    if value is not None:
        return Parsed("ok", value=value, reason=None, method="trailing")
    return Parsed("unparsed", note="no yes/no verdict found")


__all__ = ["Parsed", "json_objects", "parse_score", "parse_verdict", "to_verdict"]
