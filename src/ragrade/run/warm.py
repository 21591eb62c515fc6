"""Work a local sweep does once, before it dispatches its shards: the retrieval of every distinct batch, then the
per-text work an LLM can do ahead of its requests, in one call per LLM (pipelines whose retrieval calls an LLM are
left to their shards: :func:`_warmable`).

Without this step the shards meet that work one by one: each shard's first retrieval blocks the event loop,
and the offline baselines embed each shard's new sentences in a call of their own (many part-filled batches
of the fixed-shape embedder, one at a time). Here every batch's passages go into the resources' memo (the
shards read them back, :meth:`ragrade.run.pipeline.Resources.contexts`), and an LLM with a ``prefetch``
method (:class:`Prefetching`: the offline baselines) receives every (question, passages, candidates) its
requests will carry, so it embeds all their texts in one batched call on every core.

Nothing here changes an answer: the shards ask for the same passages and the same texts, and get them from the
memos. A failure here is left to the shard that meets it (it is recorded on its rows there, as without this
step). ``RAGRADE_SHARE_RETRIEVAL=0`` turns it off with the rest of the sharing (:mod:`ragrade.retrieval.query_memo`).

Every part of it is announced to the progress display as a phase (:mod:`ragrade.progress_phases`), counted:
``retrieving passages for 3,000 questions x 18 retrieval settings: 1,200/54,000 (2%) 40.0/s ETA 22:00`` (each
distinct batch of questions under each distinct retrieval settings is one unit of work; pipelines that differ
only downstream read it from the memo), then ``embedding the texts of 54,000 requests for offline/student`` in
slices. :func:`loading_components` does the same for the models, indexes and retrievers a sweep builds before
it starts (``loading hf/MODEL: 2/21 ...``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from ragrade.exam.files import Question
from ragrade.progress_phases import Phase, phase
from ragrade.run.answer import answer_method, candidate_texts
from ragrade.run.pipeline import Resources
from ragrade.run.shared import retrieve_counted
from ragrade.run.spec import AnswerConfig, PipelineSpec

if TYPE_CHECKING:
    from ragrade.llm.base import LLM
    from ragrade.retrieval.base import Retriever
    from ragrade.retrieval.transforms import RetrievalPipeline

log = logging.getLogger(__name__)
PREFETCH_SLICE = 64  # prefetch items per call: a count for the display; each text is still embedded once

#: one item of :meth:`Prefetching.prefetch`: (question, passages, candidate texts)
PrefetchItem = tuple[str, tuple[str, ...], tuple[str, ...]]


@runtime_checkable
class Prefetching(Protocol):
    """An LLM that can do the per-text work of many requests ahead, in one call (the offline baselines)."""

    def prefetch(self, items: Sequence[PrefetchItem]) -> None:
        """Prepare what scoring ``items`` needs (results are kept for the requests that follow)."""
        ...


def _warmable(spec: PipelineSpec) -> bool:
    """Pipelines whose passages are quick to fetch ahead, without side effects.

    Not an external system, a replay or a pipeline without an LLM; and no LLM in the retrieval (HyDE,
    multi-query, LLM rerank or compression): those calls stay in the shards, where the progress display counts
    them, instead of running for minutes before the first row.
    """
    from ragrade.retrieval.transforms import POST_KIND, QUERY_KIND, needs_llm, parse_post

    if spec.is_external or spec.llm.startswith("replay/") or not spec.has_llm:
        return False
    if not spec.needs_index:
        return True
    return not needs_llm(QUERY_KIND, spec.query) and not any(needs_llm(POST_KIND, p) for p in parse_post(spec.post))


def warm(
    res: Resources,
    pipelines: Mapping[str, Mapping[str, object]],
    batches: Sequence[tuple[str, Sequence[str]]],
    answer: AnswerConfig,
) -> int:
    """Fetch the passages of every pending shard (``batches``: pipeline id, item ids) and prefetch LLM work.

    Returns the number of (question, passages, candidates) items handed to a ``prefetch``.
    """
    from ragrade.retrieval.query_memo import sharing_enabled

    if not sharing_enabled():
        return 0
    todo: dict[str, tuple[PipelineSpec, list[Question]]] = {}
    for pid, items in batches:
        spec = PipelineSpec.model_validate(dict(pipelines[pid]))
        if _warmable(spec):
            todo[json.dumps([pid, list(items)])] = (spec, res.select(list(items)))
    found = retrieve_counted(res, todo) if todo else {}
    wanted: dict[str, tuple[Prefetching, dict[PrefetchItem, None]]] = {}
    for key, ctxs in found.items():
        spec, qs = todo[key]
        try:
            llm = res.llm(spec.llm)
        except Exception:  # e.g. an unknown model or a missing package: the shard meets it and reports it
            continue
        if not isinstance(llm, Prefetching):
            continue
        method = answer_method(llm, spec)
        items_of = wanted.setdefault(spec.llm, (llm, {}))[1]
        for q, ctx in zip(qs, ctxs, strict=True):
            if ctx.error is None and ctx.passages:
                items_of[(q.question, tuple(ctx.passages), tuple(candidate_texts(q, answer, method)))] = None
    done = 0
    for llm_spec, (backend, items_of) in wanted.items():
        if _prefetch_counted(llm_spec, backend, list(items_of)):
            done += len(items_of)
    return done


def _prefetch_counted(llm_spec: str, backend: Prefetching, items: list[PrefetchItem]) -> bool:
    """Hand ``items`` to ``backend.prefetch`` in slices, announced as a counted phase; False when it failed."""
    text = f"embedding the texts of {len(items):,} requests for {llm_spec}"
    with phase(text, len(items)) as counted:
        for start in range(0, len(items), PREFETCH_SLICE):
            part = items[start : start + PREFETCH_SLICE]
            try:
                backend.prefetch(part)
            except Exception as exc:  # the shards do the work themselves and record any failure on their rows
                log.debug("prefetch for %s failed: %s", llm_spec, exc)
                return False
            counted.advance(len(part))
    return True


def component_count(specs: Sequence[PipelineSpec]) -> int:
    """The distinct components :func:`ragrade.run.sweep.check_components` builds: LLMs, retrievers over their
    index, retrieval pipelines with a query transform or post chain, external systems."""
    keys: set[tuple[str, ...]] = set()
    for s in specs:
        if s.has_llm:
            keys.add(("llm", s.llm))
        if not s.is_external:
            keys.add(("retriever", s.chunker, s.retriever))
        if s.needs_index and s.transformed:
            keys.add(("retrieval", s.chunker, s.retriever, s.query, s.post))
        if s.is_external:
            keys.add(("external", s.retriever))
    return len(keys)


class _Announcing:
    """Resources whose component builders announce what they load and count each distinct one (a phase)."""

    def __init__(self, res: Resources, counted: Phase) -> None:
        self.res, self.counted, self.seen = res, counted, set[tuple[str, ...]]()
        self.context = res.context

    def _built(self, key: tuple[str, ...], text: str) -> bool:
        """True the first time ``key`` is built (the phase then says ``text``)."""
        if key in self.seen:
            return False
        self.seen.add(key)
        self.counted.advance(0, text=f"loading {text} ({len(self.seen)} of {self.counted.total})")
        return True

    def __getattr__(self, name: str) -> object:  # anything else check_components may ask: the resources' own
        return getattr(self.res, name)

    def template(self, name: str) -> object:
        return self.res.template(name)

    def llm(self, spec: str) -> LLM:
        first = self._built(("llm", spec), spec)
        try:
            return self.res.llm(spec)
        finally:
            self.counted.advance(1 if first else 0)

    def retriever(self, chunker: str, spec: str) -> Retriever:
        first = self._built(("retriever", chunker, spec), f"retriever {spec} over {chunker}")
        try:
            return self.res.retriever(chunker, spec)
        finally:
            self.counted.advance(1 if first else 0)

    def retrieval(self, spec: PipelineSpec) -> RetrievalPipeline:
        key = ("retrieval", spec.chunker, spec.retriever, spec.query, spec.post)
        first = self._built(key, f"query {spec.query} / post {spec.post} for {spec.retriever}")
        try:
            return self.res.retrieval(spec)
        finally:
            self.counted.advance(1 if first else 0)

    def external(self, name: str) -> object:
        first = self._built(("external", name), f"external system {name}")
        try:
            return self.res.external(name)
        finally:
            self.counted.advance(1 if first else 0)


@contextmanager
def loading_components(res: Resources, specs: Sequence[PipelineSpec]) -> Iterator[Resources]:
    """``res`` as :func:`ragrade.run.sweep.check_components` should build from: each distinct model, index,
    retriever and external system it builds is announced (``loading hf/MODEL (2 of 21)``) and counted, with
    a rate and an ETA, on the progress display. What is built lands in ``res`` itself."""
    total = component_count(specs)
    with phase(f"loading {total} models, indexes and retrievers", total) as counted:
        yield cast(Resources, _Announcing(res, counted))  # the builders check_components calls, announced


__all__ = ["PREFETCH_SLICE", "PrefetchItem", "Prefetching", "component_count", "loading_components", "warm"]
