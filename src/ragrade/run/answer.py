"""Answering multiple-choice questions: log-likelihood scoring or letter generation, one row per question.

:func:`exam_shard` is the worker of the exam sweep (``"ragrade.run.answer:exam_shard"``):
it takes a context, a pipeline spec and question ids, fetches passages,
builds prompts with few-shot examples and answers:

- by **log-likelihood** when the LLM supports it: every candidate is scored;
  the raw sum, per-token and per-character normalisations are all recorded
  and ``answer.score`` picks the one that decides ``chosen`` (``auto``: per
  character for token log-probabilities, the raw score for baselines whose
  scores are already normalised over the candidates);
- else by **generating a letter** and parsing it; an unparseable reply is a
  parse failure (``chosen = -1``, counted wrong, flagged ``parse_failed``).

Failed requests (and failed retrievals or external systems) give an ``error``
and ``chosen = correct = None``: they are *missing*, never wrong; counted, never
dropped, and the journal re-asks them on a rerun.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragrade.errors import ConfigError
from ragrade.exam.files import LETTERS, Question
from ragrade.outcome import Outcome
from ragrade.run.pipeline import Contexts, Resources, resources_for
from ragrade.run.prompts import render_prompt
from ragrade.run.records import Row, Sample, WorkerContext
from ragrade.run.samples import SAMPLE_KEY
from ragrade.run.spec import AnswerConfig, PipelineSpec

if TYPE_CHECKING:
    from ragrade.llm.base import LLM, Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult

EXAM_WORKER = "ragrade.run.answer:exam_shard"

_LEAD = re.compile(r"^\s*[\(\[\*]*\s*([A-Da-d])\s*[\)\]\.\:,\*]*(?:\s|$)")
_STATED = re.compile(r"(?:answer|option|choice)\s*(?:is|:)?\s*[\(\[\*]*\s*([A-D])\b", re.IGNORECASE)
_HEDGE = re.compile(r"^\s*(?:or|and|/)\s*\(?[A-Da-d]\b", re.IGNORECASE)
_LONE = re.compile(r"(?<![A-Za-z])([A-D])(?![A-Za-z])")


def parse_letter(text: str | None, choices: Sequence[str]) -> int | None:
    """The choice index a free-text reply names, or None when it names none or several.

    Accepts a leading letter (``B``, ``(B)``, ``B.``, ``b)``), a stated answer
    (``the answer is C``), a single standalone capital letter, or the exact text
    of exactly one choice.
    """
    if not text:
        return None
    n = len(choices)
    m = _LEAD.match(text)
    if m and _HEDGE.match(text[m.end() :]):  # "A or B": names two options
        return None
    if m and LETTERS.index(m.group(1).upper()) < n:
        return LETTERS.index(m.group(1).upper())
    m = _STATED.search(text)
    if m and LETTERS.index(m.group(1).upper()) < n:
        return LETTERS.index(m.group(1).upper())
    lone = {x for x in _LONE.findall(text) if LETTERS.index(x) < n}
    if len(lone) == 1:
        return LETTERS.index(lone.pop())
    low = text.strip().lower()
    hits = [i for i, c in enumerate(choices) if c.strip() and c.strip().lower() in low]
    if len(hits) == 1:
        return hits[0]
    return None


def normalise_scores(
    logprobs: Sequence[float], token_counts: Sequence[int] | None, choices: Sequence[str]
) -> dict[str, list[float]]:
    """Raw sums, per-token and per-character normalised log-likelihoods of each candidate."""
    tcs = list(token_counts) if token_counts else [0] * len(logprobs)
    return {
        "sum": [float(x) for x in logprobs],
        "per_token": [float(x) / t if t > 0 else float("nan") for x, t in zip(logprobs, tcs, strict=True)],
        "per_char": [float(x) / max(1, len(c.strip())) for x, c in zip(logprobs, choices, strict=True)],
    }


def argmax(values: Sequence[float]) -> int:
    """Index of the largest finite value (lowest index on ties); -1 when none is finite."""
    best, best_i = -math.inf, -1
    for i, v in enumerate(values):
        if not math.isnan(v) and v > best:
            best, best_i = v, i
    return best_i


def base_row(q: Question, spec: PipelineSpec, ctx: Contexts) -> Row:
    """The columns every row has, filled with 'no answer' values."""
    tags = q.tags or {}
    bloom = tags.get("bloom") or []
    return {
        "item_id": q.id,
        "question_id": q.id,
        "pipeline": spec.id,
        **spec.factors(),
        "method": None,
        "chosen": -1,
        "answer": q.answer,
        "correct": 0,
        "score_norm": None,
        "ll_source": None,
        "scores": None,
        "ll_sum": None,
        "ll_per_token": None,
        "ll_per_char": None,
        "retrieved": list(ctx.chunk_ids),
        "retrieved_docs": list(ctx.doc_ids),
        "gold_doc_retrieved": (q.doc_id in ctx.doc_ids) if spec.retrieves else None,
        "output": None,
        "parse_failed": False,
        **ctx.row_columns(),
        "topic": None if tags.get("topic") is None else str(tags.get("topic")),
        "bloom": ",".join(str(b) for b in bloom) if isinstance(bloom, list) else str(bloom),
        "qword": None if tags.get("qword") is None else str(tags.get("qword")),
    }


def _decide(row: Row, chosen: int, q: Question) -> None:
    row["chosen"] = chosen
    row["correct"] = int(chosen == q.answer)


@dataclass(frozen=True)
class _Pending:
    """The questions a pipeline still answers in a shard: their passages and rows (filled in place)."""

    res: Resources
    spec: PipelineSpec
    cfg: AnswerConfig
    qs: Sequence[Question]
    ctxs: Sequence[Contexts]
    rows: list[Row]
    samples: bool

    def prompts(self, *, gen: bool) -> list[tuple[int, Question, str, str]]:
        """(row index, question, system, user) of every row still to answer (no retrieval error), rendered with
        the pipeline's prompt."""
        tpl = self.res.template(self.spec.prompt)
        out = []
        for i, r in enumerate(self.rows):
            if r["error"] is None:
                q, passages, icl = self.qs[i], self.ctxs[i].passages, self.res.examples(self.qs[i].id, self.spec.icl)
                out.append((i, q, *render_prompt(tpl, q, passages, icl, for_generation=gen)))
        return out


def _continuations(q: Question, cfg: AnswerConfig) -> tuple[str, ...]:
    """The scored continuations of ``q``: each choice's letter (``target = "letter"``) or its text, after a space."""
    if cfg.target == "letter":
        return tuple(f" {LETTERS[j]}" for j in range(len(q.choices)))
    return tuple(f" {c}" for c in q.choices)


def candidate_texts(q: Question, cfg: AnswerConfig, method: str) -> list[str]:
    """The candidates an LLM sees for ``q`` under ``method``: the choices, or the stripped continuations."""
    if method == "loglikelihood":
        return [c.strip() for c in _continuations(q, cfg)]
    return list(q.choices)


def answer_method(llm: LLM, spec: PipelineSpec) -> str:
    """``spec.method`` with ``auto`` resolved for ``llm`` (ConfigError when ``llm`` cannot score log-likelihoods)."""
    method = spec.method
    supports = bool(getattr(llm, "supports_loglikelihood", False))
    if method == "auto":
        return "loglikelihood" if supports else "generate"
    if method == "loglikelihood" and not supports:
        raise ConfigError(f"LLM '{spec.llm}' cannot score log-likelihoods; use method 'generate' or 'auto'")
    return method


async def _by_loglikelihood(llm: LLM, todo: _Pending) -> None:
    from ragrade.llm.base import LoglikelihoodRequest

    spec, cfg, rows = todo.spec, todo.cfg, todo.rows
    prompts = todo.prompts(gen=False)
    reqs = [
        LoglikelihoodRequest(
            context=f"{system}\n\n{user}",
            continuations=_continuations(q, cfg),
            question=q.question,
            passages=tuple(todo.ctxs[i].passages),
            meta={"question_id": q.id, "pipeline": spec.id},
        )
        for i, q, system, user in prompts
    ]
    t0 = time.perf_counter()
    results = await llm.aloglikelihood(reqs) if reqs else []
    wall = time.perf_counter() - t0
    for (i, q, _, _), req, out in zip(prompts, reqs, results, strict=True):
        row = rows[i]
        row["method"] = "loglikelihood"
        row["ll_source"] = getattr(out, "method", None)
        row["latency_s"] = float(out.latency_s or wall / max(1, len(reqs)))
        row["cached"] = bool(out.cached)
        row["prompt_tokens"] = int(getattr(out, "prompt_tokens", 0) or 0)
        if todo.samples:
            row[SAMPLE_KEY] = loglikelihood_sample(spec, q.id, req, out)
        if not out.ok or out.logprobs is None or len(out.logprobs) != len(q.choices):
            row["error"] = out.error or "the backend returned no scores for every candidate"
            continue
        targets = [LETTERS[j] for j in range(len(q.choices))] if cfg.target == "letter" else q.choices
        norms = normalise_scores(out.logprobs, out.token_counts, targets)
        row["ll_sum"], row["ll_per_token"], row["ll_per_char"] = norms["sum"], norms["per_token"], norms["per_char"]
        norm = cfg.score
        if norm == "auto":
            norm = "sum" if getattr(out, "method", None) == "baseline" else "per_char"
        row["score_norm"] = norm
        row["scores"] = norms[norm]
        row["completion_tokens"] = int(sum(out.token_counts or []))
        _decide(row, argmax(norms[norm]), q)


async def _by_generation(llm: LLM, todo: _Pending) -> None:
    from ragrade.llm.base import GenerationRequest, Message

    spec, cfg, rows = todo.spec, todo.cfg, todo.rows
    prompts = todo.prompts(gen=True)
    reqs = [
        GenerationRequest(
            messages=(Message("system", system), Message("user", user)),
            temperature=cfg.temperature if spec.temperature is None else spec.temperature,
            max_tokens=cfg.max_tokens if spec.max_tokens is None else spec.max_tokens,
            seed=todo.res.seed,
            question=q.question,
            passages=tuple(todo.ctxs[i].passages),
            choices=tuple(q.choices),
            task="mcq",
            meta={"question_id": q.id, "pipeline": spec.id},
        )
        for i, q, system, user in prompts
    ]
    results = await llm.agenerate(reqs) if reqs else []
    for (i, q, _, _), req, out in zip(prompts, reqs, results, strict=True):
        row = rows[i]
        row["method"] = "generate"
        row["latency_s"] = float(out.latency_s)
        row["cached"] = bool(out.cached)
        row["prompt_tokens"] = int(out.usage.prompt_tokens)
        row["completion_tokens"] = int(out.usage.completion_tokens)
        if todo.samples:
            row[SAMPLE_KEY] = generation_sample(spec, q.id, req, out)
        outcome = Outcome.of(out)  # a failed request is missing, never a wrong letter
        if outcome.value is None:
            row["error"] = out.error or "the backend returned no text"
            continue
        row["output"] = outcome.value
        chosen = parse_letter(outcome.value, q.choices)
        if chosen is None:
            row["parse_failed"] = True
        else:
            _decide(row, chosen, q)


def _sample(spec: PipelineSpec, item: str, method: str, request: Sample, response: Sample) -> Sample:
    """A samples.jsonl line: the pipeline, item and LLM, the method, the request sent and the raw reply."""
    return {"pipeline": spec.id, "item_id": item, "llm": spec.llm, "method": method, "request": request,
            "response": response}  # fmt: skip


def loglikelihood_sample(spec: PipelineSpec, item: str, req: LoglikelihoodRequest, out: LoglikelihoodResult) -> Sample:
    """The samples.jsonl line of one log-likelihood request: the context and continuations, the raw scores."""
    request: Sample = {"context": req.context, "continuations": list(req.continuations)}
    response: Sample = {
        "logprobs": out.logprobs,
        "token_counts": out.token_counts,
        "ll_source": getattr(out, "method", None),
        "prompt_tokens": int(getattr(out, "prompt_tokens", 0) or 0),
        "cached": bool(out.cached),
        "error": out.error,
    }
    return _sample(spec, item, "loglikelihood", request, response)


def generation_sample(spec: PipelineSpec, item: str, req: GenerationRequest, out: Completion) -> Sample:
    """The samples.jsonl line of one generation request: the chat messages and settings, the raw reply."""
    request: Sample = {
        "messages": [{"role": m.role, "content": m.content} for m in req.messages or ()],
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "seed": req.seed,
    }
    response: Sample = {
        "text": out.text,
        "finish_reason": out.finish_reason,
        "prompt_tokens": int(out.usage.prompt_tokens),
        "completion_tokens": int(out.usage.completion_tokens),
        "cached": bool(out.cached),
        "error": out.error,
    }
    return _sample(spec, item, "generate", request, response)


def _apply_external(rows: list[Row], qs: Sequence[Question], ctxs: Sequence[Contexts]) -> list[int]:
    """Fill rows the external system answered itself; returns the indices still to answer with the LLM."""
    rest = []
    for i, (row, q, ctx) in enumerate(zip(rows, qs, ctxs, strict=True)):
        ext = ctx.external
        if ext is None or ext.error is not None:
            rest.append(i)
            continue
        row["latency_s"] = float(ext.latency_s)
        if ext.answer is None:
            rest.append(i)
            continue
        row["method"] = "external"
        row["output"] = ext.answer_raw
        if ext.scores is not None:
            row["scores"], row["score_norm"] = ext.scores, "external"
        _decide(row, ext.answer, q)
    return rest


def mark_missing(rows: Sequence[Row]) -> None:
    """Rows with an ``error`` have no answer: ``chosen`` and ``correct`` become None (missing, not wrong)."""
    for row in rows:
        if row.get("error") is not None:
            row["chosen"] = None
            row["correct"] = None


async def answer_questions(
    res: Resources, spec: PipelineSpec, cfg: AnswerConfig, qs: Sequence[Question], *, samples: bool = False
) -> list[Row]:
    """Rows for ``qs`` answered by ``spec`` (one per question, in order); failures are missing (see module).

    With ``samples`` each row that sent an LLM request carries what was sent and received under
    :data:`~ragrade.run.samples.SAMPLE_KEY` (the runner moves it to samples.jsonl).
    """
    rows = await _answer_questions(res, spec, cfg, qs, samples)
    mark_missing(rows)
    return rows


async def _answer_questions(
    res: Resources, spec: PipelineSpec, cfg: AnswerConfig, qs: Sequence[Question], samples: bool
) -> list[Row]:
    replay = spec.llm.startswith("replay/")  # answers from a finished run: retrieving would change nothing
    ctxs = [Contexts() for _ in qs] if replay else await res.contexts(spec, qs)
    rows = [base_row(q, spec, c) for q, c in zip(qs, ctxs, strict=True)]
    if replay:
        for row in rows:
            row["gold_doc_retrieved"] = None
    pending = _apply_external(rows, qs, ctxs) if spec.is_external else list(range(len(qs)))
    if not pending:
        return rows
    if not spec.has_llm:
        for i in pending:
            if rows[i]["error"] is None:
                rows[i]["error"] = "the external system gave no answer and the pipeline has no LLM"
        return rows
    llm = res.llm(spec.llm)
    method = answer_method(llm, spec)
    todo = _Pending(
        res, spec, cfg, [qs[i] for i in pending], [ctxs[i] for i in pending], [rows[i] for i in pending], samples
    )
    await (_by_loglikelihood if method == "loglikelihood" else _by_generation)(llm, todo)
    return rows


async def exam_shard(context: WorkerContext, spec: Mapping[str, object], items: Sequence[str]) -> list[Row]:
    """The sweep worker: answer ``items`` (question ids) with pipeline ``spec`` under ``context``."""
    res = resources_for(context)
    pipe = PipelineSpec.model_validate(spec)
    cfg = AnswerConfig.model_validate(context.get("answer", {}))
    return await answer_questions(res, pipe, cfg, res.select(items), samples=bool(context.get("samples")))


__all__ = [
    "EXAM_WORKER",
    "answer_method",
    "answer_questions",
    "argmax",
    "base_row",
    "candidate_texts",
    "exam_shard",
    "generation_sample",
    "loglikelihood_sample",
    "normalise_scores",
    "parse_letter",
]
