"""One set-up for every grid run: ``exam take``, ``exam take --adaptive`` and ``qa answer``.

:func:`grid_setup` builds, from a :class:`~ragrade.run.spec.SweepConfig` and an input file, what a grid
run hands to its journal, its workers and its manifest (a :class:`GridSetup`):

* the pipeline specs (:func:`~ragrade.run.spec.expand_pipelines`) and the questions asked
  (:func:`plan_items`: the ICL hold-out, then ``limit``);
* the worker context (:func:`pipeline_context` plus the input file and the worker's own settings);
* what the journal records per pipeline (the spec, with the prompt template's digest where the
  worker renders templates) and what the workers receive (the spec alone);
* the manifest's common part (kind, config, inputs, seeds, pipelines, LLM labels, executor, the
  input's block) that each runner extends with its own outputs;
* the resume fingerprint (:func:`resume_fingerprint`): what the answers depend on, and nothing that
  only changes throughput, so that a rerun changing concurrency, timeouts or retries resumes and one
  changing the inputs, the questions or an option that changes answers is refused.

The three runners build their set-up here and nowhere else, so they cannot disagree on when a run
resumes.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragrade.errors import ConfigError
from ragrade.exam.files import Question
from ragrade.llm.options import LLMOptions
from ragrade.run.executors import Executor
from ragrade.run.manifest import build_manifest, finish_manifest
from ragrade.run.prompts import resolve_template
from ragrade.run.records import SpecRecord, WorkerContext
from ragrade.run.spec import PipelineSpec, SweepConfig, expand_pipelines, llm_label

Source = Literal["exam", "qa"]


def split_icl_pool(
    questions: Sequence[Question], pool_size: int, max_icl: int, seed: int
) -> tuple[list[str], list[str]]:
    """``(pool ids, evaluated ids)``: a seeded hold-out of few-shot examples when ``max_icl > 0``.

    Every pipeline is scored on the same evaluated questions (also ICL@0 ones),
    so paired comparisons and IRT see one response matrix.
    """
    return _split_ids([q.id for q in questions], pool_size, max_icl, seed)


def plan_items(ids: Sequence[str], specs: Sequence[PipelineSpec], cfg: SweepConfig) -> tuple[list[str], list[str]]:
    """``(ICL pool ids, evaluated ids)`` of a grid run over questions ``ids``.

    The pool is held out when some pipeline of ``specs`` uses few-shot
    examples (:func:`split_icl_pool`); ``cfg.limit`` then keeps the first
    evaluated questions.
    """
    pool, items = _split_ids(ids, cfg.icl_pool, max(s.icl for s in specs), cfg.seed)
    if cfg.limit is not None:
        items = items[: cfg.limit]
    return pool, items


def _split_ids(ids: Sequence[str], pool_size: int, max_icl: int, seed: int) -> tuple[list[str], list[str]]:
    ids = list(ids)
    if max_icl <= 0:
        return [], ids
    size = max(pool_size, max_icl)
    if size >= len(ids):
        raise ConfigError(f"ICL@{max_icl} needs a hold-out of {size} questions, but the exam has only {len(ids)}")
    rng = random.Random(int(hashlib.sha256(f"icl-pool\0{seed}".encode()).hexdigest()[:16], 16))
    pool = set(rng.sample(ids, size))
    return [i for i in ids if i in pool], [i for i in ids if i not in pool]


def pipeline_context(cfg: SweepConfig, pool: Sequence[str]) -> WorkerContext:
    """The worker context every grid run shares: index dirs, external systems, prompt files, options, seed, ICL pool.

    Only absolute paths and settings (it travels to worker processes as JSON);
    callers add what names their questions and their worker's own settings.
    """
    context = WorkerContext(
        indexes={k: str(Path(v).resolve()) for k, v in cfg.indexes.items()},
        external=dict(cfg.external),
        prompts={k: str(Path(v).resolve()) for k, v in cfg.prompts.items()},
        llm_options=cfg.llm_options.worker_dict(),  # what differs from the defaults (JSON, to every worker)
        retriever_options=dict(cfg.retriever_options),
    )
    if cfg.transform_llm:
        context["transform_llm"] = cfg.transform_llm
    if cfg.transform_options:
        context["transform_options"] = dict(cfg.transform_options)
    context["seed"] = cfg.seed
    context["icl_pool"] = list(pool)
    return context


def input_context(source: Source, path: Path, cfg: SweepConfig, pool: Sequence[str]) -> WorkerContext:
    """The shared context (:func:`pipeline_context`) of a run over the ``source`` file at ``path``."""
    context = WorkerContext(exam=str(path.resolve())) if source == "exam" else WorkerContext(qa=str(path.resolve()))
    context.update(pipeline_context(cfg, pool))
    return context


def worker_context(exam_path: Path, cfg: SweepConfig, pool: Sequence[str]) -> WorkerContext:
    """The JSON context the exam worker receives: the exam, the shared context and the answer settings."""
    context = input_context("exam", exam_path, cfg, pool)
    context["answer"] = cfg.answer.model_dump(mode="json")
    return context


def resume_fingerprint(
    source: str,
    digest: object,
    items: Sequence[str],
    context: WorkerContext,
    *,
    leave_out: Sequence[str] = (),
    **extra: object,
) -> dict[str, object]:
    """What a grid run's answers depend on, for its journal's resume check (one shape for ``exam take``,
    ``exam take --adaptive`` and ``qa answer``): the input file's ``digest`` under ``source``, the items, the
    worker context less the input's path, ``leave_out`` and the LLM options, and the LLM options that can change
    answers. Throughput knobs (concurrency, timeouts, retries, cache) are left out, so a rerun that changes only
    them resumes; a change of model, prompt, grid or options that change answers is refused."""
    opts = context.get("llm_options") or {}
    assert isinstance(opts, dict)
    skip = {source, "llm_options", *leave_out}
    return {
        source: digest,
        "items": list(items),
        "context": {k: v for k, v in context.items() if k not in skip},
        "llm_options": LLMOptions.model_validate(opts).answer_options(),  # no THROUGHPUT_OPTIONS
        **extra,
    }


#: context keys that change what is recorded, never an answer (left out of the resume fingerprint)
RECORD_ONLY_KEYS = ("samples",)


@dataclass(frozen=True)
class GridSetup:
    """What a grid run hands to its journal, its workers and its manifest (built by :func:`grid_setup`).

    ``journal_specs``: what the journal records per pipeline id to detect changed settings;
    ``worker_specs``: the spec each worker receives; ``manifest``: the common part (each runner adds its
    own fields); ``fingerprint``: the resume check's data (:func:`resume_fingerprint`).
    """

    specs: list[PipelineSpec]
    pool: list[str]
    items: list[str]
    context: WorkerContext
    journal_specs: dict[str, SpecRecord]
    worker_specs: dict[str, SpecRecord]
    manifest: dict[str, Any]
    fingerprint: dict[str, object]

    @property
    def order(self) -> list[str]:
        """The pipeline ids, in grid order."""
        return [s.id for s in self.specs]

    def finish(self, n_rows: int, n_new_rows: int, **counts: int) -> dict[str, Any]:
        """Stamp the end and the counts on the manifest (:func:`~ragrade.run.manifest.finish_manifest`): the
        pipelines and questions of this set-up, the rows, the rows added by this call and ``counts``
        (``n_errors``, ...)."""
        sizes = {"n_pipelines": len(self.specs), "n_questions": len(self.items)}
        counts = {**sizes, "n_rows": n_rows, "n_new_rows": n_new_rows, **counts}
        return finish_manifest(self.manifest, status="complete", missing=None, **counts)


@dataclass(frozen=True)
class GridInput:
    """The input file of a grid run: ``source`` (``exam`` or ``qa``) at ``path`` with question ``ids``."""

    source: Source
    path: Path
    ids: Sequence[str]


def grid_setup(
    kind: str,
    data: GridInput,
    cfg: SweepConfig,
    *,
    settings: WorkerContext | None = None,
    executor: Executor,
    specs: Sequence[PipelineSpec] | None = None,
    digest_prompts: bool = True,
    components: Mapping[str, object] | None = None,
    config_files: Sequence[str] = (),
    fingerprint_extra: Mapping[str, object] | None = None,
) -> GridSetup:
    """The set-up of a grid run of ``kind`` (the manifest's kind) over ``data`` under ``cfg``.

    ``settings``: the worker's own context keys (``answer``, ``generation``, ``samples``); ``executor``: the
    run's executor (described in the manifest); ``specs``: the pipelines (default: ``cfg``'s grid); ``digest_prompts``:
    the journal records each prompt template's digest (the exam worker renders them); ``fingerprint_extra``:
    more of what the answers depend on (``kind="adaptive"``).
    """
    specs = list(specs if specs is not None else expand_pipelines(cfg))
    pool, items = plan_items(data.ids, specs, cfg)
    context = input_context(data.source, data.path, cfg, pool)
    context.update(settings or {})
    journal_specs: dict[str, SpecRecord] = {s.id: s.model_dump(mode="json") for s in specs}
    if digest_prompts:
        digests = {s.prompt: resolve_template(s.prompt, context.get("prompts", {})).digest for s in specs}
        journal_specs = {s.id: {**journal_specs[s.id], "_prompt_digest": digests[s.prompt]} for s in specs}
    worker_specs = {
        pid: {k: v for k, v in spec.items() if not k.startswith("_")} for pid, spec in journal_specs.items()
    }
    block = {"path": str(data.path), "n_questions": len(data.ids), "n_evaluated": len(items), "icl_pool": pool}
    manifest = build_manifest(
        kind,
        cfg,
        components or {},
        {"seed": cfg.seed, "icl_pool": pool},
        {data.source: str(data.path), **{f"config:{i}": f for i, f in enumerate(config_files)}},
        exam=block if data.source == "exam" else None,
        indexes=cfg.indexes,
        extra={
            "pipelines": [s.id for s in specs],
            "llm_labels": {llm_label(s.llm): s.llm for s in specs},  # the name in ids -> the full spec
            "executor": executor.describe(),
            **({data.source: {**block, "path": str(data.path.resolve())}} if data.source != "exam" else {}),
        },
    )
    digest = manifest["inputs"][data.source].get("sha256")
    fp = resume_fingerprint(
        data.source, digest, items, context, leave_out=RECORD_ONLY_KEYS, **(fingerprint_extra or {})
    )
    return GridSetup(specs, pool, items, context, journal_specs, worker_specs, manifest, fp)


__all__ = [
    "RECORD_ONLY_KEYS",
    "GridInput",
    "GridSetup",
    "grid_setup",
    "input_context",
    "pipeline_context",
    "plan_items",
    "resume_fingerprint",
    "split_icl_pool",
    "worker_context",
]
