"""The grid runner every grid run shares: ``exam take``, its adaptive run and ``qa answer``.

A grid run asks every item of an input file under every pipeline of a grid; this module holds what those
runners share, so that they agree on when a run resumes and how an in-process model is fed:

* :func:`check_components` builds every component the pipelines name before the run folder is written;
* :func:`fill_in_process` puts enough shards in flight to fill the batches of an in-process model (``hf/``);
* :func:`run_resumable` journals every (pipeline, item) row a worker produces, after the journal compared
  the run's provenance with what the folder holds (:meth:`ragrade.journal.Journal.check_provenance`);
* :class:`GridJob` and :func:`run_grid` run one job and return its rows, writing the manifest once the
  journal accepted the run (keeping the first start time and listing the restarts on a resume).

The set-up each runner hands it (pipelines, items, context, manifest, provenance) comes from
:func:`ragrade.run.setup.grid_setup`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragrade import interrupt
from ragrade.errors import DataError
from ragrade.io import now_iso
from ragrade.provenance import Decision
from ragrade.run.executors import Executor, LocalExecutor, Shard, create_executor, plan_shards, run_shards
from ragrade.run.manifest import MANIFEST_FILE, read_manifest, write_manifest
from ragrade.run.records import Row, Sample, WorkerContext
from ragrade.run.spec import EXTERNAL_PREFIX, PipelineSpec, SweepConfig
from ragrade.run.store import JOURNAL_FILE, Journal

if TYPE_CHECKING:
    from ragrade.run.pipeline import Resources

ProgressFn = Callable[[str, int, int], None]  # (pipeline id, rows just finished, rows of that pipeline in total)


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
    provenance: Mapping[str, object],
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
    already journaled are never recomputed; ``provenance`` (:mod:`ragrade.provenance`) is compared with what
    the folder holds: the same (throughput aside) resumes, only more pipelines or items extends the run
    (``journal.decision``), anything that would alter or drop a finished row is refused naming each difference.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(run_dir / JOURNAL_FILE)
    try:
        journal.check_provenance(provenance)
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
    ``provenance`` is what the rows depend on (see :func:`run_resumable`).
    """

    worker: str
    context: WorkerContext
    pipelines: Mapping[str, Mapping[str, object]]
    items: Sequence[str]
    provenance: Mapping[str, object]
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
    decided: Callable[[Decision], None] | None = None,
) -> tuple[list[Row], int]:
    """Run (or resume) ``job`` in ``run_dir``: ``(every row, pipeline by pipeline in item order; rows added now)``.

    ``manifest`` is written once the journal accepted the run; on a resume it
    keeps the first start time and lists the restarts under ``resumed``.
    ``on_samples`` receives the samples of the requests sent (see :func:`run_resumable`);
    ``prepare(journal)`` runs after that, before any shard is dispatched; ``decided`` is told what the journal
    decided of the run (resume, extend, new; :func:`ragrade.provenance.decide`) before anything is written.
    """
    run_dir = Path(run_dir)

    def before_run(journal: Journal) -> None:
        if decided is not None and journal.decision is not None:
            decided(journal.decision)
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
        provenance=job.provenance,
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


def check_components(res: Resources, specs: Sequence[PipelineSpec]) -> None:
    """Build every component the pipelines name (LLM, index + retriever, external system, prompt) in this process.

    Called before the run directory is created, so that a bad ``--index``, ``--llm``, ``--retrievers`` or
    ``--external`` fails with its one-line error before anything is written (and the local executor reuses
    what was built). A retriever that fails at query time is still a per-row failure.
    """
    from ragrade.llm import check_llm

    options = res.llm_options
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


def prepare_grid(
    exe: Executor,
    res: Resources,
    specs: Sequence[PipelineSpec],
    cfg: SweepConfig,
    n_items: int,
    manifest: dict[str, object],
) -> None:
    """What every grid run does before its folder is written: build every component (:func:`check_components`),
    put enough shards in flight for an in-process model's batches (:func:`fill_in_process`), and record the
    executor as it will run (in the manifest and in the provenance's recorded part), and complete each model's
    identity in the provenance with what the loaded model says of itself (:func:`loaded_identity`)."""
    check_components(res, specs)
    from ragrade.run.input_corpus import check_input_corpus

    check_input_corpus(res, specs, manifest)  # the index holds the input's source passages, or it is said
    fill_in_process(exe, res, specs, cfg, n_items)
    manifest["executor"] = exe.describe()
    prov = manifest.get("provenance")
    if isinstance(prov, dict) and isinstance(prov.get("recorded"), dict):
        prov["recorded"]["executor"] = exe.describe()
    if isinstance(prov, dict) and isinstance(prov.get("models"), dict):  # the models as loaded, resolved settings
        for spec in sorted({s.llm for s in specs if s.has_llm}):
            identity = prov["models"].get(f"llm {spec}")
            if isinstance(identity, dict):
                identity.update(loaded_identity(res.llm(spec)))


def loaded_identity(llm: object) -> dict[str, object]:
    """What a loaded model says of itself that changes its numbers: its weights (the model folder's fingerprint or
    the GGUF file's sha256), the dtype it computes in and the kind of device (``auto`` resolved: bfloat16 on a
    GPU and float32 on a CPU give different log-likelihoods). Empty for a model behind a server."""
    try:
        desc = llm.describe() if hasattr(llm, "describe") else {}
    except Exception:  # a description is informative only
        return {}
    if not isinstance(desc, Mapping):
        return {}
    out: dict[str, object] = {}
    weights = desc.get("sha256") or desc.get("fingerprint")
    if weights:
        out["weights"] = weights
    if desc.get("dtype"):
        out["dtype"] = str(desc["dtype"])
    if desc.get("device"):
        out["device"] = str(desc["device"]).split(":", 1)[0]
    return out


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


__all__ = [
    "GridJob",
    "ProgressFn",
    "check_components",
    "executor_for",
    "fill_in_process",
    "loaded_identity",
    "prepare_grid",
    "run_grid",
    "run_resumable",
]
