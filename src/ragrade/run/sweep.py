"""The exam sweep: every pipeline takes the exam; resumable; results in a run directory.

Run directory layout::

    manifest.json          full config, components, seeds, inputs, software, times, counts
    journal.sqlite         durable journal of finished (pipeline, question) rows (resume state)
    responses.parquet      one row per pipeline x question (written atomically at the end)
    samples.jsonl          what was sent and received, one line per request (run/samples.py; --no-samples)
    summary.csv            accuracy + Wilson 95% CI per pipeline, error / parse-failure counts
    summary_by_tag.csv     the same per pipeline x topic / Bloom level / question word

Rerunning the same command on the same directory resumes: finished rows are
kept, only missing ones are computed, and the final files equal those of an
uninterrupted run (up to the volatile ``latency_s`` and ``cached`` columns).
An interrupted run (Ctrl-C, SIGTERM) writes responses.parquet and the summaries
over the rows that finished, marked partial (run/partial.py; ``summary.csv``'s
``partial`` column, the manifest's status), before it exits.

:mod:`ragrade.run.grid` is the generic part every grid run shares (journal, executor, progress, the
check of components, the batching of in-process models); :func:`ragrade.run.setup.grid_setup` builds a
grid run's set-up (context, pipeline specs, manifest, provenance). ``exam take --adaptive``
(:mod:`ragrade.adaptive.runner`) and free-text QA (:mod:`ragrade.qa.run`) use both with their own loop or
worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ragrade import interrupt
from ragrade.exam.files import read_exam
from ragrade.provenance import Decision
from ragrade.run.answer import EXAM_WORKER
from ragrade.run.executors import Executor
from ragrade.run.grid import (
    GridJob,
    ProgressFn,
    check_components,
    executor_for,
    fill_in_process,
    prepare_grid,
    run_grid,
    run_resumable,
)
from ragrade.run.manifest import write_manifest
from ragrade.run.partial import mark_partial, write_partial
from ragrade.run.prompts import resolve_template
from ragrade.run.records import Row, Sample, WorkerContext
from ragrade.run.samples import SAMPLES_FILE, SAMPLES_VERSION, SampleLog, compact
from ragrade.run.setup import (
    GridInput,
    GridSetup,
    grid_setup,
    pipeline_context,
    plan_items,
    split_icl_pool,
    worker_context,
)
from ragrade.run.shared import SHARED_FILE
from ragrade.run.spec import EXTERNAL_PREFIX, PipelineSpec, SweepConfig
from ragrade.run.store import JOURNAL_FILE, Journal
from ragrade.run.summary import (
    RESPONSES_FILE,
    SUMMARY_BY_TAG_FILE,
    SUMMARY_FILE,
    SUMMARY_VERSION,
    summarise,
    summarise_by_tag,
    write_csv,
    write_responses,
)
from ragrade.runlock import run_lock

OUTPUT_FILES = (
    "manifest.json",
    JOURNAL_FILE,
    f"{JOURNAL_FILE}-wal",
    f"{JOURNAL_FILE}-shm",
    RESPONSES_FILE,
    SUMMARY_FILE,
    SUMMARY_BY_TAG_FILE,
    SAMPLES_FILE,
    "comparisons.json",
    SHARED_FILE,
)


@dataclass
class SweepResult:
    """What a finished sweep produced."""

    run_dir: Path
    pipelines: list[str]
    n_questions: int
    n_new_rows: int
    responses: pd.DataFrame
    summary: pd.DataFrame
    #: what a rerun that only added pipelines or questions added (empty otherwise)
    extended: str = ""


def clear_run_dir(run_dir: Path) -> None:
    """Remove the files a sweep writes (only those) from ``run_dir``."""
    for name in OUTPUT_FILES:
        p = run_dir / name
        if p.is_file():
            p.unlink()


def _components(context: WorkerContext, specs: Sequence[PipelineSpec], local: bool) -> dict[str, object]:
    """describe() of every component (from this process's cached resources when the run was local)."""
    from ragrade.run.pipeline import resources_for

    out: dict[str, object] = {}
    res = resources_for(context) if local else None
    for spec in specs:
        out.setdefault(f"prompt:{spec.prompt}", {"digest": resolve_template(spec.prompt, context["prompts"]).digest})
        if spec.is_external:
            name = spec.retriever[len(EXTERNAL_PREFIX) :]
            out.setdefault(f"external:{name}", {"target": context["external"].get(name)})
        if spec.has_llm and f"llm:{spec.llm}" not in out:
            out[f"llm:{spec.llm}"] = (
                _describe(res.llm, spec.llm) if res else {"spec": spec.llm, "options": context["llm_options"]}
            )
        key = f"retriever:{spec.chunker}:{spec.retriever}"
        if spec.needs_index and key not in out:
            out[key] = _describe(res.retriever, spec.chunker, spec.retriever) if res else {"spec": spec.retriever}
        key = f"transforms:{spec.chunker}:{spec.retriever}:query={spec.query}:post={spec.post}"
        if spec.transformed and key not in out:  # the query transform and post chain with their arguments
            out[key] = _describe(res.retrieval, spec) if res else {"query": spec.query, "post": spec.post}
    return out


def _describe(get: Callable[..., object], *args: str | PipelineSpec) -> object:
    try:
        obj = get(*args)
        return obj.describe() if hasattr(obj, "describe") else {"repr": repr(obj)}
    except Exception as exc:  # the manifest must not fail the run
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_sweep(
    exam_path: str | Path,
    cfg: SweepConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    progress: ProgressFn | None = None,
    executor: Executor | None = None,
    config_files: Sequence[str] = (),
) -> SweepResult:
    """Run (or resume) the sweep of ``cfg`` on the exam at ``exam_path``; write the run directory."""
    exam_path = Path(exam_path)
    run_dir = Path(out_dir)
    _, questions = read_exam(exam_path)
    exe = executor or executor_for(cfg)
    answer = WorkerContext(answer=cfg.answer.model_dump(mode="json"), samples=cfg.samples)
    setup = grid_setup(
        "exam-sweep",
        GridInput("exam", exam_path, [q.id for q in questions]),
        cfg,
        settings=answer,
        executor=exe,
        config_files=config_files,
    )
    specs, items, context = setup.specs, setup.items, setup.context
    from ragrade.run.pipeline import resources_for
    from ragrade.run.warm import loading_components

    with loading_components(resources_for(context), specs) as loading:  # each model/index shown as it loads
        prepare_grid(exe, loading, specs, cfg, len(items), setup.manifest)  # everything checked before a write
    from ragrade.run.exit_status import recorded_exit

    with run_lock(run_dir), recorded_exit(run_dir, setup.manifest, setup.order, items):  # status at exit
        return _run_locked(run_dir, setup, cfg, exe, overwrite, progress)


def _run_locked(
    run_dir: Path, setup: GridSetup, cfg: SweepConfig, exe: Executor, overwrite: bool, progress: ProgressFn | None
) -> SweepResult:
    """The sweep in a folder this process holds (:func:`ragrade.runlock.run_lock`)."""
    specs, items, context = setup.specs, setup.items, setup.context
    if overwrite:
        clear_run_dir(run_dir)
    worker_specs, manifest = setup.worker_specs, setup.manifest
    manifest["outputs"] = {
        RESPONSES_FILE: {"version": 1},
        SUMMARY_FILE: {"version": SUMMARY_VERSION},
        SUMMARY_BY_TAG_FILE: {"version": 1},
        **({SAMPLES_FILE: {"version": SAMPLES_VERSION}} if cfg.samples else {}),
    }
    share = _shared_path(run_dir, exe)
    job_context = context.copy()
    if share:
        job_context["shared_retrieval"] = str(share)
    job = GridJob(EXAM_WORKER, job_context, worker_specs, items, setup.provenance, journal_specs=setup.journal_specs)
    decisions: list[Decision] = []
    sink = _SampleSink(run_dir / SAMPLES_FILE) if cfg.samples else None
    prepare = (
        _before_dispatch(context, worker_specs, items, cfg.shard_size, share) if share or exe.name == "local" else None
    )
    try:
        rows, added = run_grid(
            run_dir,
            job,
            exe,
            manifest,
            shard_size=cfg.shard_size,
            progress=progress,
            on_samples=sink,
            prepare=prepare,
            decided=decisions.append,
        )
    except interrupt.Interrupted:  # what finished, as the run's files marked partial (run/partial.py)
        write_partial(run_dir, manifest, [s.id for s in specs], items)
        raise
    finally:
        if share:
            _drop_shared(share)
    _finish_samples(run_dir / SAMPLES_FILE, rows, cfg.samples)
    result = _finalise(run_dir, setup, rows, added, exe)
    result.extended = decisions[0].summary() if decisions else ""
    return result


def _shared_path(run_dir: Path, exe: Executor) -> Path | None:
    """Where the driver writes the retrieval of a run on workers in other processes (None: local, or not shared)."""
    from ragrade.retrieval.query_memo import sharing_enabled

    return (run_dir / SHARED_FILE).resolve() if exe.name != "local" and sharing_enabled() else None


def _before_dispatch(
    context: WorkerContext,
    specs: Mapping[str, Mapping[str, object]],
    items: Sequence[str],
    shard_size: int,
    share: Path | None,
) -> Callable[[Journal], None]:
    """Work on the pending shards before dispatch: with ``share`` (workers in other processes) each distinct
    retrieval, once, into that file (run/shared.py); in this process the warm step (run/warm.py)."""

    def prepare(journal: Journal) -> None:
        from ragrade.run.executors import plan_shards
        from ragrade.run.pipeline import resources_for
        from ragrade.run.shared import precompute
        from ragrade.run.spec import AnswerConfig
        from ragrade.run.warm import warm

        batches = [(s.pipeline, s.items) for s in plan_shards(journal, specs, items, shard_size)]
        if share is not None:
            precompute(resources_for(context), specs, batches, share)
        else:
            warm(resources_for(context), specs, batches, AnswerConfig.model_validate(context.get("answer", {})))

    return prepare


def _drop_shared(path: Path) -> None:
    from ragrade.run.shared import forget_shared

    path.unlink(missing_ok=True)
    forget_shared(path)


class _SampleSink:
    """Appends samples to samples.jsonl, creating it on first use (once the journal accepted the run)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log: SampleLog | None = None

    def __call__(self, samples: list[Sample]) -> None:
        if self.log is None:
            self.log = SampleLog(self.path)
        self.log.append(samples)


def _finish_samples(path: Path, rows: Sequence[Mapping[str, object]], enabled: bool) -> None:
    """One line per row, in row order (``enabled``); without samples, no stale file is left beside the rows."""
    if not enabled:
        path.unlink(missing_ok=True)
        return
    SampleLog(path)  # a run whose every row was journaled before still gets the file
    compact(path, rows)


def _finalise(run_dir: Path, setup: GridSetup, rows: list[Row], added: int, exe: Executor) -> SweepResult:
    specs, items, manifest = setup.specs, setup.items, setup.manifest
    write_responses(run_dir / RESPONSES_FILE, rows)
    df = pd.DataFrame(rows)
    order = [s.id for s in specs]
    summary = mark_partial(summarise(df, order), df, len(items))  # the `partial` column (run/partial.py)
    write_csv(run_dir / SUMMARY_FILE, summary)
    write_csv(run_dir / SUMMARY_BY_TAG_FILE, summarise_by_tag(df, order))
    manifest["components"] = _components(setup.context, specs, exe.name == "local")
    setup.finish(
        len(rows),
        added,
        n_errors=int(df["error"].notna().sum()),
        n_parse_failures=int(df["parse_failed"].sum()),
        n_transform_failures=int(df["transform_error"].notna().sum()) if "transform_error" in df else 0,
    )
    write_manifest(run_dir, manifest)
    return SweepResult(run_dir, order, len(items), added, df, summary)


__all__ = [
    "OUTPUT_FILES",
    "GridJob",
    "SweepResult",
    "check_components",
    "clear_run_dir",
    "executor_for",
    "fill_in_process",
    "pipeline_context",
    "plan_items",
    "run_grid",
    "run_resumable",
    "run_sweep",
    "split_icl_pool",
    "worker_context",
]
