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
* the provenance (:func:`grid_provenance`): what the answers depend on (inputs by content, each model's
  identity, the pipelines, the items, the settings that change answers) and, recorded only, what changes
  throughput; the journal decides with it whether a rerun resumes, extends or is refused
  (:func:`ragrade.provenance.decide`).

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
from ragrade.llm.options import THROUGHPUT_OPTIONS, LLMOptions
from ragrade.run.executors import Executor
from ragrade.run.manifest import build_manifest, finish_manifest
from ragrade.run.prompts import resolve_template
from ragrade.run.records import SpecRecord, WorkerContext
from ragrade.run.spec import PipelineSpec, SweepConfig, expand_pipelines, fingerprint, llm_label

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


#: context keys that change what is recorded, never an answer (recorded in the provenance, not depended on)
RECORD_ONLY_KEYS = ("samples", "shared_retrieval")
#: context keys the provenance holds in other parts (inputs, models) or not at all (paths)
_CONTEXT_ELSEWHERE = ("exam", "qa", "indexes", "prompts", "external", "llm_options", "transform_llm")


def index_digest(path: str | Path) -> str:
    """An index's content address: its chunks file and its build settings (not where it lies, not when it was
    built), so that moving an index resumes and rebuilding it over other documents or settings is a difference."""
    from ragrade.run.manifest import file_fingerprint

    folder = Path(path)
    chunks = file_fingerprint(folder / "chunks.jsonl")
    try:
        import json

        build = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        build = {}
    if isinstance(build, dict):
        build = {k: v for k, v in build.items() if k not in ("created", "timings", "seconds")}
    blob = f"{chunks.get('sha256') or chunks.get('bytes')}\0{fingerprint(build)}"
    return hashlib.sha256(blob.encode()).hexdigest()


def model_identity(llm: str, options: LLMOptions) -> dict[str, object]:
    """What a model's answers depend on: its spec, the server it is reached at (``$OPENAI_BASE_URL`` when no
    base URL is given), and the options that change answers (seed, extra_body, method, dtype, device, ...)."""
    import os

    from ragrade.llm.options import provider_caps

    own = options.for_llm(llm)
    out: dict[str, object] = {"spec": llm, **own.answer_options()}
    try:
        caps = provider_caps(llm.split("/", 1)[0])
    except ConfigError:
        caps = None
    if caps is not None and caps.server:
        out["base_url"] = own.base_url or os.environ.get("OPENAI_BASE_URL") or "(the OpenAI API)"
    out.pop("dry_run", None)
    return out


def grid_provenance(
    data: GridInput,
    digest: object,
    items: Sequence[str],
    context: WorkerContext,
    journal_specs: Mapping[str, SpecRecord],
    specs: Sequence[PipelineSpec],
    options: LLMOptions,
    *,
    executor: Mapping[str, object] | None = None,
    extra: Mapping[str, object] | None = None,
) -> dict[str, Any]:
    """The provenance (:mod:`ragrade.provenance`) of a grid run's answers, one shape for ``exam take``, its adaptive
    run and ``qa answer``: the input file and every index used by content, each LLM's identity
    (:func:`model_identity`) and external system's target, the pipelines (with prompt digests), the items, and the
    settings that change answers; the throughput knobs (concurrency, timeouts, retries, cache, shards,
    executor) recorded, not depended on."""
    from ragrade.provenance import provenance
    from ragrade.run.manifest import file_fingerprint

    used = {s.chunker for s in specs if s.needs_index}
    indexes = context.get("indexes", {})
    inputs: dict[str, object] = {data.source: digest}
    inputs.update({f"index {name}": index_digest(indexes[name]) for name in sorted(used) if name in indexes})
    prompts = context.get("prompts", {})
    for name in sorted({s.prompt for s in specs if s.prompt in prompts}):  # each prompt file by its content
        inputs[f"prompt {name}"] = file_fingerprint(prompts[name]).get("sha256")
    llms = {s.llm for s in specs if s.has_llm}
    transform_llm = context.get("transform_llm")
    if transform_llm and any(s.transformed for s in specs):
        llms.add(transform_llm)
    models: dict[str, dict[str, object]] = {f"llm {m}": model_identity(m, options) for m in sorted(llms)}
    external = context.get("external", {})
    for name in sorted({s.retriever.split(":", 1)[1] for s in specs if s.is_external}):
        models[f"external {name}"] = {"target": external.get(name)}
    settings = {k: v for k, v in context.items() if k not in (*_CONTEXT_ELSEWHERE, *RECORD_ONLY_KEYS)}
    recorded = {
        "throughput": {k: v for k, v in options.model_dump(mode="json").items() if k in THROUGHPUT_OPTIONS},
        **({"executor": dict(executor)} if executor else {}),
        **{k: context[k] for k in RECORD_ONLY_KEYS if k in context},  # type: ignore[literal-required]
        "paths": {"input": str(data.path.resolve()), "indexes": dict(indexes), "prompts": context.get("prompts", {})},
    }
    return provenance(
        inputs=inputs,
        models=models,
        grid=journal_specs,
        items=items,
        settings={**settings, **(extra or {})},
        recorded=recorded,
    )


@dataclass(frozen=True)
class GridSetup:
    """What a grid run hands to its journal, its workers and its manifest (built by :func:`grid_setup`).

    ``journal_specs``: what the journal records per pipeline id to detect changed settings;
    ``worker_specs``: the spec each worker receives; ``manifest``: the common part (each runner adds its
    own fields, the provenance included); ``provenance``: what the answers depend on (:func:`grid_provenance`),
    which the journal compares with what the folder holds (:func:`ragrade.provenance.decide`).
    """

    specs: list[PipelineSpec]
    pool: list[str]
    items: list[str]
    context: WorkerContext
    journal_specs: dict[str, SpecRecord]
    worker_specs: dict[str, SpecRecord]
    manifest: dict[str, Any]
    provenance: dict[str, Any]

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
    prov = grid_provenance(
        data,
        digest,
        items,
        context,
        journal_specs,
        specs,
        cfg.llm_options,
        executor=executor.describe(),
        extra=fingerprint_extra,
    )
    manifest["provenance"] = prov
    return GridSetup(specs, pool, items, context, journal_specs, worker_specs, manifest, prov)


__all__ = [
    "RECORD_ONLY_KEYS",
    "GridInput",
    "GridSetup",
    "grid_provenance",
    "grid_setup",
    "index_digest",
    "input_context",
    "model_identity",
    "pipeline_context",
    "plan_items",
    "split_icl_pool",
    "worker_context",
]
