"""The stages of ``ragrade run``: each reads earlier stages' files and writes its own (paths in :mod:`.layout`).

A stage is a name, the part of the config its outputs depend on (hashed, with
the hashes of the stages it reads), the files that must exist to reuse it, and
a function. Stages call the public Python APIs of the other areas (corpus,
retrieval, exam, run, irt, robust, qa/judge); nothing is passed in memory
between stages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypedDict

from ragrade.errors import DataError
from ragrade.job.config import JobConfig
from ragrade.job.layout import RunLayout

if TYPE_CHECKING:
    from ragrade.llm.base import LLM
    from ragrade.run.spec import SweepConfig

Progress = Callable[[str, int, int], None]  # (what, done, total)
StageSummary: TypeAlias = dict[str, object]
"""What a stage reports (JSON): shown on its progress line, kept in ``stages.json`` and the job's result."""


class StageExtra(TypedDict, total=False):
    """How the runner treats a stage besides its hash."""

    always: bool  # never reused (the report shows the finished manifest and timings)
    clean: list[Path]  # folders removed before the stage reruns under another hash


@dataclass
class StageContext:
    """What a stage function gets: the config, the run layout and a progress callback."""

    cfg: JobConfig
    layout: RunLayout
    progress: Progress


@dataclass
class Stage:
    """One step of the job."""

    name: str
    key: Mapping[str, object]
    needs: list[str]
    outputs: list[Path]
    run: Callable[[StageContext], StageSummary]
    resumable: bool = False  # keeps its own journal (a rerun after a kill continues where it stopped)
    extra: StageExtra = field(default_factory=lambda: StageExtra())


# --------------------------------------------------------------------------- corpus and chunks


def run_corpus(ctx: StageContext) -> StageSummary:
    """Load or build the documents into ``corpus/docs.jsonl``."""
    from ragrade.corpus.files import write_documents
    from ragrade.corpus.load import LoadReport, left_out_label, load_corpus

    c = ctx.cfg.corpus
    meta: dict[str, object] = {}
    if c.demo:
        from ragrade.corpus.demo import DemoStats, build_demo_corpus

        stats = DemoStats()
        report = LoadReport(documents=build_demo_corpus(c.demo_limit, topics=c.demo_topics, stats=stats))
        meta["demo"] = {
            "modules": stats.modules,
            "import_failures": len(stats.import_failures),
            "limit": c.demo_limit,
            "topics": c.demo_topics,
        }
    else:
        report = load_corpus(c.paths, c.corpus_config())
    summary = report.summary()
    if not report.documents:
        raise DataError(f"no usable document in {', '.join(c.paths) or 'the demo corpus'}")
    write_documents(ctx.layout.docs, report.documents, meta={**meta, "summary": summary})
    topics = {str(d.metadata.get("topic")) for d in report.documents if d.metadata.get("topic") is not None}
    out: StageSummary = {
        "documents": len(report.documents),
        "characters": summary["characters"],
        "skipped": len(report.skipped),
        "topics": len(topics),
    }
    left_out = ", ".join(f"{n:,} {left_out_label(kind)}" for kind, n in summary.get("left_out", {}).items())
    if left_out:
        out["note"] = f"left out {left_out}"  # printed under the stage line (job.progress), kept in stages.json
    return out


def run_chunk(ctx: StageContext, label: str) -> StageSummary:
    """Chunk the documents with chunker ``label`` into ``chunks/<label>.jsonl``."""
    from ragrade.corpus.chunk import chunk_documents, create_chunker, summarize_chunks
    from ragrade.corpus.files import read_documents, write_chunks

    section = ctx.cfg.chunker(label)
    chunker = create_chunker(section.strategy, size=section.size, overlap=section.overlap)
    docs = read_documents(ctx.layout.docs)
    done = [0]

    def tick(n: int) -> None:
        done[0] += n
        ctx.progress(f"chunk {label}", done[0], len(docs))

    chunks = chunk_documents(docs, chunker, progress=tick)
    if not chunks:
        raise DataError(f"chunker {label} produced no chunks")
    summary = summarize_chunks(chunks, n_docs=len(docs))
    write_chunks(ctx.layout.chunks(label), chunks, chunker=chunker, meta={"label": label, "summary": summary})
    return {"chunks": len(chunks), "tokens_mean": summary["tokens"]["mean"]}


def run_index(ctx: StageContext, label: str) -> StageSummary:
    """Index ``chunks/<label>.jsonl`` (BM25 + dense vectors, embeddings cached) into ``index/<label>/``."""
    from ragrade.retrieval.index import build_index

    cfg = ctx.cfg.index.index_config(dense=needs_dense(ctx.cfg))

    def progress(what: str, done: int, total: int) -> None:
        ctx.progress(f"index {label}: {what}", done, total)

    stats = build_index(ctx.layout.chunks(label), ctx.layout.index(label), cfg, progress=progress)
    return {"chunks": stats.chunks, "embedded": stats.embedded, "cached": stats.cached, "seconds": stats.seconds}


def needs_dense(cfg: JobConfig) -> bool:
    """True when a retriever of the sweep (or of an enabled judge) needs dense vectors in the index."""
    dense = ("dense", "hybrid", "rerank")
    return any(r.split("(", 1)[0].strip() in dense or "(" in r for r in cfg.sweep.retrievers) or (
        cfg.judge.enabled and any(r.split("(", 1)[0].strip() in dense for r in cfg.judge.retrievers)
    )


# --------------------------------------------------------------------------- exam


def _create_llm(ctx: StageContext, spec: str) -> LLM:
    from ragrade.llm import create_llm

    return create_llm(spec, ctx.cfg.llm.for_llm(spec))  # the job's [llm_options], shared by its LLMs


def run_exam(ctx: StageContext) -> StageSummary:
    """Generate the exam from one chunking into ``exam/exam.jsonl`` (or copy a given exam)."""
    from ragrade.corpus.files import read_chunks
    from ragrade.exam.files import read_exam, write_exam
    from ragrade.exam.generate import generate_exam_full, write_exam_result

    e = ctx.cfg.exam
    if e.path is not None:
        header, questions = read_exam(e.path)
        write_exam(ctx.layout.exam, questions, meta={**(header.meta if header else {}), "copied_from": e.path})
        return {"questions": len(questions), "source": e.path}
    label = ctx.cfg.chunker(e.chunker).label
    chunks = read_chunks(ctx.layout.chunks(label))
    cfg = e.exam_config()  # [exam] is an `exam generate` config plus the job's own keys
    llm = None if e.llm == "offline" else _create_llm(ctx, e.llm)

    def progress(done: int, target: int, valid: int) -> None:
        ctx.progress(f"exam ({valid} valid)", done, max(target, 1))

    result = generate_exam_full(chunks, llm, cfg, progress=progress)
    from ragrade.llm.failures import exam_request_tally

    tally = exam_request_tally(result, llm)
    if not result.questions and tally.n_failed:
        tally.check("rerun `ragrade run`: received questions come from the response cache", 0.0)
    if not result.questions:
        raise DataError(f"the exam generator kept no question out of {result.funnel.get('generated', 0)} candidates")
    write_exam_result(ctx.layout.exam, result, cfg, input_path=str(ctx.layout.chunks(label)))
    tally.check("rerun `ragrade run`: received questions come from the response cache", None, what="generation")
    summary: StageSummary = {
        "questions": len(result.questions),
        "generated": result.funnel.get("generated"),
        "chunker": label,
    }
    warning = exam_shortfall(result.funnel)
    if warning is not None:
        summary["warning"] = warning  # printed under the stage's line (job.progress), kept in stages.json
    return summary


def exam_shortfall(funnel: Mapping[str, object]) -> str | None:
    """Why the exam has fewer questions than requested, with counts per reason (from its funnel); None if not."""
    requested, kept = funnel.get("requested"), funnel.get("kept")
    if not isinstance(requested, int) or not isinstance(kept, int) or kept >= requested:
        return None
    got_chunks, got_reasons = funnel.get("chunks"), funnel.get("reasons")
    ch: Mapping[str, object] = got_chunks if isinstance(got_chunks, dict) else {}
    reasons: Mapping[str, object] = got_reasons if isinstance(got_reasons, dict) else {}
    lost = sorted(
        ((str(k), v) for k, v in reasons.items() if not str(k).startswith("surplus") and isinstance(v, int) and v),
        key=lambda kv: (-kv[1], kv[0]),
    )
    eligible, asked = ch.get("eligible"), ch.get("asked", funnel.get("generated", "?"))
    rounds = funnel.get("rounds", "?")
    exhausted = isinstance(eligible, int) and isinstance(asked, int) and asked >= eligible
    hint = (
        "every eligible chunk was asked: a larger corpus, or a lower [exam] n"
        if exhausted
        else "raise `max_rounds` or `oversample` in [exam], or lower [exam] n"
    )
    return (
        f"{kept} of {requested} requested questions ({asked} of {eligible if eligible is not None else '?'} "
        f"eligible chunks asked in {rounds} round{'' if rounds == 1 else 's'}, of {ch.get('total', '?')} chunks); "
        "candidates removed: " + (", ".join(f"{k} {v}" for k, v in lost) or "none") + f" ({hint})"
    )


# --------------------------------------------------------------------------- sweep


def sweep_config(cfg: JobConfig, layout: RunLayout) -> SweepConfig:
    """The :class:`~ragrade.run.spec.SweepConfig` of the job (``[sweep]`` is a sweep file's grid and settings)."""
    from ragrade.run.spec import build_sweep_config

    s = cfg.sweep
    grid = s.grid([c.label for c in cfg.chunkers])  # [sweep] holds a sweep file's [grid], same keys
    labels = grid.chunkers or []
    layer = {
        "grid": grid.model_dump(),
        **s.run_settings().model_dump(),
        "indexes": {label: str(layout.index(label).resolve()) for label in labels},
        "llm_options": cfg.llm,  # the job's [llm_options], the object itself
    }
    return build_sweep_config(layer)


def run_sweep_stage(ctx: StageContext) -> StageSummary:
    """Every pipeline takes the exam (resumable through the sweep's journal); then the paired verdicts."""
    from ragrade.run.compare import COMPARISONS_FILE, verdicts, write_comparisons
    from ragrade.run.store import JournalMismatch
    from ragrade.run.sweep import run_sweep

    cfg = sweep_config(ctx.cfg, ctx.layout)
    totals: dict[str, int] = {}
    done: dict[str, int] = {}

    def progress(pipeline: str, n: int, total: int) -> None:
        totals.setdefault(pipeline, total)
        done[pipeline] = done.get(pipeline, 0) + n
        ctx.progress("sweep", sum(done.values()), sum(totals.values()))

    try:
        result = run_sweep(ctx.layout.exam, cfg, ctx.layout.sweep, progress=progress)
    except JournalMismatch:  # the sweep's journal holds answers to another exam or other settings
        totals.clear()
        done.clear()
        result = run_sweep(ctx.layout.exam, cfg, ctx.layout.sweep, progress=progress, overwrite=True)
    from ragrade.llm.failures import check_grid_failures

    check_grid_failures(result.responses, None)  # too many failed requests: the stage fails, a rerun resumes
    comps = verdicts(ctx.layout.sweep, top=ctx.cfg.sweep.top, seed=ctx.cfg.sweep.seed)
    write_comparisons(ctx.layout.sweep / COMPARISONS_FILE, comps, responses=ctx.layout.sweep / "responses.parquet")
    from ragrade.report.headline import best_pipelines

    return {
        "pipelines": len(result.pipelines),
        "questions": result.n_questions,
        "new_rows": result.n_new_rows,
        **best_pipelines(result.summary),  # the best real pipeline, as the report names it; the oracle as the bound
    }


# --------------------------------------------------------------------------- report


def run_report(ctx: StageContext) -> StageSummary:
    """Render ``report.html`` from the run directory's files."""
    from ragrade.report.render import write_report

    path = write_report(ctx.layout.root, ctx.layout.report, top=ctx.cfg.report.top, title=ctx.cfg.report.title)
    return {"report": str(path), "bytes": path.stat().st_size}


__all__ = [
    "Progress",
    "Stage",
    "StageContext",
    "StageExtra",
    "StageSummary",
    "needs_dense",
    "run_chunk",
    "run_corpus",
    "run_exam",
    "run_index",
    "run_report",
    "run_sweep_stage",
    "sweep_config",
]
