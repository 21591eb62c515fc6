"""Parse an LLM's raw question: structured JSON first, then a tolerant text-layout parser.

Every failure has exactly one reason from :data:`PARSE_REASONS`, checked in a
fixed order, so a funnel can count them. A reply cut off (``truncated``) or one
that repeats the prompt's placeholders (``echoed_template``: ``"..."``,
``<option>``) is refused before any parsing, by the rule every reader of
generated replies shares (:func:`ragrade.llm.replies.reply_problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ragrade.exam.text import normalise_choice
from ragrade.llm.replies import reply_problem

LETTERS = "ABCD"

#: parse failure reasons, in the order they are checked
PARSE_REASONS = (
    "empty_output",
    "truncated",
    "echoed_template",
    "invalid_json",
    "no_question",
    "too_few_choices",
    "too_many_choices",
    "empty_choice",
    "duplicate_choices",
    "no_answer",
    "multiple_answers",
    "answer_not_among_choices",
    "question_too_short",
    "not_a_question",
)

_INTERROGATIVE_START = re.compile(
    r"^\W*(what|which|how|when|why|where|who|whom|whose|is|are|does|do|did|can|could|should|would|will|"
    r"identify|select|choose|pick|complete|fill|name|determine|suppose|consider|given|you|a|an|the|in|if)\b",
    re.IGNORECASE,
)
_CHOICE_LINE = re.compile(r"^\s*[*_]*\s*[(\[]?([A-Ha-h])\s*[)\].:][*_]*\s*(.*)$")
_QUESTION_LABEL = re.compile(r"^\s*[*_#]*\s*(?:question|q)\s*\d*\s*[*_]*\s*[:.)-]\s*[*_]*\s*(.*)$", re.IGNORECASE)
_ANSWER_LABEL = re.compile(
    r"^\s*[*_#]*\s*(?:the\s+)?(?:correct\s+(?:answer|option|choice)|answer|solution)(?:\s*\(s\))?\s*[*_]*\s*"
    r"(?:is\b|[:=-])\s*[*_]*\s*(.*)$",
    re.IGNORECASE,
)
_STOP_LABEL = re.compile(r"^\s*[*_#]*\s*(?:explanation|explanations|rationale|reasoning|why)\b", re.IGNORECASE)
_LEADING_MARK = re.compile(r"^\s*[(\[]?([A-Da-d])\s*[)\].:]\s+")


@dataclass(frozen=True)
class ParsedQuestion:
    """A question that passed parse validity: four distinct candidates, ``answer`` indexes the correct one."""

    question: str
    choices: tuple[str, str, str, str]
    answer: int
    format: str  # "json" or "text"


@dataclass(frozen=True)
class ParseFailure:
    """Why a raw output was rejected (one of :data:`PARSE_REASONS`), with a short detail."""

    reason: str
    detail: str = ""
    format: str = ""


def _strip_mark(choice: str) -> str:
    """Remove a leading 'A) ' / '(b). ' marker and markdown emphasis from a candidate."""
    c = choice.strip().strip("*_").strip()
    return _LEADING_MARK.sub("", c, count=1).strip().strip("*_").strip()


def _extract_json(text: str) -> tuple[object, bool]:
    """(decoded object or None, whether the text looked like JSON at all)."""
    fence = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)
    candidate = fence.group(1) if fence else None
    if candidate is None:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return None, text.lstrip().startswith(("{", "[{", "```json"))
        candidate = text[start : end + 1]
        looks = text.lstrip().startswith("{") or '"question"' in candidate
    else:
        looks = True
    try:
        return json.loads(candidate), True
    except json.JSONDecodeError:
        return None, looks


def _first(rec: Mapping[str, object], *keys: str) -> object:
    lowered = {str(k).lower(): v for k, v in rec.items()}
    for k in keys:
        if k in lowered and lowered[k] not in (None, ""):
            return lowered[k]
    return None


def _answer_indices(raw: object, choices: list[str]) -> list[int] | None:
    """Indices the raw answer designates (possibly several); None when it names none of the choices."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return [raw] if 0 <= raw < len(choices) else None
    if isinstance(raw, list):
        out: list[int] = []
        for item in raw:
            got = _answer_indices(item, choices)
            if got is None:
                return None
            out.extend(i for i in got if i not in out)
        return out
    text = str(raw).strip().strip("*_").strip()
    if not text:
        return []
    letters = re.fullmatch(r"\(?([A-Ha-h])\)?(?:\s*(?:,|and|&|/|or)\s*\(?([A-Ha-h])\)?)*\.?", text)
    if letters:
        found = [LETTERS.find(ch.upper()) for ch in re.findall(r"\b([A-Ha-h])\b", text)]
        return (
            sorted({i for i in found if 0 <= i < len(choices)}) if all(0 <= i < len(choices) for i in found) else None
        )
    lead = re.match(r"^\(?([A-Ha-h])\s*[)\].:]", text)
    if lead:
        idx = LETTERS.find(lead.group(1).upper())
        return [idx] if 0 <= idx < len(choices) else None
    key = normalise_choice(text)
    matches = [i for i, c in enumerate(choices) if normalise_choice(c) == key]
    return matches or None


def _from_json(obj: object) -> ParsedQuestion | ParseFailure:
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        obj = obj[0]
    if not isinstance(obj, dict):
        return ParseFailure("invalid_json", "the JSON is not an object", "json")
    question = _first(obj, "question", "stem", "q", "prompt")
    raw_choices = _first(obj, "choices", "options", "candidates", "answers_list", "alternatives")
    if raw_choices is None:
        letter_keys = [k for k in LETTERS if k in obj or k.lower() in obj]
        if letter_keys:
            raw_choices = {k: obj.get(k, obj.get(k.lower())) for k in letter_keys}
    if isinstance(raw_choices, dict):
        choices = [str(v) for _, v in sorted(raw_choices.items(), key=lambda kv: str(kv[0]).upper())]
    elif isinstance(raw_choices, list):
        choices = [
            str(c) if not isinstance(c, dict) else str(_first(c, "text", "choice", "option") or "") for c in raw_choices
        ]
    else:
        choices = []
    answer = _first(obj, "answer", "correct_answer", "correct", "correct_option", "answer_index", "correct_choice")
    return validate(None if question is None else str(question), [_strip_mark(c) for c in choices], answer, "json")


def _from_text(text: str) -> ParsedQuestion | ParseFailure:
    lines = text.replace("\r\n", "\n").split("\n")
    q_lines: list[str] = []
    choices: list[str] = []
    answer: str | None = None
    mode = "pre"
    for line in lines:
        if _STOP_LABEL.match(line) and mode in ("choices", "answer"):
            break
        ans = _ANSWER_LABEL.match(line)
        if ans and mode in ("choices", "answer") and not _CHOICE_LINE.match(line):
            answer = ans.group(1).strip()
            mode = "answer"
            continue
        if mode == "answer":
            if answer == "" and line.strip():
                answer = line.strip()
            continue
        ql = _QUESTION_LABEL.match(line)
        if ql and mode in ("pre", "question") and not choices:
            q_lines = [ql.group(1)]
            mode = "question"
            continue
        cl = _CHOICE_LINE.match(line)
        if cl and mode in ("pre", "question", "choices") and cl.group(2).strip():
            expected = LETTERS[len(choices)] if len(choices) < len(LETTERS) else None
            if cl.group(1).upper() == expected or (expected is None and mode == "choices"):
                choices.append(cl.group(2).strip())
                mode = "choices"
                continue
        if mode == "choices":
            if line.strip():
                choices[-1] = f"{choices[-1]} {line.strip()}"
            continue
        if line.strip():
            q_lines.append(line.strip())
            if mode == "pre":
                mode = "question"
    question = " ".join(s.strip() for s in q_lines if s.strip()) or None
    if question is not None and not _QUESTION_LABEL.match(lines[0] if lines else ""):
        # drop a lead-in such as "Here is a question about X:" when a question follows it
        question = re.sub(r"^(?:here(?:'s| is)[^:]*:|sure[^:]*:)\s*", "", question, flags=re.IGNORECASE) or None
    return validate(question, [_strip_mark(c) for c in choices], answer, "text")


def validate(question: str | None, choices: list[str], answer: object, fmt: str) -> ParsedQuestion | ParseFailure:
    """Structural validity: a question, four distinct non-empty candidates, exactly one correct."""
    if not question or not question.strip():
        return ParseFailure("no_question", "no question text found", fmt)
    question = re.sub(r"\s+", " ", question).strip().strip("*").strip()
    if len(choices) < 4:
        return ParseFailure("too_few_choices", f"{len(choices)} candidates", fmt)
    if len(choices) > 4:
        return ParseFailure("too_many_choices", f"{len(choices)} candidates", fmt)
    if any(not c.strip() for c in choices):
        return ParseFailure("empty_choice", "a candidate is empty", fmt)
    if len({normalise_choice(c) for c in choices}) < 4:
        return ParseFailure("duplicate_choices", "two candidates are the same", fmt)
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return ParseFailure("no_answer", "no correct answer given", fmt)
    idx = _answer_indices(answer, choices)
    if idx is None or not idx:
        return ParseFailure("answer_not_among_choices", f"answer {str(answer)[:40]!r} is none of the candidates", fmt)
    if len(idx) > 1:
        return ParseFailure("multiple_answers", f"{len(idx)} candidates marked correct", fmt)
    return ParsedQuestion(
        question=question, choices=(choices[0], choices[1], choices[2], choices[3]), answer=idx[0], format=fmt
    )


def check_question_text(question: str, min_chars: int) -> ParseFailure | None:
    """The length and question-form checks of parse validity (None when the text passes)."""
    if len(question) < min_chars:
        return ParseFailure("question_too_short", f"{len(question)} characters < {min_chars}")
    if "?" not in question and "____" not in question and not _INTERROGATIVE_START.match(question):
        return ParseFailure("not_a_question", "no question mark, blank or interrogative opening")
    return None


def parse_question(
    text: str | None, min_question_chars: int = 20, *, finish_reason: str | None = None, template: str | None = None
) -> ParsedQuestion | ParseFailure:
    """Parse one raw LLM output into a valid question, or a :class:`ParseFailure` with one reason.

    ``finish_reason`` and ``template`` (the prompt before filling) serve the shared reply rule (module docstring).
    """
    if text is None or not text.strip():
        return ParseFailure("empty_output", "the model returned no text")
    problem = reply_problem(text, finish_reason, template)
    if problem is not None:
        return ParseFailure(problem.kind, problem.note)
    obj, looked_like_json = _extract_json(text)
    result: ParsedQuestion | ParseFailure
    if obj is not None:
        result = _from_json(obj)
        if isinstance(result, ParseFailure):
            fallback = _from_text(text)
            if isinstance(fallback, ParsedQuestion):
                result = fallback
    else:
        result = _from_text(text)
        if isinstance(result, ParseFailure) and looked_like_json:
            result = ParseFailure("invalid_json", "broken JSON and no question layout", "json")
    if isinstance(result, ParseFailure):
        return result
    bad = check_question_text(result.question, min_question_chars)
    if bad is not None:
        return ParseFailure(bad.reason, bad.detail, result.format)
    return result


__all__ = ["PARSE_REASONS", "ParseFailure", "ParsedQuestion", "check_question_text", "parse_question", "validate"]
