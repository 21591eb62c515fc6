"""One rule for generated replies that are not the model's answer: cut off, or the prompt's placeholders echoed.

Every reader of a structured reply (judge scores and verdicts, claim lists and claim verdicts,
exam questions, QA triplets) asks :func:`reply_problem` first, so that a reply counts, or not,
the same way everywhere. A reply is not an answer when

* it was **cut off**: the server says it stopped at the token limit (``finish_reason`` ``"length"``),
  or a JSON object or list that starts a line of the reply is never closed (the reply ends inside
  it; a server that gives no ``finish_reason`` still shows this);
* it **repeats the prompt's placeholders**: the text a prompt shows where the model's own words
  belong. Those are ``"..."`` (or ``…``) given as a whole value, an angle-bracketed description
  such as ``<one short sentence>`` or ``<integer from 1 to 5>``, and a list of quoted choices such
  as ``"yes" or "no"``. With the prompt's ``template`` (before its fields are filled in), every
  ``<...>`` description (words only; ``<tag>`` closed by ``</tag>`` delimits a field instead) and
  quoted choice list it shows counts; without it, descriptions of two or more
  plain words or numbers (``<one short sentence>``) and ``"..."`` do. A description is matched
  anywhere in the reply; a one-word one (``<claim>``, ``<option>``) and ``...`` only as a whole
  value (a quoted string, the rest of a labelled line, or the whole reply), where a real answer
  would have stood.

Empty replies are left to the readers (each already names them). The function returns None for
a usable reply, else a :class:`ReplyProblem` whose ``kind`` is ``"truncated"`` or
``"echoed_template"`` and whose ``note`` says why in one line.

:func:`leaked_template_token` finds the other sign of a reply the model did not really give: a
chat-template control token in the text (``<|im_end|>``, ``<end_of_turn>``, ``</s>``, ...), or the
start of one where the text ends (``ready.<|im``), which a server shows when it does not apply the
model's chat template or does not stop at its end of turn. ``ragrade llm probe`` reports it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal

ProblemKind = Literal["truncated", "echoed_template"]

_ANGLE = re.compile(r"<([A-Za-z][A-Za-z0-9 ,'-]{0,59})>")  # a description in words, not a tag with attributes
_GENERIC_ANGLE = re.compile(r"<[a-z]+(?: (?:[a-z]+|\d+)){1,9}>")  # <one short sentence>, <integer from 1 to 5>
_CHOICES = re.compile(r'"[^"\n]{1,30}"(?:\s*,?\s*or\s+"[^"\n]{1,30}")+')  # "yes" or "no"
_ELLIPSES = frozenset({"...", "…"})
_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.){0,80})"')
_LABELLED = re.compile(r"^\s*(?:[-*]\s*)?[\w\s()#*]{0,40}?[:)]\s*(.*?)\s*[,;]?\s*$")
_JSON_START = re.compile(r"^[ \t]*(?:```(?:json|JSON)?[ \t]*\n?[ \t]*)?([\[{])", re.MULTILINE)


#: control tokens of common chat templates (ChatML, Llama 3, Gemma, Mistral, Phi, gpt-oss, DeepSeek, SentencePiece)
TEMPLATE_TOKENS = (
    "<|im_start|>",
    "<|im_end|>",
    "<|im_sep|>",
    "<|endoftext|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
    "<|channel|>",
    "<|message|>",
    "<|return|>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "<\uff5cend\u2581of\u2581sentence\uff5c>",
)
_SPECIAL = re.compile(r"<\|[A-Za-z0-9_.-]{1,40}\|>")  # any <|name|> token
_SPECIAL_START = re.compile(r"<\|[A-Za-z0-9_.-]{0,40}\|?$")  # the text ends inside one


@dataclass(frozen=True)
class ReplyProblem:
    """Why a reply is not the model's answer: ``kind`` (``truncated`` or ``echoed_template``) and a note."""

    kind: ProblemKind
    note: str


@dataclass(frozen=True)
class _Placeholders:
    anywhere: tuple[str, ...]  # matched as a substring (whitespace-normalised, case-insensitive)
    whole: frozenset[str]  # matched as a whole value (lower case)


@functools.lru_cache(maxsize=64)
def _placeholders(template: str | None) -> _Placeholders:
    """The placeholders a prompt ``template`` shows (see module docstring)."""
    anywhere: list[str] = []
    whole = set(_ELLIPSES)
    if template:
        for m in _ANGLE.finditer(template):
            span = m.group(0).lower()
            if f"</{m.group(1)}>" in template:  # <answer>...</answer> delimits a field: not a placeholder
                continue
            if " " in m.group(1).strip():
                anywhere.append(_squash(span))
            else:
                whole.add(span)
        anywhere.extend(_squash(m.group(0).lower()) for m in _CHOICES.finditer(template))
    return _Placeholders(tuple(dict.fromkeys(anywhere)), frozenset(whole))


def _squash(text: str) -> str:
    return " ".join(text.split())


def _values(text: str) -> list[str]:
    """Where an answer would stand: quoted strings, the rest of each labelled line, each line, the whole reply."""
    values = [m.group(1) for m in _QUOTED.finditer(text)]
    for line in text.splitlines():
        values.append(line)
        m = _LABELLED.match(line)
        if m:
            values.append(m.group(1))
    values.append(text)
    return [v.strip().strip("\"'`*").strip().lower() for v in values]


def echoed_placeholder(text: str, template: str | None = None) -> str | None:
    """The first placeholder of the prompt (``template``, else the generic ones) that ``text`` repeats, or None."""
    marks = _placeholders(template)
    low = _squash(text.lower())
    for span in marks.anywhere:
        if span in low:
            return span
    generic = _GENERIC_ANGLE.search(low)
    if generic:
        return generic.group(0)
    for value in _values(text):
        if value in marks.whole:
            return value
    return None


def unclosed_json(text: str) -> bool:
    """True when a JSON object or list that starts a line of ``text`` is never closed (the reply ends in it)."""
    m = _JSON_START.search(text)
    if m is None:
        return False
    depth, in_string, escaped = 0, False, False
    for ch in text[m.start(1) :]:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return False
    return True


def leaked_template_token(text: str) -> str | None:
    """The chat-template control token ``text`` shows, or the start of one it ends with (at least two
    characters: ``<|im``, ``</``); None for a clean reply."""
    found = [(text.find(t), t) for t in TEMPLATE_TOKENS if t in text]
    special = _SPECIAL.search(text)
    if special:
        found.append((special.start(), special.group(0)))
    if found:
        return min(found, key=lambda f: (f[0], -len(f[1])))[1]  # the first in the text
    tail = text.rstrip()
    ending = _SPECIAL_START.search(tail)
    if ending:
        return ending.group(0)
    starts = [t[:n] for t in TEMPLATE_TOKENS for n in range(2, len(t)) if tail.endswith(t[:n])]
    return max(starts, key=len) if starts else None


def reply_problem(
    text: str | None, finish_reason: str | None = None, template: str | None = None
) -> ReplyProblem | None:
    """Why ``text`` is not the model's answer (cut off, or the prompt's placeholders echoed), else None.

    ``finish_reason`` is the server's (``"length"``: stopped at the token limit); ``template`` the prompt
    before its fields were filled in, whose placeholders count (see module docstring).
    """
    if text is None or not text.strip():
        return None
    if finish_reason == "length":
        return ReplyProblem("truncated", "cut off at the token limit (finish_reason 'length')")
    if unclosed_json(text):
        return ReplyProblem("truncated", "cut off: the reply ends inside its JSON")
    echoed = echoed_placeholder(text, template)
    if echoed is not None:
        return ReplyProblem("echoed_template", f"repeats the prompt's placeholder {echoed!r} instead of an answer")
    return None


__all__ = [
    "TEMPLATE_TOKENS",
    "ProblemKind",
    "ReplyProblem",
    "echoed_placeholder",
    "leaked_template_token",
    "reply_problem",
    "unclosed_json",
]
