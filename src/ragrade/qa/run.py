"""``ragrade qa answer``: every pipeline answers every QA question in free text, resumably.

Builds its set-up as the exam sweep does (:func:`ragrade.run.setup.grid_setup`: the pipeline grid,
the ICL hold-out, the worker context, the manifest's common part and the resume fingerprint) and
runs it with the sweep's resumable journal runner and executors (:func:`ragrade.run.sweep.run_grid`);
see :mod:`ragrade.qa.answer` for the worker and the files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragrade.journal import JOURNAL_FILES
from ragrade.outcome import Outcome, count_failed
from ragrade.provenance import digest
from ragrade.qa.answer import ANSWERS_FILE, QA_WORKER, SUMMARY_FILE, check_config, write_answers
from ragrade.qa.files import read_qa
from ragrade.run.manifest import MANIFEST_FILE
from ragrade.run.records import Row

if TYPE_CHECKING:
    from ragrade.run.executors import Executor
    from ragrade.run.spec import PipelineSpec, SweepConfig

ProgressFn = Callable[[str, int, int], None]
SUMMARY_COLUMNS = (
    "schema_version",
    "pipeline",
    "llm",
    "retriever",
    "k",
    "icl",
    "chunker",
    "prompt",
    "query_transform",
    "post",
    "temperature",
    "max_tokens",
    "n",
    "n_answered",
    "n_errors",
    "n_transform_failures",
    "n_refusals",
    "hit_rate",
    "hit_low",
    "hit_high",
    "exact",
    "exact_low",
    "exact_high",
    "token_f1",
    "token_f1_low",
    "token_f1_high",
)


@dataclass
class QAAnswerResult:
    """What a finished ``qa answer`` run produced."""

    run_dir: Path
    pipelines: list[str]
    n_questions: int
    n_new_rows: int
    summary: list[dict[str, object]]
    rows: list[Row]
    warnings: list[str] = field(default_factory=list)  # e.g. an index that lacks the QA file's passages


def row_outcome(row: Mapping[str, object]) -> Outcome:
    """What one answer row came to: a failure (its error) or an answer (``None``: empty, a wrong answer)."""
    if row.get("error"):
        return Outcome.failure(str(row["error"]))
    answer = row.get("answer")
    return Outcome.answer(answer if isinstance(answer, str) else None)


def summarise_answers(rows: Sequence[Mapping[str, object]], order: Sequence[str]) -> list[dict[str, object]]:
    """Per pipeline: counts, gold-chunk hit rate (Wilson) and EM / token F1 against the reference (intervals)."""
    from ragrade.judge.lexical import best_over_references
    from ragrade.llm.phrases import REJECTION_SENTENCE
    from ragrade.stats import bootstrap_ci, wilson_interval

    out = []
    for pid in order:
        rs = [r for r in rows if r["pipeline"] == pid]
        outcomes = [row_outcome(r) for r in rs]
        answered = [(r, o.value) for r, o in zip(rs, outcomes, strict=True) if o.ok and o.value is not None]
        hits = [bool(r["gold_chunk_retrieved"]) for r in rs if r.get("gold_chunk_retrieved") is not None]
        scored = [best_over_references(text, [str(r["reference"])]) for r, text in answered if r.get("reference")]
        # a failed request is missing, never wrong: EM and F1 are over the answered questions (n_answered);
        # an empty answer (no failure) still counts as a wrong one
        n_empty = sum(1 for r, o in zip(rs, outcomes, strict=True) if r.get("reference") and o.ok and o.value is None)
        em = [float(e) for e, _ in scored] + [0.0] * n_empty
        f1 = [f for _, f in scored] + [0.0] * n_empty
        first = rs[0] if rs else {}
        row: dict[str, object] = {
            **dict.fromkeys(SUMMARY_COLUMNS),
            "schema_version": 1,
            "pipeline": pid,
            **{
                k: first.get(k)
                for k in ("llm", "retriever", "k", "icl", "chunker", "prompt", "query_transform", "post")
            },
            **{k: first.get(k) for k in ("temperature", "max_tokens")},
            "n": len(rs),
            "n_answered": len(answered),
            "n_errors": count_failed(outcomes),
            "n_transform_failures": sum(1 for r in rs if r.get("transform_error")),
            "n_refusals": sum(1 for _, text in answered if REJECTION_SENTENCE in text),
        }
        if hits:
            row["hit_rate"] = sum(hits) / len(hits)
            row["hit_low"], row["hit_high"] = wilson_interval(sum(hits), len(hits))
        if em:
            row["exact"] = sum(em) / len(em)
            row["exact_low"], row["exact_high"] = wilson_interval(int(sum(em)), len(em))
            row["token_f1"] = sum(f1) / len(f1)
            if len(f1) > 1:
                row["token_f1_low"], row["token_f1_high"] = bootstrap_ci(f1, seed=0)
        out.append(row)
    return out


def run_qa_answers(
    qa_path: str | Path,
    cfg: SweepConfig,
    out_dir: str | Path,
    *,
    generation: Mapping[str, float] | None = None,
    progress: ProgressFn | None = None,
    executor: Executor | None = None,
    overwrite: bool = False,
) -> QAAnswerResult:
    """Run (or resume) free-text answering of the QA file by every pipeline of ``cfg`` (a SweepConfig).

    A rerun on the same folder resumes, extends (more pipelines or items) or is refused naming each difference
    (:mod:`ragrade.provenance`); ``overwrite`` discards what the folder holds first."""
    from ragrade.qa.answer import qa_resources_for
    from ragrade.run.grid import GridJob, executor_for, prepare_grid, run_grid
    from ragrade.run.manifest import write_manifest
    from ragrade.run.records import WorkerContext
    from ragrade.run.setup import GridInput, grid_setup
    from ragrade.run.spec import expand_pipelines
    from ragrade.run.summary import write_csv_rows
    from ragrade.runlock import run_lock

    qa_path = Path(qa_path)
    run_dir = Path(out_dir)
    check_config(cfg)
    _, items = read_qa(qa_path)
    gen = {"max_tokens": 256, "temperature": 0.0, **dict(generation or {})}
    exe = executor or executor_for(cfg)
    specs = expand_pipelines(cfg)
    setup = grid_setup(
        "qa-answer",
        GridInput("qa", qa_path, [it.id for it in items]),
        cfg,
        settings=WorkerContext(generation=gen),
        executor=exe,
        digest_prompts=False,  # QA templates are plain text files, named in the context (their paths)
        specs=specs,
        components=_components(cfg, specs),
    )
    ids, context = setup.items, setup.context
    manifest = setup.manifest
    # every component before anything is written; an in-process model gets its batches as exam take's does
    prepare_grid(exe, qa_resources_for(context), specs, cfg, len(ids), manifest)
    manifest["generation"] = gen
    manifest["outputs"] = {ANSWERS_FILE: {"version": 1}, SUMMARY_FILE: {"version": 1}}
    job = GridJob(QA_WORKER, context, setup.worker_specs, ids, setup.provenance, journal_specs=setup.journal_specs)
    from ragrade.run.exit_status import recorded_exit

    of = len(setup.order) * len(ids)
    with run_lock(run_dir), recorded_exit(run_dir, manifest, setup.order, ids, files=False, of=of):
        if overwrite:
            for name in (*QA_OUTPUT_FILES, ANSWERS_FILE, SUMMARY_FILE):
                (run_dir / name).unlink(missing_ok=True)
        rows, added = run_grid(run_dir, job, exe, manifest, shard_size=cfg.shard_size, progress=progress)
        order = setup.order
        write_answers(run_dir / ANSWERS_FILE, rows, meta={"qa": str(qa_path), "provenance": digest(setup.provenance)})
        summary = summarise_answers(rows, order)
        write_csv_rows(run_dir / SUMMARY_FILE, summary, SUMMARY_COLUMNS)
        n_failed = sum(1 for r in rows if r.get("transform_error"))
        setup.finish(len(rows), added, n_errors=sum(1 for r in rows if r.get("error")), n_transform_failures=n_failed)
        write_manifest(run_dir, manifest)
    return QAAnswerResult(run_dir, order, len(ids), added, summary, rows)


#: the files of a QA run's folder besides its answers and summary (what ``overwrite`` removes)
QA_OUTPUT_FILES = (MANIFEST_FILE, *JOURNAL_FILES)


def _components(cfg: SweepConfig, specs: Sequence[PipelineSpec]) -> dict[str, object]:
    """The manifest's components of a QA run: each LLM with the options, each query transform and post chain."""
    return {
        **{f"llm:{s.llm}": {"spec": s.llm, "options": cfg.llm_options} for s in specs},
        **{  # the query transform and post chain of each pipeline, with their options
            f"transforms:{s.chunker}:{s.retriever}:query={s.query}:post={s.post}": {
                "query": s.query,
                "post": s.post,
                "transform_llm": cfg.transform_llm,
                "options": cfg.transform_options,
            }
            for s in specs
            if s.transformed
        },
    }


__all__ = ["QAAnswerResult", "row_outcome", "run_qa_answers", "summarise_answers"]
