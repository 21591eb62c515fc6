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

:func:`cut_echo` finds the third: a reply that **repeats the prompt itself**, as a base model does when it
continues the prompt instead of answering it (the instructions again, the passages with their numbers,
``Question: ... Answer:``). An echoed span is a run of at least ``min_words`` (8) words the prompt has in
the same order that is not a quote: a run that stays inside one of the prompt's ``fields`` (a passage or
the question, which an answer may quote) is the model's own, one with two or more words of the prompt's
own text (instructions, labels, passage headers) or that runs across fields is an echo. A run of three
words or more that ends the reply after an echo counts too (the reply was cut off repeating the prompt),
and so does a line between echoed spans that is a whole line of the prompt's own (``Answer:``). The rest of
the reply, its own pieces (each kept once: a model in a loop repeats them), is what it said.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
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


_WORD = re.compile(r"\w+")
_MARKER_END = re.compile(r"\[\d{1,3}$")  # the start of a numbered marker, "[2", just before an echoed span


@dataclass(frozen=True)
class EchoCut:
    """A reply with the spans that repeat its prompt cut out (:func:`cut_echo`).

    ``text`` is what the model said itself: the reply unchanged when nothing was echoed, else its own pieces
    (each once, in order) on separate lines, "" when there are none. ``spans`` are the echoed character spans
    of the reply and ``echoed_words`` how many words they hold.
    """

    text: str
    spans: tuple[tuple[int, int], ...] = ()
    echoed_words: int = 0

    @property
    def echoed(self) -> bool:
        """True when part of the reply repeats the prompt."""
        return bool(self.spans)

    @property
    def only_echo(self) -> bool:
        """True when the reply repeats the prompt and says nothing of its own."""
        return self.echoed and not self.text


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(0).casefold(), m.start(), m.end()) for m in _WORD.finditer(text)]


def _field_of_each_char(prompt: str, fields: Sequence[str]) -> list[int]:
    """For each character of ``prompt``: the occurrence of a field it lies in (numbered from 0), or -1."""
    ranges: list[tuple[int, int]] = []
    for field in dict.fromkeys(f.strip() for f in fields):
        at = prompt.find(field) if field else -1
        while at >= 0:
            ranges.append((at, at + len(field)))
            at = prompt.find(field, at + len(field))
    owner_of_char = [-1] * len(prompt)
    for n, (a, b) in sorted(enumerate(ranges), key=lambda r: r[1][0] - r[1][1]):  # the longest first
        for c in range(a, b):
            if owner_of_char[c] < 0:
                owner_of_char[c] = n
    return owner_of_char


def _is_echo(owner: list[int], k: int, n: int) -> bool:
    """Whether prompt words ``k .. k+n-1``, repeated, are an echo (not a quote of one field)."""
    run = owner[k : k + n]
    own_words = sum(1 for o in run if o < 0)
    return own_words >= 2 or len({o for o in run if o >= 0}) >= 2


def _longest(rw: list[str], i: int, pw: list[str], starts: Sequence[int]) -> tuple[int, int]:
    """The longest run of reply words from ``i`` the prompt has in order: (its length, where it starts there)."""
    best_n, best_k = 0, 0
    for k in starts:
        n = 0
        while i + n < len(rw) and k + n < len(pw) and rw[i + n] == pw[k + n]:
            n += 1
        if n > best_n:
            best_n, best_k = n, k
    return best_n, best_k


def _char_span(reply: str, prompt: str, start: int, end: int, p_start: int, p_end: int) -> tuple[int, int]:
    """A word run's span widened over the punctuation around it that the prompt has too (and over a renumbered
    ``[n`` just before it: a passage header repeated with another number)."""
    while start > 0 and p_start > 0 and not reply[start - 1].isalnum() and reply[start - 1] == prompt[p_start - 1]:
        start, p_start = start - 1, p_start - 1
    before, p_before = _MARKER_END.search(reply[:start]), _MARKER_END.search(prompt[:p_start])
    if before and p_before:
        start = before.start()
    while end < len(reply) and p_end < len(prompt) and not reply[end].isalnum() and reply[end] == prompt[p_end]:
        end, p_end = end + 1, p_end + 1
    return start, end


def cut_echo(reply: str, prompt: str, fields: Sequence[str] = (), *, min_words: int = 8) -> EchoCut:
    """``reply`` with the spans that repeat ``prompt`` cut out (module docstring).

    ``fields`` are the texts filled into the prompt that an answer may quote (passages, the question): a run
    inside one of them is not an echo.
    """
    text = reply.strip()
    rwords, pwords = _words(reply), _words(prompt)
    rw, pw = [w for w, _, _ in rwords], [w for w, _, _ in pwords]
    if len(rw) < min_words or len(pw) < min_words:
        return EchoCut(text)
    of_char = _field_of_each_char(prompt, fields)
    owner = [o if (o := of_char[start]) == of_char[end - 1] else -1 for _, start, end in pwords]  # -1: the prompt's own
    grams: dict[tuple[str, ...], list[int]] = {}
    for k in range(len(pw) - min_words + 1):
        grams.setdefault(tuple(pw[k : k + min_words]), []).append(k)
    runs: list[tuple[int, int, int]] = []  # (first reply word, length, first prompt word)
    i = 0
    while i <= len(rw) - min_words:
        starts = grams.get(tuple(rw[i : i + min_words]))
        n, k = _longest(rw, i, pw, starts) if starts else (0, 0)
        if n and _is_echo(owner, k, n):
            runs.append((i, n, k))
            i += n
        else:
            i += 1
    if runs:  # the reply cut off while repeating the prompt: a shorter run that ends it
        done = runs[-1][0] + runs[-1][1]
        for i in range(max(done, len(rw) - min_words + 1), len(rw) - 2):
            n, k = _longest(rw, i, pw, range(len(pw)))
            if i + n == len(rw) and _is_echo(owner, k, n):
                runs.append((i, n, k))
                break
    if not runs:
        return EchoCut(text)
    spans: list[tuple[int, int]] = []
    for i, n, k in runs:
        span = _char_span(reply, prompt, rwords[i][1], rwords[i + n - 1][2], pwords[k][1], pwords[k + n - 1][2])
        if spans and span[0] <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(span[1], spans[-1][1]))
        else:
            spans.append(span)
    prompt_lines = {  # the prompt's own lines (labels, instructions), not a passage's, which an answer may quote
        _squash(m.group(0)).casefold()
        for m in re.finditer(r"[^\n]+", prompt)
        if any(of_char[m.start() + w.start()] < 0 for w in _WORD.finditer(m.group(0)))
    }
    pieces: dict[str, str] = {}
    at = 0
    for start, end in [*spans, (len(reply), len(reply))]:
        lines = reply[at:start].strip().splitlines()  # less a whole line of the prompt (Answer:, Question: ...)
        piece = "\n".join(line for line in lines if _squash(line).casefold() not in prompt_lines).strip()
        if _WORD.search(piece):
            pieces.setdefault(_squash(piece), piece)
        at = end
    return EchoCut("\n".join(pieces.values()), tuple(spans), sum(n for _, n, _ in runs))


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
    "EchoCut",
    "ProblemKind",
    "ReplyProblem",
    "cut_echo",
    "echoed_placeholder",
    "leaked_template_token",
    "reply_problem",
    "unclosed_json",
]
