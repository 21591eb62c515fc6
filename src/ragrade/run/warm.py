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
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from ragrade.exam.files import Question
from ragrade.run.answer import answer_method, candidate_texts
from ragrade.run.pipeline import Resources
from ragrade.run.shared import retrieve_all
from ragrade.run.spec import AnswerConfig, PipelineSpec

log = logging.getLogger(__name__)

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
    from ragrade.llm.base import run_sync
    from ragrade.retrieval.query_memo import sharing_enabled

    if not sharing_enabled():
        return 0
    todo: dict[str, tuple[PipelineSpec, list[Question]]] = {}
    for pid, items in batches:
        spec = PipelineSpec.model_validate(dict(pipelines[pid]))
        if _warmable(spec):
            todo[json.dumps([pid, list(items)])] = (spec, res.select(list(items)))
    found = run_sync(retrieve_all(res, todo)) if todo else {}
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
        try:
            backend.prefetch(list(items_of))
        except Exception as exc:  # the shards do the work themselves and record any failure on their rows
            log.debug("prefetch for %s failed: %s", llm_spec, exc)
            continue
        done += len(items_of)
    return done


__all__ = ["PrefetchItem", "Prefetching", "warm"]
