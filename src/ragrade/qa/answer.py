"""Free-text answers from pipeline variants, on the exam sweep's grid, runner and run-directory conventions.

The pipelines are the sweep's (:class:`ragrade.run.spec.PipelineSpec`: LLM x
retriever x k x ICL x chunker x prompt, grid or explicit list); the
resumable journal, executors (local or Ray) and manifest are the sweep's
(:func:`ragrade.run.sweep.run_resumable`). Only the worker differs: it asks
for a free-text answer instead of a letter. Run directory::

    manifest.json      kind "qa-answer": config, pipelines, QA file fingerprint, software
    journal.sqlite     resume state (shared format with the exam sweep)
    answers.jsonl      one record per pipeline x question (kind "qa_answers"), ready for `ragrade judge`
    summary.csv        per pipeline: answers, errors, refusals, retrieval hit rate and
                       exact match / token F1 against the reference, with 95% intervals

ICL@n puts n held-out (question, reference answer) pairs before the question.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ragrade.errors import ConfigError
from ragrade.exam.files import Question
from ragrade.io import write_jsonl
from ragrade.outcome import Outcome
from ragrade.qa.files import QAItem, read_qa
from ragrade.run.pipeline import Contexts, Resources, cached_resources
from ragrade.run.records import Row, WorkerContext
from ragrade.run.spec import PipelineSpec, SweepConfig

QA_WORKER = "ragrade.qa.answer:qa_shard"
ANSWERS_FILE = "answers.jsonl"
ANSWERS_KIND = "qa_answers"
ANSWERS_VERSION = 1
SUMMARY_FILE = "summary.csv"

_SYSTEM = (
    "You answer questions about a document collection. Use only the numbered passages when they are given; "
    "if they do not contain the answer, say so in one sentence instead of guessing. Keep the answer short."
)
_USER = "{examples}{context}Question: {question}\nAnswer:"


def to_question(item: QAItem) -> Question:
    """The exam-style view of a QA item that the sweep's retrieval code reads (no choices)."""
    topic = item.metadata.get("topic")
    return Question(
        id=item.id,
        question=item.question,
        choices=[],
        answer=-1,
        doc_id=item.doc_id,
        chunk_id=item.chunk_id,
        source=item.source,
        tags={"topic": topic},
        context=item.reference_context,
        span=item.doc_span,
    )


class QAResources(Resources):
    """The sweep's worker resources over the QA file ``context["qa"]`` instead of an exam."""

    source = "the QA file"

    def __init__(self, context: WorkerContext) -> None:
        _, items = read_qa(context["qa"])
        self.items: dict[str, QAItem] = {it.id: it for it in items}
        super().__init__(context, questions=[to_question(it) for it in items])

    def qa_template(self, name: str) -> str:
        """The user-message template ``name`` (``default`` or a file with ``{question}``)."""
        if name == "default":
            return _USER
        path = self.context.get("prompts", {}).get(name)
        if path is None:
            raise ConfigError(f"prompt '{name}' is not defined")
        text = Path(path).read_text(encoding="utf-8")
        if "{question}" not in text:
            raise ConfigError(f"QA prompt {path} lacks the placeholder {{question}}")
        return text


def qa_resources_for(context: WorkerContext) -> QAResources:
    """One :class:`QAResources` per context and process."""
    return cached_resources(QAResources, context)


def build_prompt(template: str, item: QAItem, ctx: Contexts, examples: Sequence[QAItem]) -> str:
    """Fill the QA template: few-shot pairs, numbered passages, the question."""
    ex = "".join(f"Question: {e.question}\nAnswer: {e.reference}\n\n" for e in examples)
    ctx_text = "".join(f"[{i}] {p.strip()}\n\n" for i, p in enumerate(ctx.passages, start=1))
    values = {
        "{examples}": f"Examples:\n\n{ex}" if ex else "",
        "{context}": f"Passages:\n{ctx_text}" if ctx_text else "",
        "{question}": item.question,
    }
    out = template
    for k, v in values.items():
        out = out.replace(k, v)
    return out


def _row(item: QAItem, spec: PipelineSpec, ctx: Contexts) -> Row:
    factors = spec.factors()
    factors["query_transform"] = factors.pop("query")  # "query" is the question (the judge's field name)
    return {
        "item_id": item.id,
        "id": item.id,
        "pipeline": spec.id,
        **factors,
        "query": item.question,
        "reference": item.reference,
        "answer": None,
        "contexts": list(ctx.passages),
        "retrieved": list(ctx.chunk_ids),
        "retrieved_docs": list(ctx.doc_ids),
        "gold_chunk_retrieved": (item.chunk_id in ctx.chunk_ids) if spec.retrieves else None,
        "gold_doc_retrieved": (item.doc_id in ctx.doc_ids) if spec.retrieves else None,
        "method": None,
        **ctx.row_columns(),
        "topic": item.metadata.get("topic"),
    }


async def qa_shard(context: WorkerContext, spec: Mapping[str, object], items: Sequence[str]) -> list[Row]:
    """The worker: free-text answers for ``items`` (QA ids) under pipeline ``spec``."""
    from ragrade.llm.base import GenerationRequest, Message

    res = qa_resources_for(context)
    pipe = PipelineSpec.model_validate(spec)
    questions = res.select(items)
    qa = [res.items[i] for i in items]
    ctxs = await res.contexts(pipe, questions)
    rows = [_row(it, pipe, c) for it, c in zip(qa, ctxs, strict=True)]
    pending: list[int] = []
    for i, c in enumerate(ctxs):
        ext = c.external
        if ext is not None and ext.answer_raw is not None:
            rows[i].update(
                answer=ext.answer_raw,
                method="external",
                latency_s=float(ext.latency_s),
                error=ext.error if ext.error and not ext.error.startswith("answer ") else None,
            )
        elif rows[i]["error"] is None:
            pending.append(i)
    if not pending:
        return rows
    if not pipe.has_llm:
        for i in pending:
            rows[i]["error"] = "the pipeline has no LLM and gave no answer"
        return rows
    llm = res.llm(pipe.llm)
    template = res.qa_template(pipe.prompt)
    opts = context.get("generation", {})
    reqs = []
    for i in pending:
        examples = [res.items[q.id] for q in res.examples(qa[i].id, pipe.icl)]
        reqs.append(
            GenerationRequest(
                messages=(
                    Message("system", _SYSTEM),
                    Message("user", build_prompt(template, qa[i], ctxs[i], examples)),
                ),
                temperature=float(opts.get("temperature", 0.0) if pipe.temperature is None else pipe.temperature),
                max_tokens=int(opts.get("max_tokens", 256) if pipe.max_tokens is None else pipe.max_tokens),
                seed=int(context.get("seed", 0)),
                question=qa[i].question,
                passages=tuple(ctxs[i].passages),
                task="answer",
            )
        )
    start = time.perf_counter()
    comps = await llm.agenerate(reqs)
    wall = time.perf_counter() - start
    for i, comp in zip(pending, comps, strict=True):
        outcome = Outcome.of(comp)  # a failed request has no answer: missing, never a wrong one
        rows[i].update(
            method="generate",
            answer=outcome.value,
            error=outcome.error,
            latency_s=float(comp.latency_s or wall / max(1, len(reqs))),
            prompt_tokens=comp.usage.prompt_tokens,
            completion_tokens=comp.usage.completion_tokens,
            cached=bool(comp.cached),
        )
    return rows


def answers_records(rows: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Journal rows as ``answers.jsonl`` records (the judge's default field names), minus volatile columns."""
    drop = {"item_id", "latency_s", "cached"}
    return [{k: v for k, v in r.items() if k not in drop} for r in rows]


def write_answers(path: str | Path, rows: Sequence[Mapping[str, object]], meta: Mapping[str, object]) -> int:
    """Write ``answers.jsonl`` atomically."""
    return write_jsonl(path, answers_records(rows), kind=ANSWERS_KIND, version=ANSWERS_VERSION, meta=meta)


def check_config(cfg: SweepConfig) -> None:
    """QA answers are generated: the log-likelihood method does not apply."""
    if cfg.pipelines is not None:
        methods = {p.method for p in cfg.pipelines}
    else:
        methods = set(cfg.grid.methods)
    if "loglikelihood" in methods:
        raise ConfigError("free-text answers are generated; method 'loglikelihood' applies only to exams")


__all__ = [
    "ANSWERS_FILE",
    "ANSWERS_KIND",
    "QA_WORKER",
    "QAResources",
    "build_prompt",
    "check_config",
    "qa_resources_for",
    "qa_shard",
    "to_question",
    "write_answers",
]
