"""Synthetic (question, reference answer, reference context) triplets from chunks.

Two generators:

- **LLM** (any ``--llm``): one request per sampled chunk with our prompt (or a
  prompt file with ``{passage}`` and optionally ``{source}``), JSON output
  ``{"question", "answer"}``; replies that fail to parse, empty fields, and
  answers sharing too few words with the passage are rejected and counted.
- **Offline extractive** (``--llm offline``, a labelled baseline): picks a
  sentence of the chunk and an answer span in it (a year, a number, a
  capitalised name, else a long content word) and turns the sentence into a
  question by putting a question phrase where the span was; the reference
  answer is the whole sentence (the span is kept as ``metadata.answer_term``),
  which a sentence-answering reader can match. Cheap and reproducible, but the
  questions are close to the text's wording, which favours lexical retrievers.

Chunks are sampled with a seed, round-robin over documents so that questions
spread over the collection; a chunk of lorem-ipsum filler is never sampled
(counted as ``placeholder_chunks``) and the offline generator never takes a
sentence of filler (:mod:`ragrade.exam.placeholder`). Questions are deduplicated on their normalised
text. Candidates are drawn until ``n`` triplets are accepted or the eligible
chunks run out: the offline generator may try every eligible chunk; the LLM
generator asks in batches sized by the acceptance rate so far, at most
``n * oversample + 5`` requests. The funnel (sampled, failed, unparsed,
rejected, duplicates, accepted) says where candidates went, and
:meth:`Funnel.shortfall` says in one line why fewer than ``n`` were written.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

from ragrade import interrupt
from ragrade.corpus.types import Chunk
from ragrade.errors import ConfigError
from ragrade.exam.generate import interleave_by_document
from ragrade.exam.writers import is_refusal
from ragrade.judge.lexical import answer_tokens, normalize_answer
from ragrade.llm.failures import fatal_kind
from ragrade.llm.replies import reply_problem
from ragrade.progress import counting_requests, note_failed
from ragrade.qa.files import QAItem

if TYPE_CHECKING:
    from ragrade.llm.base import LLM

OFFLINE = "offline"
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "which",
        "who",
        "whom",
        "what",
        "when",
        "where",
        "why",
        "how",
        "not",
        "no",
        "nor",
        "so",
        "than",
        "then",
        "there",
        "their",
        "they",
        "them",
        "he",
        "she",
        "his",
        "her",
        "we",
        "our",
        "you",
        "your",
        "i",
        "me",
        "my",
        "also",
        "into",
        "over",
        "under",
        "about",
        "after",
        "before",
        "between",
        "during",
        "without",
        "within",
        "more",
        "most",
        "such",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "do",
        "does",
        "did",
        "done",
        "has",
        "have",
        "had",
        "having",
        "all",
        "any",
        "each",
        "other",
        "some",
        "only",
        "very",
    ]
)


@dataclass(frozen=True)
class QAGenConfig:
    """How many triplets, from which chunks, with which generator settings."""

    n: int = 50
    seed: int = 0
    min_chunk_chars: int = 120
    oversample: float = 5.0  # LLM requests at most: n * oversample + 5 (the offline generator may try every chunk)
    max_tokens: int = 256  # reply budget: a question and a short reference answer, as JSON
    temperature: float = 0.0
    min_grounding: float = 0.3  # share of answer words found in the passage
    prompt_file: str | None = None
    batch_size: int = 32


@dataclass
class Funnel:
    """Where candidate triplets went."""

    requested: int = 0
    min_chunk_chars: int = 0
    chunks_available: int = 0
    chunks_eligible: int = 0
    placeholder_chunks: int = 0  # long enough, but mostly lorem-ipsum filler: never asked about
    tried_limit: int = 0  # candidates that could be tried: the eligible chunks, for the LLM at most n*oversample+5
    sampled: int = 0
    failed: int = 0  # failed requests: missing, asked again by a rerun (answers received come from the cache)
    refused: int = 0  # replies declining the task
    unparsed: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    accepted: int = 0
    unused: int = 0  # candidates of the last LLM batch left unread once n triplets were accepted
    first_error: str | None = None
    # replies per way JSON was asked of the server ("json_schema", "json_object", "text"); empty offline
    response_format: dict[str, int] = field(default_factory=dict)

    def reject(self, reason: str) -> None:
        """Count one rejection."""
        self.rejected[reason] = self.rejected.get(reason, 0) + 1

    def shortfall(self) -> str | None:
        """Why fewer triplets than requested were accepted, in one line with counts per reason; None when not."""
        if self.accepted >= self.requested:
            return None
        if self.sampled >= self.chunks_eligible:
            why = f"all {self.chunks_eligible} eligible chunks were tried"
        else:
            why = (
                f"the attempt limit was reached ({self.sampled} of {self.chunks_eligible} eligible chunks tried: "
                f"n x oversample + 5 = {self.tried_limit} LLM requests at most; raise oversample to try more)"
            )
        lost = [
            (name, count)
            for name, count in (
                ("failed requests", self.failed),
                ("refused", self.refused),
                ("unparsed replies", self.unparsed),
                *sorted(self.rejected.items(), key=lambda kv: (-kv[1], kv[0])),
                ("duplicate questions", self.duplicates),
            )
            if count
        ]
        short = self.chunks_available - self.chunks_eligible - self.placeholder_chunks
        left_out = [f"{short} shorter than {self.min_chunk_chars} characters"] if short else []
        left_out += [f"{self.placeholder_chunks} placeholder text"] if self.placeholder_chunks else []
        return (
            f"{self.accepted} of {self.requested} requested triplets: {why}; "
            f"{self.chunks_eligible} of {self.chunks_available} chunks eligible"
            + (f" ({', '.join(left_out)})" if left_out else "")
            + "; candidates lost: "
            + (", ".join(f"{name} {count}" for name, count in lost) or "none")
        )

    def to_dict(self) -> dict[str, object]:
        """JSON view."""
        out: dict[str, object] = {k: v for k, v in self.__dict__.items()}
        out["response_format"] = dict(sorted(self.response_format.items()))
        return {**out, "rejected_total": sum(self.rejected.values())}


def sample_chunks(chunks: Sequence[Chunk], cfg: QAGenConfig, funnel: Funnel) -> list[Chunk]:
    """Eligible chunks in a seeded order that alternates between documents."""
    funnel.chunks_available = len(chunks)
    from ragrade.exam.placeholder import is_placeholder_text

    long_enough = [c for c in chunks if len(c.text.strip()) >= cfg.min_chunk_chars]
    eligible = [c for c in long_enough if not is_placeholder_text(c.text)]
    funnel.placeholder_chunks = len(long_enough) - len(eligible)
    funnel.chunks_eligible = len(eligible)
    return interleave_by_document(eligible, random.Random(cfg.seed))


def _qa_id(question: str, chunk_id: str) -> str:
    return "qa-" + hashlib.sha256(f"{chunk_id}\x1f{normalize_answer(question)}".encode()).hexdigest()[:12]


def grounding(answer: str, passage: str) -> float:
    """Share of the answer's content words (normalised) that occur in the passage."""
    words = [w for w in answer_tokens(answer) if w not in _STOP] or answer_tokens(answer)
    if not words:
        return 0.0
    have = set(answer_tokens(passage))
    return sum(1 for w in words if w in have) / len(words)


def _item(
    chunk: Chunk, question: str, answer: str, span: tuple[int, int] | None, generator: dict[str, object]
) -> QAItem:
    return QAItem(
        id=_qa_id(question, chunk.id),
        question=question,
        reference=answer,
        reference_context=chunk.text,
        chunk_id=chunk.id,
        doc_id=chunk.doc_id,
        source=chunk.source,
        answer_span=span,
        doc_span=(chunk.start, chunk.end),
        metadata=dict(chunk.metadata),
        generator=generator,
    )


# --- offline extractive baseline -------------------------------------------------------------------------------

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")
_NAME = re.compile(r"\b[A-Z][a-zA-Z'’-]+(?:\s+(?:of|de|von|van|the|and)?\s*[A-Z][a-zA-Z'’-]+)*")
_WORD = re.compile(r"\b[a-zA-Z][a-zA-Z-]{5,}\b")


def _candidates(sentence: str) -> list[tuple[int, int, str]]:
    """Answer spans in a sentence with the question phrase that replaces them, best kind first."""
    out: list[tuple[int, int, str]] = []
    for m in _YEAR.finditer(sentence):
        before = sentence[: m.start()].rstrip()
        if before.lower().endswith(" in"):
            out.append((len(before) - 2, m.end(), "in what year"))
        else:
            out.append((m.start(), m.end(), "what year"))
    if out:
        return out
    out += [
        (m.start(), m.end(), "what number")
        for m in _NUMBER.finditer(sentence)
        if sentence[m.end() : m.end() + 1] != "-"
    ]
    if out:
        return out
    out += [
        (m.start(), m.end(), "whom or what")
        for m in _NAME.finditer(sentence)
        if m.start() > 0 and m.group(0).lower() not in _STOP
    ]
    if out:
        return out
    words = sorted(
        (m for m in _WORD.finditer(sentence) if m.start() > 0 and m.group(0).lower() not in _STOP | _VAGUE),
        key=lambda m: (-len(m.group(0)), m.start()),
    )
    return [(m.start(), m.end(), "what") for m in words[:3]]


# long words that name nothing a question could ask for ("What ... returns the corresponding value?")
_VAGUE_TEXT = (
    "however therefore otherwise instead because although whether following corresponding respectively "
    "usually generally typically actually already available different several another specified "
    "particular certain various possible necessary example something anything"
)
_VAGUE = frozenset(_VAGUE_TEXT.split())

_CODE_CHARS = set("=(){}[]<>$%#@\\|`_*~^")


def is_prose(sentence: str) -> bool:
    """True for a plain-text sentence (starts with a capital, ends with '.', few code symbols)."""
    if "\n" in sentence.strip() or not sentence[:1].isupper() or not sentence.rstrip().endswith((".", "!")):
        return False
    chars = [ch for ch in sentence if not ch.isspace()]
    letters = sum(ch.isalpha() for ch in chars)
    code = sum(ch in _CODE_CHARS for ch in chars)
    return code <= 1 and letters >= 0.8 * len(chars)


def extractive_question(chunk: Chunk, seed: int) -> tuple[str, str, tuple[int, int]] | None:
    """A (question, answer term, the term's span in the chunk) built from one sentence of ``chunk``, or None."""
    got = _extract(chunk, seed)
    return None if got is None else got[:3]


def _extract(chunk: Chunk, seed: int) -> tuple[str, str, tuple[int, int], tuple[int, int]] | None:
    """:func:`extractive_question` plus the span of the answer-bearing sentence in the chunk."""
    from ragrade.corpus.segment import split_sentences
    from ragrade.exam.placeholder import is_placeholder

    rng = random.Random(f"{seed}\x1f{chunk.id}")
    sentences = [
        (a, b)
        for a, b in split_sentences(chunk.text)
        if 6 <= len(chunk.text[a:b].split()) <= 45 and is_prose(chunk.text[a:b]) and not is_placeholder(chunk.text[a:b])
    ]
    rng.shuffle(sentences)
    for a, b in sentences:
        sent = chunk.text[a:b]
        cands = _candidates(sent)
        if not cands:
            continue
        s, e, phrase = cands[rng.randrange(len(cands))]
        answer = sent[s:e]
        if phrase == "in what year":
            answer = sent[s + 2 : e].strip()
            s_ans = s + 2 + (len(sent[s + 2 : e]) - len(sent[s + 2 : e].lstrip()))
        else:
            s_ans = s
        body = (sent[:s] + phrase + sent[e:]).strip().rstrip(".!;:")
        question = body[0].upper() + body[1:] + "?"
        start = a + s_ans
        return question, answer, (start, start + len(answer)), (a, a + len(sent.rstrip()))
    return None


def _offline(cand: list[Chunk], cfg: QAGenConfig, funnel: Funnel, accept: Callable[[QAItem], bool]) -> None:
    """Offline triplets whose reference is the answer-bearing sentence (the blanked term kept as ``answer_term``).

    A one-word reference ("corresponding") can be matched by no sentence answer, so exact match and claim F1
    would be 0 for every pipeline, the oracle included; the sentence is what an extractive reader can return
    when its passages hold the answer, so the offline path ranks pipelines (a labelled baseline all the same).
    """
    generator: dict[str, object] = {
        "name": "offline-extractive",
        "llm": None,
        "baseline": True,
        "seed": cfg.seed,
        "reference": "sentence",
    }
    for chunk in cand:  # every eligible chunk if need be: the offline generator costs no request
        funnel.sampled += 1
        got = _extract(chunk, cfg.seed)
        if got is None:
            funnel.reject("no usable sentence")
            continue
        question, term, _, (a, b) = got
        item = _item(chunk, question, chunk.text[a:b], (a, b), generator)
        item.metadata["answer_term"] = term
        if accept(item):
            return


# --- LLM generator ---------------------------------------------------------------------------------------------


def load_generation_prompt(path: str | None) -> str:
    """The generation prompt template: ours, or a file that contains ``{passage}`` (ConfigError otherwise, by the
    check of ``exam generate --prompt``: :func:`ragrade.exam.prompts.read_prompt_file`)."""
    if path is None:
        return resources.files("ragrade.qa").joinpath("prompts", "generate.txt").read_text(encoding="utf-8")
    from ragrade.exam.prompts import read_prompt_file

    return read_prompt_file(path, placeholder="{passage}", also=("{source}",))


def parse_generation(
    text: str | None, *, finish_reason: str | None = None, template: str | None = None
) -> tuple[str, str] | None:
    """``(question, answer)`` from a reply (JSON preferred; ``Question: ... Answer: ...`` accepted).

    None when there is none, and for a reply cut off or repeating the placeholders of the prompt ``template``
    (``"..."``), by the rule every reader of generated replies shares (:func:`ragrade.llm.replies.reply_problem`).
    """
    if not text or reply_problem(text, finish_reason, template) is not None:
        return None
    from ragrade.judge.parse import json_objects

    for obj in json_objects(text):
        low = {str(k).lower(): v for k, v in obj.items()}
        q, a = low.get("question"), low.get("answer", low.get("reference_answer"))
        if isinstance(q, str) and isinstance(a, (str, int, float)):
            return q.strip(), str(a).strip()
    m = re.search(
        r"question\s*[:\-]\s*(.+?)\s*\n+\s*(?:reference\s+)?answer\s*[:\-]\s*(.+)", text, re.IGNORECASE | re.DOTALL
    )
    if m:
        return m.group(1).strip().strip("*"), m.group(2).strip().strip("*")
    return None


def _llm(
    cand: list[Chunk],
    cfg: QAGenConfig,
    funnel: Funnel,
    accept: Callable[[QAItem], bool],
    llm: LLM,
    progress: Callable[[str, int, int], None] | None = None,
) -> None:
    from ragrade.llm.base import GenerationRequest, Message, generate

    template = load_generation_prompt(cfg.prompt_file)
    generator: dict[str, object] = {
        "name": "llm",
        "llm": llm.name,
        "baseline": bool(getattr(llm, "is_baseline", False)),
        "seed": cfg.seed,
        "prompt_sha256": hashlib.sha256(template.encode()).hexdigest(),
        "temperature": cfg.temperature,
    }
    schema = {
        "type": "object",
        "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
        "required": ["question", "answer"],
        "additionalProperties": False,
    }
    start = 0
    while start < len(cand):
        batch = cand[start : start + next_batch(funnel, cfg, len(cand) - start)]
        reqs = [
            GenerationRequest(
                messages=(
                    Message("user", template.replace("{passage}", c.text).replace("{source}", c.source or c.doc_id)),
                ),
                temperature=cfg.temperature,
                max_tokens=cfg.max_tokens,
                seed=cfg.seed,
                json_schema=schema,
                task="generate_question",
                passages=(c.text,),
            )
            for c in batch
        ]
        interrupt.progress(start, len(cand), "generation requests")
        if progress is not None:  # triplets from the start (its rate), then what runs, before the first answer
            progress("triplets", funnel.accepted, cfg.n)
            progress("requests", start, len(cand))
        with counting_requests(_answered(progress, start, len(cand)), cap=len(batch)):
            completions = generate(llm, reqs)
        for j, (chunk, comp) in enumerate(zip(batch, completions, strict=True)):
            if funnel.accepted >= cfg.n:  # the batch asked for more than were needed
                funnel.unused = len(batch) - j
                return
            funnel.sampled += 1
            if not comp.ok:
                funnel.failed += 1
                note_failed()
                if funnel.first_error is None or fatal_kind(comp.error):  # keep what stopped the backend
                    funnel.first_error = comp.error
                continue
            fmt = comp.response_format
            if fmt is not None:
                funnel.response_format[fmt] = funnel.response_format.get(fmt, 0) + 1
            parsed = parse_generation(comp.text, finish_reason=comp.finish_reason, template=template)
            if parsed is None and is_refusal(comp.text):
                funnel.refused += 1
                continue
            if parsed is None:
                funnel.unparsed += 1
                continue
            question, answer = parsed
            if len(question) < 8 or not answer:
                funnel.reject("empty or too short")
                continue
            if grounding(answer, chunk.text) < cfg.min_grounding:
                funnel.reject("answer not found in passage")
                continue
            pos = chunk.text.find(answer)
            span = (pos, pos + len(answer)) if pos >= 0 else None
            accept(_item(chunk, question, answer, span, {**generator, "response_format": fmt}))
        start += len(batch)
        if funnel.accepted >= cfg.n:
            return


def next_batch(funnel: Funnel, cfg: QAGenConfig, left: int) -> int:
    """How many candidates to ask next: those still needed divided by the acceptance rate so far (all of them
    before any answer), at most ``cfg.batch_size`` and the ``left`` candidates, at least one."""
    need = max(cfg.n - funnel.accepted, 1)
    if funnel.sampled and funnel.accepted:
        need = math.ceil(need * funnel.sampled / funnel.accepted)
    elif funnel.sampled:  # nothing accepted yet: a full batch
        need = cfg.batch_size
    return max(1, min(need, cfg.batch_size, left))


def _answered(progress: Callable[[str, int, int], None] | None, start: int, total: int) -> Callable[[int], None]:
    """``progress("requests", start + answered, total)`` as the running batch's requests are answered, and the
    same count for an interruption's message (answered requests are in the response cache: a rerun reuses them)."""

    def report(answered: int) -> None:
        interrupt.progress(start + answered, total, "generation requests")
        if progress is not None:
            progress("requests", start + answered, total)

    return report


def generate_qa(
    chunks: Sequence[Chunk],
    llm: LLM | None,
    cfg: QAGenConfig,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[QAItem], Funnel]:
    """Generate up to ``cfg.n`` deduplicated triplets; ``llm=None`` uses the offline extractive baseline.

    ``progress("triplets", accepted, n)`` is called before every batch of LLM requests and at the end, and
    ``progress("requests", answered, asked at most)`` as the LLM's requests are answered (at most one per
    candidate chunk: fewer when ``n`` triplets are accepted first).
    """
    if cfg.n < 1:
        raise ConfigError(f"$n must be at least 1, got {cfg.n}")
    load_generation_prompt(cfg.prompt_file)  # a bad --prompt file is refused whichever generator runs
    funnel = Funnel(requested=cfg.n, min_chunk_chars=cfg.min_chunk_chars)
    order = sample_chunks(chunks, cfg, funnel)
    if not order:
        filler = f", {funnel.placeholder_chunks} of them placeholder text" if funnel.placeholder_chunks else ""
        raise ConfigError(
            f"no chunk to ask about: none has at least {cfg.min_chunk_chars} characters of text that is not "
            f"placeholder ({len(chunks)} chunks given{filler})"
            if funnel.placeholder_chunks
            else f"no chunk has at least {cfg.min_chunk_chars} characters ({len(chunks)} chunks given)"
        )
    cand = order if llm is None else order[: int(cfg.n * cfg.oversample) + 5]
    funnel.tried_limit = len(cand)
    items: list[QAItem] = []
    seen: set[str] = set()

    def accept(item: QAItem) -> bool:
        key = normalize_answer(item.question)
        if key in seen:
            funnel.duplicates += 1
            return False
        seen.add(key)
        items.append(item)
        funnel.accepted += 1
        return len(items) >= cfg.n

    if llm is None:
        _offline(cand, cfg, funnel, accept)
    else:
        _llm(cand, cfg, funnel, accept, llm, progress)
    if progress is not None:
        progress("triplets", len(items), cfg.n)
    return items, funnel


__all__ = [
    "OFFLINE",
    "Funnel",
    "QAGenConfig",
    "extractive_question",
    "generate_qa",
    "grounding",
    "load_generation_prompt",
    "next_batch",
    "parse_generation",
    "sample_chunks",
]
