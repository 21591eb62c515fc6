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

:func:`run_resumable` is the generic part (journal + executor + progress);
:func:`run_grid` runs a :class:`GridJob` with it and returns the rows;
:func:`ragrade.run.setup.grid_setup` builds a grid run's set-up (context, pipeline
specs, manifest, resume fingerprint) and :func:`executor_for` its executor.
``exam take --adaptive`` (:mod:`ragrade.adaptive.runner`) and free-text QA
(:mod:`ragrade.qa.run`) use all of them with their own loop or worker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ragrade import interrupt
from ragrade.errors import DataError
from ragrade.exam.files import read_exam
from ragrade.io import now_iso
from ragrade.llm.options import LLMOptions
from ragrade.run.answer import EXAM_WORKER
from ragrade.run.executors import Executor, LocalExecutor, Shard, create_executor, plan_shards, run_shards
from ragrade.run.manifest import MANIFEST_FILE, read_manifest, write_manifest
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
    resume_fingerprint,
    split_icl_pool,
    worker_context,
)
from ragrade.run.shared import SHARED_FILE
from ragrade.run.spec import EXTERNAL_PREFIX, PipelineSpec, SweepConfig, fingerprint
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

if TYPE_CHECKING:
    from ragrade.run.pipeline import Resources

ProgressFn = Callable[[str, int, int], None]  # (pipeline id, rows just finished, rows of that pipeline in total)
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


def clear_run_dir(run_dir: Path) -> None:
    """Remove the files a sweep writes (only those) from ``run_dir``."""
    for name in OUTPUT_FILES:
        p = run_dir / name
        if p.is_file():
            p.unlink()


def executor_for(cfg: SweepConfig) -> Executor:
    """The executor ``cfg`` asks for (local, or Ray with its address and workers)."""
    return create_executor(cfg.executor, parallel=cfg.parallel_shards, address=cfg.ray_address, workers=cfg.ray_workers)


def run_resumable(
    run_dir: str | Path,
    *,
    worker: str,
    context: WorkerContext,
    pipelines: Mapping[str, Mapping[str, object]],
    items: Sequence[str],
    fingerprint_data: object,
    executor: Executor,
    shard_size: int = 32,
    progress: ProgressFn | None = None,
    journal_specs: Mapping[str, Mapping[str, object]] | None = None,
    before_run: Callable[[Journal], None] | None = None,
    unit: str = "rows",
    on_samples: Callable[[list[Sample]], None] | None = None,
) -> tuple[Journal, int]:
    """Generic resumable runner: journal every (pipeline, item) row that ``worker`` produces.

    ``pipelines`` maps a pipeline id to the JSON spec handed to the worker;
    ``items`` are the item ids every pipeline answers; ``journal_specs`` (default:
    ``pipelines``) is what the journal records per id to detect changed settings
    (e.g. the spec plus a prompt-template digest). ``before_run(journal)`` is
    called once the journal accepted the run (e.g. to write the manifest); ``unit`` names a row in the
    message of an interrupted run (:mod:`ragrade.interrupt`); ``on_samples`` receives the samples of the
    requests sent (see :func:`~ragrade.run.executors.run_shards`). Returns the open journal
    (close it when done) and the number of rows added in this call. Rows
    already journaled are never recomputed; a rerun with another
    ``fingerprint_data`` or another spec under the same id is refused.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(run_dir / JOURNAL_FILE)
    try:
        journal.check_fingerprint(fingerprint(fingerprint_data))
        journal.register_pipelines(journal_specs if journal_specs is not None else pipelines)
        if before_run is not None:
            before_run(journal)
        shards = plan_shards(journal, pipelines, items, shard_size)
        done = {pid: journal.count(pid) for pid in pipelines}
        interrupt.progress(sum(done.values()), len(pipelines) * len(items), unit)
        if progress is not None:
            for pid in pipelines:
                progress(pid, done[pid], len(items))

        def on_progress(shard: Shard, n: int) -> None:
            done[shard.pipeline] = journal.count(shard.pipeline)
            interrupt.progress(sum(done.values()), len(pipelines) * len(items), unit)
            if progress is not None:
                progress(shard.pipeline, n, len(items))

        added = run_shards(journal, shards, worker, context, executor, on_progress, on_samples)
    except BaseException:
        journal.close()
        raise
    return journal, added


@dataclass(frozen=True)
class GridJob:
    """One resumable grid run: ``worker`` answers every item under every pipeline.

    ``pipelines`` maps a pipeline id to the JSON spec handed to the worker
    (rows come back in this order); ``journal_specs`` (default: ``pipelines``)
    is what the journal records per id to detect changed settings;
    ``fingerprint_data`` identifies the inputs (see :func:`run_resumable`).
    """

    worker: str
    context: WorkerContext
    pipelines: Mapping[str, Mapping[str, object]]
    items: Sequence[str]
    fingerprint_data: object
    journal_specs: Mapping[str, Mapping[str, object]] | None = None


def run_grid(
    run_dir: str | Path,
    job: GridJob,
    executor: Executor,
    manifest: dict[str, object],
    *,
    shard_size: int = 32,
    progress: ProgressFn | None = None,
    on_samples: Callable[[list[Sample]], None] | None = None,
    prepare: Callable[[Journal], None] | None = None,
) -> tuple[list[Row], int]:
    """Run (or resume) ``job`` in ``run_dir``: ``(every row, pipeline by pipeline in item order; rows added now)``.

    ``manifest`` is written once the journal accepted the run; on a resume it
    keeps the first start time and lists the restarts under ``resumed``.
    ``on_samples`` receives the samples of the requests sent (see :func:`run_resumable`);
    ``prepare(journal)`` runs after that, before any shard is dispatched.
    """
    run_dir = Path(run_dir)

    def before_run(journal: Journal) -> None:
        _carry_over(run_dir, manifest)
        write_manifest(run_dir, manifest)
        if prepare is not None:
            prepare(journal)

    journal, added = run_resumable(
        run_dir,
        worker=job.worker,
        context=job.context,
        pipelines=job.pipelines,
        journal_specs=job.journal_specs,
        items=job.items,
        fingerprint_data=job.fingerprint_data,
        executor=executor,
        shard_size=shard_size,
        progress=progress,
        before_run=before_run,
        on_samples=on_samples,
    )
    try:
        rows = [r for pid in job.pipelines for r in journal.rows(pid, job.items)]
    finally:
        journal.close()
    return rows, added


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


def check_components(res: Resources, specs: Sequence[PipelineSpec]) -> None:
    """Build every component the pipelines name (LLM, index + retriever, external system, prompt) in this process.

    Called before the run directory is created, so that a bad ``--index``, ``--llm``, ``--retrievers`` or
    ``--external`` fails with its one-line error before anything is written (and the local executor reuses
    what was built). A retriever that fails at query time is still a per-row failure.
    """
    from ragrade.llm import check_llm

    options = LLMOptions.model_validate(res.context.get("llm_options") or {})
    for llm in dict.fromkeys(s.llm for s in specs if s.has_llm):  # every model first, loading nothing
        check_llm(llm, options.for_llm(llm))  # a job's options are shared by all its stages' LLMs
    for spec in specs:
        res.template(spec.prompt)
        if spec.has_llm:
            res.llm(spec.llm)
        if not spec.is_external:  # one registered to need no index is built over none
            res.retriever(spec.chunker, spec.retriever)
        if spec.needs_index and spec.transformed:  # query transform and post chain with their option values
            res.retrieval(spec)
        if spec.is_external:
            res.external(spec.retriever[len(EXTERNAL_PREFIX) :])


def fill_in_process(
    exe: Executor, res: Resources, specs: Sequence[PipelineSpec], cfg: SweepConfig, n_items: int
) -> None:
    """Enough shards in flight on the local executor to fill the batches of an in-process LLM.

    An in-process backend that batches (``hf/``) merges the requests of every shard in flight into its next
    batch and says how many requests it wants in flight (``requests_in_flight``); the local executor then
    runs that many requests' worth of shards (of ``min(shard_size, n_items)`` questions) at once, unless
    ``parallel_shards`` was set. ``concurrency``
    (requests in flight to a server) does not apply to such backends.
    """
    if not isinstance(exe, LocalExecutor) or "parallel_shards" in cfg.model_fields_set:
        return
    wanted = [int(getattr(res.llm(s.llm), "requests_in_flight", 0) or 0) for s in specs if s.has_llm]
    if wanted and max(wanted) > 0:
        exe.parallel = max(exe.parallel, -(-max(wanted) // max(1, min(cfg.shard_size, n_items))))


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
        check_components(loading, specs)  # validate everything before writing anything
    fill_in_process(exe, resources_for(context), specs, cfg, len(items))
    setup.manifest["executor"] = exe.describe()  # with the shards in flight that the LLM asked for
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
    job = GridJob(EXAM_WORKER, job_context, worker_specs, items, setup.fingerprint, journal_specs=setup.journal_specs)
    sink = _SampleSink(run_dir / SAMPLES_FILE) if cfg.samples else None
    prepare = (
        _before_dispatch(context, worker_specs, items, cfg.shard_size, share) if share or exe.name == "local" else None
    )
    try:
        rows, added = run_grid(
            run_dir, job, exe, manifest, shard_size=cfg.shard_size, progress=progress, on_samples=sink, prepare=prepare
        )
    except interrupt.Interrupted:  # what finished, as the run's files marked partial (run/partial.py)
        write_partial(run_dir, manifest, [s.id for s in specs], items)
        raise
    finally:
        if share:
            _drop_shared(share)
    _finish_samples(run_dir / SAMPLES_FILE, rows, cfg.samples)
    return _finalise(run_dir, setup, rows, added, exe)


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


def _carry_over(run_dir: Path, manifest: dict[str, object]) -> None:
    """On a resume, keep the first start time and list the restarts."""
    path = run_dir / MANIFEST_FILE
    if not path.is_file():
        return
    try:
        old = read_manifest(run_dir)
    except DataError:
        return
    manifest["started"] = old.get("started", manifest["started"])
    manifest["resumed"] = [*old.get("resumed", []), now_iso()]


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
    "resume_fingerprint",
    "run_grid",
    "run_resumable",
    "run_sweep",
    "split_icl_pool",
    "worker_context",
]
