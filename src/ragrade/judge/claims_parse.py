"""Tolerant parsing of claim lists and verdict lists from LLM replies.

Accepted shapes, most explicit first: a JSON object (fenced or bare, or the
first one embedded in prose) with a ``claims`` / ``verdicts`` list; a bare JSON
list; then plain text, a bulleted or numbered list of claims, or numbered
verdict lines (``1. yes``, ``Claim 2: no``). Verdict entries may be strings,
booleans, 0/1 or objects with a ``verdict`` (or ``supported``, ``label``, ...)
field and an optional 1-based ``claim`` / ``index`` / ``id``. One entry that
cannot be read makes that claim's verdict None (unparsed, counted), never a
guess; a list whose length does not match the claims makes every verdict of
the reply unparsed. A reply cut off or repeating the prompt's placeholders
(``["<claim>"]``, ``"yes" or "no"``) is unparsed, by the rule every reader of
generated replies shares (:func:`ragrade.llm.replies.reply_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ragrade.judge.parse import to_verdict
from ragrade.llm.replies import reply_problem

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_CLAIM_KEYS = ("claims", "facts", "statements", "atomic_claims")
_VERDICT_LIST_KEYS = ("verdicts", "results", "labels", "answers", "judgements", "judgments", "entailment")
_ENTRY_VALUE_KEYS = ("verdict", "supported", "entailed", "label", "answer", "result", "value")
_ENTRY_INDEX_KEYS = ("claim", "index", "id", "number", "n")
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\(?\d+[.):])\s+(.*\S)\s*$")
_NUMBERED_VERDICT = re.compile(
    r"^\s*(?:claim\s*)?#?(\d+)\s*[.):\-]?\s*[*_`\"']*\s*(yes|no|true|false|supported|not supported|unsupported)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ParsedList:
    """``status`` ok/unparsed; ``items`` the claims (str) or verdicts (1.0/0.0/None) when ok."""

    status: str
    items: list[Any] | None = None
    note: str | None = None


def _json_values(text: str) -> Iterator[object]:
    """JSON values found in ``text``: fenced blocks, the whole text, then the first embedded object or list."""
    for cand in [*(_FENCE.findall(text)), text]:
        try:
            yield json.loads(cand.strip())
            return
        except (json.JSONDecodeError, ValueError):
            continue
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            obj, _ = decoder.raw_decode(text[m.start() :])
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(obj, (dict, list)):
            yield obj
            return


def _find_list(value: object, keys: tuple[str, ...]) -> list[object] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        low = {str(k).lower().strip(): v for k, v in value.items()}
        for key in keys:
            if isinstance(low.get(key), list):
                return list(low[key])
    return None


def _unusable(text: str, finish_reason: str | None, template: str | None) -> ParsedList | None:
    problem = reply_problem(text, finish_reason, template)
    return None if problem is None else ParsedList("unparsed", note=problem.note)


def parse_claims(text: str | None, *, finish_reason: str | None = None, template: str | None = None) -> ParsedList:
    """The claims of an extraction reply (an empty list is a valid answer: no facts).

    ``finish_reason`` and ``template`` (the prompt before filling) serve the shared reply rule (module docstring).
    """
    if text is None or not text.strip():
        return ParsedList("unparsed", note="empty output")
    if (bad := _unusable(text, finish_reason, template)) is not None:
        return bad
    for value in _json_values(text):
        found = _find_list(value, _CLAIM_KEYS)
        if found is None:
            return ParsedList("unparsed", note="JSON without a claims list")
        claims = [c.strip() for c in found if isinstance(c, str) and c.strip()]
        if len(claims) != len(found):
            return ParsedList("unparsed", note="a claims entry is not a non-empty string")
        return ParsedList("ok", claims)
    bullets = [m.group(1).strip() for m in (_BULLET.match(ln) for ln in text.splitlines()) if m]
    if bullets:
        return ParsedList("ok", bullets)
    return ParsedList("unparsed", note="no claims list found")


def _entry(entry: object) -> tuple[int | None, float | None]:
    if isinstance(entry, dict):
        low = {str(k).lower().strip(): v for k, v in entry.items()}
        idx = next(
            (low[k] for k in _ENTRY_INDEX_KEYS if isinstance(low.get(k), int) and not isinstance(low[k], bool)), None
        )
        value = next((low[k] for k in _ENTRY_VALUE_KEYS if k in low), None)
        return idx, to_verdict(value)
    return None, to_verdict(entry)


def parse_verdicts(
    text: str | None, n: int, *, finish_reason: str | None = None, template: str | None = None
) -> ParsedList:
    """``n`` verdicts (1.0 entailed, 0.0 not, None unreadable) from a check reply (arguments: :func:`parse_claims`)."""
    if text is None or not text.strip():
        return ParsedList("unparsed", note="empty output")
    if (bad := _unusable(text, finish_reason, template)) is not None:
        return bad
    for value in _json_values(text):
        found = _find_list(value, _VERDICT_LIST_KEYS)
        if found is None:
            return ParsedList("unparsed", note="JSON without a verdicts list")
        entries = [_entry(e) for e in found]
        indexed = [(i, v) for i, v in entries if i is not None]
        if entries and len(indexed) == len(entries):
            by_index = dict(indexed)
            if sorted(by_index) == list(range(1, n + 1)) and len(entries) == n:
                return ParsedList("ok", [by_index[i] for i in range(1, n + 1)])
            return ParsedList("unparsed", note=f"claim numbers {sorted(by_index)} do not match 1..{n}")
        if len(entries) != n:
            return ParsedList("unparsed", note=f"{len(entries)} verdicts for {n} claims")
        return ParsedList("ok", [v for _, v in entries])
    lines = [m for m in (_NUMBERED_VERDICT.match(ln) for ln in text.splitlines()) if m]
    if lines:
        got = {int(m.group(1)): to_verdict(m.group(2)) for m in lines}
        if sorted(got) == list(range(1, n + 1)) and len(lines) == n:
            return ParsedList("ok", [got[i] for i in range(1, n + 1)])
        return ParsedList("unparsed", note=f"numbered verdicts {sorted(got)} do not match 1..{n}")
    return ParsedList("unparsed", note="no verdicts found")


__all__ = ["ParsedList", "parse_claims", "parse_verdicts"]
