"""Detectors for refusals and error reports in model responses, and the judge-verdict parser.

A detector holds a list of phrases and says whether a response contains any
of them after the same normalisation as answer matching (NFKC, case folding,
CJK-aware whitespace), so "THE PROVIDED DOCUMENTS CONTAIN FACTUAL ERRORS."
and "提供的文档存在 事实性错误" are both recognised.

The default lists hold our own fixed sentences (``ragrade.llm.phrases``, and
their Chinese counterparts used by our prompts) plus the wording of the
original benchmark ("insufficient information" / "信息不足", "factual errors" /
"事实性错误"), so responses to either set of instructions are recognised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragrade.robust.match import normalise

# our Chinese counterparts of ragrade.llm.phrases; each also contains the original benchmark's key words
REJECTION_SENTENCE_ZH = "所提供的文档信息不足，无法回答这个问题。"
ERROR_SENTENCE_ZH = "所提供的文档存在事实性错误。"

RGB_REJECTION_PHRASES = ("insufficient information", "信息不足")
RGB_ERROR_PHRASES = ("factual errors", "事实性错误")


def _phrases_module() -> tuple[str, str]:
    from ragrade.llm.phrases import ERROR_SENTENCE, REJECTION_SENTENCE

    return REJECTION_SENTENCE, ERROR_SENTENCE


def default_rejection_phrases() -> tuple[str, ...]:
    """Our rejection sentences (English, Chinese) and the original benchmark's refusal wording."""
    rejection, _ = _phrases_module()
    return (rejection, REJECTION_SENTENCE_ZH, *RGB_REJECTION_PHRASES)


def default_error_phrases() -> tuple[str, ...]:
    """Our error sentences (English, Chinese) and the original benchmark's error wording."""
    _, error = _phrases_module()
    return (error, ERROR_SENTENCE_ZH, *RGB_ERROR_PHRASES)


@dataclass(frozen=True)
class PhraseDetector:
    """Recognises any of ``phrases`` in a response, case-insensitively and whitespace-tolerantly."""

    phrases: tuple[str, ...]
    _norm: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pairs = tuple((raw, normalise(raw)) for raw in self.phrases)
        object.__setattr__(self, "_norm", tuple((raw, n) for raw, n in pairs if n))

    def __call__(self, response: str) -> bool:
        """True when ``response`` contains one of the phrases."""
        return self.matched(response) is not None

    def matched(self, response: str) -> str | None:
        """The first phrase found in ``response`` (as configured), or None."""
        text = normalise(response)
        for raw, norm in self._norm:
            if norm in text:
                return raw
        return None


@dataclass(frozen=True)
class Detectors:
    """The pair of detectors used to label responses."""

    rejection: PhraseDetector
    error: PhraseDetector

    def describe(self) -> dict[str, list[str]]:
        """The phrase lists, for metrics.json."""
        return {"rejection_phrases": list(self.rejection.phrases), "error_phrases": list(self.error.phrases)}


def build_detectors(
    rejection_phrases: Sequence[str] | None = None,
    error_phrases: Sequence[str] | None = None,
    always: Iterable[str] = (),
    always_error: Iterable[str] = (),
) -> Detectors:
    """Detectors from configured lists (None: the defaults); ``always*`` are added to either list.

    ``always`` / ``always_error`` carry the sentences the prompt told the model to
    use, so a replaced list never forgets the instructed sentence.
    """
    rej = list(default_rejection_phrases() if rejection_phrases is None else rejection_phrases)
    err = list(default_error_phrases() if error_phrases is None else error_phrases)
    for extra, target in ((always, rej), (always_error, err)):
        for p in extra:
            if p and p not in target:
                target.append(p)
    return Detectors(PhraseDetector(tuple(rej)), PhraseDetector(tuple(err)))


# ---------------------------------------------------------------------------------------------
# judge verdicts
# ---------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)
_YES = {"yes", "true", "y", "1", "是", "是的", "refused", "rejected", "detected", "identified"}
_NO = {"no", "false", "n", "0", "否", "不是", "answered", "not_detected", "not detected", "not identified"}
_VERDICT_KEYS = (
    "verdict",
    "answer",
    "result",
    "decision",
    "label",
    "refused",
    "rejected",
    "detected",
    "identified",
    "value",
)


def _objects(text: str) -> list[Any]:
    """JSON values found in ``text``: whole text, fenced blocks, then each balanced {...} span."""
    candidates = [text.strip()] + [m.strip() for m in _FENCE.findall(text)]
    depth, start = 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0 and start >= 0:
                candidates.append(text[start : i + 1])
    out: list[Any] = []
    for c in candidates:
        for attempt in (c, c.replace("'", '"')):
            try:
                out.append(json.loads(attempt))
                break
            except (json.JSONDecodeError, ValueError):
                continue
    return out


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().strip(".!").casefold()
        if v in _YES:
            return True
        if v in _NO:
            return False
    return None


def parse_verdict(text: str | None) -> bool | None:
    """A yes/no verdict from a judge's reply, or None when it cannot be read.

    Accepts a JSON object (bare, fenced, embedded in prose, or with single
    quotes) whose ``verdict`` (or a similar key) is yes/no/true/false, and a
    bare JSON boolean or "yes"/"no" string. Anything else is a parse failure:
    it is counted, never guessed.
    """
    if not text or not text.strip():
        return None
    for obj in _objects(text):
        if isinstance(obj, dict):
            lowered = {str(k).casefold(): v for k, v in obj.items()}
            for key in _VERDICT_KEYS:
                if key in lowered:
                    got = _as_bool(lowered[key])
                    if got is not None:
                        return got
        else:
            got = _as_bool(obj)
            if got is not None:
                return got
    return _as_bool(text)


__all__ = [
    "ERROR_SENTENCE_ZH",
    "REJECTION_SENTENCE_ZH",
    "RGB_ERROR_PHRASES",
    "RGB_REJECTION_PHRASES",
    "Detectors",
    "PhraseDetector",
    "build_detectors",
    "default_error_phrases",
    "default_rejection_phrases",
    "parse_verdict",
]
