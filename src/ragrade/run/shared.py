"""Retrieval shared by the pipelines of a grid: computed once per (retrieval settings, batch), before dispatch.

Pipelines that differ only downstream of retrieval (LLM, ICL, prompt, method) get the same passages. In one
process, :meth:`ragrade.run.pipeline.Resources.contexts` keeps them (a memo); for workers in other
processes (Ray), :func:`precompute` retrieves every distinct batch of the pending shards in the driver
and writes the passages to one JSON file (:data:`SHARED_FILE` in the run directory, removed when the run
ends); the context names it as ``shared_retrieval`` and a worker reads it once (:func:`load_shared`).
A worker that cannot read it (a remote cluster without the run directory) retrieves itself.

A batch is a shard's list of questions: the per-pipeline path retrieves shard by shard, so the shared
passages equal the ones each pipeline would have retrieved (``RAGRADE_SHARE_RETRIEVAL=0``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from ragrade.exam.files import Question
from ragrade.progress_phases import Phase, phase
from ragrade.run.spec import PipelineSpec

if TYPE_CHECKING:
    from ragrade.run.contexts import Contexts

SHARED_FILE = "retrieval.shared.json"


class Resources(Protocol):
    """What :func:`precompute` needs of a worker's resources (:class:`ragrade.run.pipeline.Resources`)."""

    def select(self, ids: Sequence[str]) -> list[Question]:
        """The questions with ``ids``, in order."""
        ...

    async def contexts(self, spec: PipelineSpec, questions: Sequence[Question]) -> list[Contexts]:
        """Passages for each question under ``spec``."""
        ...


_VERSION = 1


def retrieval_key(spec: PipelineSpec) -> tuple[str, str, str, str, int]:
    """What the passages of a pipeline depend on: index, retriever, query transform, post chain, k."""
    return (spec.chunker, spec.retriever, spec.query, spec.post, int(spec.k))


def needs_retrieval(spec: PipelineSpec) -> bool:
    """Whether ``spec`` retrieves from an index (not closed book, oracle, an external system or a replay)."""
    return spec.needs_index and not spec.is_external and not spec.llm.startswith("replay/")


def batch_key(spec: PipelineSpec, questions: Sequence[Question]) -> str:
    """The key of one batch of questions under ``spec``'s retrieval settings (a JSON string)."""
    return json.dumps([list(retrieval_key(spec)), [[q.id, q.question] for q in questions]], ensure_ascii=False)


class SharedContexts(TypedDict):
    """The fields of one :class:`~ragrade.run.contexts.Contexts` as the shared file holds them."""

    passages: list[str]
    chunk_ids: list[str]
    doc_ids: list[str]
    error: str | None
    transform_error: str | None


_LOADED: dict[str, dict[str, list[SharedContexts]]] = {}
_LOCK = threading.Lock()
FIELDS = ("passages", "chunk_ids", "doc_ids", "error", "transform_error")  # of a Contexts, as written


def load_shared(path: str | None) -> Mapping[str, list[SharedContexts]]:
    """The precomputed contexts (their :data:`FIELDS`) in ``path`` by batch key (read once; empty if unreadable)."""
    if not path:
        return {}
    with _LOCK:
        if path not in _LOADED:
            _LOADED[path] = _read(Path(path))
        return _LOADED[path]


def _read(path: Path) -> dict[str, list[SharedContexts]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict) or raw.get("version") != _VERSION:
        return {}
    return {
        key: [
            SharedContexts(
                passages=c.get("passages"),
                chunk_ids=c.get("chunk_ids"),
                doc_ids=c.get("doc_ids"),
                error=c.get("error"),
                transform_error=c.get("transform_error"),
            )
            for c in batch
        ]
        for key, batch in raw["batches"].items()
    }


def forget_shared(path: str | Path) -> None:
    """Drop what :func:`load_shared` read from ``path`` (the file is removed or rewritten)."""
    with _LOCK:
        _LOADED.pop(str(path), None)


def precompute(
    res: Resources,
    pipelines: Mapping[str, Mapping[str, object]],
    batches: Sequence[tuple[str, Sequence[str]]],
    path: Path,
) -> int:
    """Retrieve each distinct (retrieval settings, batch) of ``batches`` once and write them to ``path``.

    ``batches`` are (pipeline id, item ids) pairs (the pending shards); ``res`` is the driver's
    :class:`~ragrade.run.pipeline.Resources` (its memo serves the pipelines of a local run too).
    A batch whose retrieval raises a configuration error is left out: the worker meets the error itself.
    Returns the number of distinct batches written.
    """
    todo: dict[str, tuple[PipelineSpec, list[Question]]] = {}
    for pid, items in batches:
        spec = PipelineSpec.model_validate(dict(pipelines[pid]))
        if not needs_retrieval(spec):
            continue
        qs = res.select(list(items))
        todo.setdefault(batch_key(spec, qs), (spec, qs))
    out = retrieve_counted(res, todo)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    doc = {"version": _VERSION, "batches": {k: [{f: getattr(c, f) for f in FIELDS} for c in v] for k, v in out.items()}}
    tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)
    forget_shared(path)
    return len(out)


async def retrieve_all(
    res: Resources, todo: Mapping[str, tuple[PipelineSpec, list[Question]]]
) -> dict[str, list[Contexts]]:
    """The passages of each ``todo`` batch by key, four at a time; a batch whose retrieval raises a configuration,
    data or dependency error is left out (the shard meets the error itself)."""
    import asyncio

    from ragrade.errors import ConfigError, DataError, MissingDependency

    sem = asyncio.Semaphore(4)
    out: dict[str, list[Contexts]] = {}

    async def one(key: str, spec: PipelineSpec, qs: list[Question]) -> None:
        async with sem:
            try:
                out[key] = await res.contexts(spec, qs)
            except (ConfigError, DataError, MissingDependency):
                return

    await asyncio.gather(*(one(k, s, q) for k, (s, q) in todo.items()))
    return {k: out[k] for k in todo if k in out}


def retrieve_counted(
    res: Resources, todo: Mapping[str, tuple[PipelineSpec, list[Question]]]
) -> dict[str, list[Contexts]]:
    """:func:`~ragrade.run.shared.retrieve_all` of ``todo``, announced as a phase counted in questions: each
    distinct (retrieval settings, batch) is retrieved once (into the resources' memo, where the shards find it)
    and given to every pipeline of ``todo`` that asks for it."""
    from ragrade.llm.base import run_sync

    distinct: dict[str, tuple[PipelineSpec, list[Question]]] = {}
    key_of: dict[str, str] = {}
    for key, (spec, qs) in todo.items():
        key_of[key] = batch_key(spec, qs) if spec.needs_index else key
        distinct.setdefault(key_of[key], (spec, qs))
    questions = len({q.id for _, qs in distinct.values() for q in qs})
    settings = len({retrieval_key(spec) for spec, _ in distinct.values()})
    total = sum(len(qs) for _, qs in distinct.values())
    plural = "" if settings == 1 else "s"
    text = f"retrieving passages for {questions:,} questions x {settings} retrieval setting{plural}"
    with phase(text, total) as counted:
        got = run_sync(retrieve_all(_Counting(res, counted), distinct))
    return {key: got[k] for key, k in key_of.items() if k in got}  # read only: the prefetch items


class _Counting:
    """Resources whose retrievals advance a phase by their questions (for :func:`retrieve_all`)."""

    def __init__(self, res: Resources, counted: Phase) -> None:
        self.res, self.counted = res, counted

    def select(self, ids: Sequence[str]) -> list[Question]:
        return self.res.select(ids)

    async def contexts(self, spec: PipelineSpec, questions: Sequence[Question]) -> list[Contexts]:
        try:
            return await self.res.contexts(spec, questions)
        finally:
            self.counted.advance(len(questions))


__all__ = [
    "SHARED_FILE",
    "batch_key",
    "forget_shared",
    "load_shared",
    "needs_retrieval",
    "precompute",
    "retrieval_key",
    "retrieve_all",
    "retrieve_counted",
]
