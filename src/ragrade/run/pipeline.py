"""Worker-side pipeline resources: the questions, indexes, retrievers, LLMs, prompts, external systems.

A worker receives a JSON *context* (file paths and settings, see
:func:`ragrade.run.setup.pipeline_context`) and builds what it needs lazily,
once per process: :func:`resources_for` caches one :class:`Resources` per
context (:func:`cached_resources` does the same for a subclass, e.g. the QA
worker's). :meth:`Resources.contexts` fetches the passages of a batch of
questions for one pipeline (a retriever registered to search no index, such
as closed book and the oracle; an index retriever; an external system),
retrieval batched.

The questions are the exam named by ``context["exam"]`` unless the caller
passes its own (free-text QA passes its items in exam form).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar, cast

from ragrade.errors import ConfigError, DataError, MissingDependency
from ragrade.exam.files import Question, read_exam
from ragrade.run.contexts import Contexts
from ragrade.run.external import ExternalSystem, create_external
from ragrade.run.prompts import PromptTemplate, resolve_template
from ragrade.run.records import WorkerContext
from ragrade.run.spec import EXTERNAL_PREFIX, PipelineSpec

if TYPE_CHECKING:
    from ragrade.llm.base import LLM
    from ragrade.llm.options import LLMOptions
    from ragrade.retrieval.base import Hit, Retriever
    from ragrade.retrieval.index import Index
    from ragrade.retrieval.transforms import RetrievalPipeline

_FATAL = (ConfigError, DataError, MissingDependency)  # a worker stops on these (a damaged index is DataError)


def icl_examples(question_id: str, pool: Sequence[Question], n: int, seed: int) -> list[Question]:
    """``n`` few-shot examples for ``question_id`` from the held-out ``pool`` (never the question itself).

    The choice depends only on the seed and the question id (a per-question
    permutation of the pool), so ICL@1's example is ICL@2's first one.
    """
    if n <= 0:
        return []
    candidates = [q for q in pool if q.id != question_id]
    digest = hashlib.sha256(f"{seed}\0{question_id}".encode()).hexdigest()
    rng = random.Random(int(digest[:16], 16))
    order = list(range(len(candidates)))
    rng.shuffle(order)
    return [candidates[i] for i in order[:n]]


class Resources:
    """Everything a worker loads for a context, built on first use.

    ``questions`` are the questions the pipelines answer (and the ICL pool is
    drawn from); when not given they are read from the exam file
    ``context["exam"]``.
    """

    source = "the exam"  # what the questions come from, for error messages

    def __init__(self, context: WorkerContext, questions: Iterable[Question] | None = None) -> None:
        self.context: WorkerContext = context.copy()
        if questions is None:
            if "exam" not in context:
                raise ConfigError("the worker context names no exam file and no questions were given")
            _, questions = read_exam(context["exam"])
        self.questions: dict[str, Question] = {q.id: q for q in questions}
        self.pool = [self.questions[i] for i in context.get("icl_pool", [])]
        self.seed = int(context.get("seed", 0))
        self._indexes: dict[str, Index] = {}
        self._retrievers: dict[tuple[str, str], Retriever] = {}
        self._pipelines: dict[tuple[str, str, str, str], RetrievalPipeline] = {}
        self._llms: dict[str, LLM] = {}
        self._templates: dict[str, PromptTemplate] = {}
        self._external: dict[str, ExternalSystem] = {}
        self._lock = threading.Lock()
        from ragrade.retrieval.query_memo import Memo

        self._retrieved = Memo(2048)  # contexts by (retrieval settings, batch): shared by pipelines

    def select(self, ids: Sequence[str]) -> list[Question]:
        """The questions with ``ids``, in order; ConfigError naming the first unknown ones."""
        unknown = [i for i in ids if i not in self.questions]
        if unknown:
            raise ConfigError(f"question ids not in {self.source}: {unknown[:3]}")
        return [self.questions[i] for i in ids]

    # ------------------------------------------------------------ components
    @functools.cached_property
    def llm_options(self) -> LLMOptions:
        """The run's :class:`~ragrade.llm.options.LLMOptions`, read once from the context's JSON (which is how they
        reach a worker process); every LLM of this context is built with this one object."""
        from ragrade.llm import LLMOptions

        return LLMOptions.model_validate(self.context.get("llm_options") or {})

    def llm(self, spec: str) -> LLM:
        """The LLM for ``spec`` (created once)."""
        options = self.llm_options
        with self._lock:
            if spec not in self._llms:
                from ragrade.llm import create_llm

                self._llms[spec] = create_llm(spec, options.for_llm(spec))  # a grid shares its options
            return self._llms[spec]

    def index(self, label: str) -> Index:
        """The loaded index called ``label``."""
        with self._lock:
            if label not in self._indexes:
                dirs = self.context.get("indexes", {})
                if label not in dirs:
                    raise ConfigError(f"no index called '{label}'; known: {', '.join(dirs) or '(none)'}")
                from ragrade.retrieval.index import load_index  # type: ignore[import-not-found,unused-ignore]

                self._indexes[label] = load_index(dirs[label])
            return self._indexes[label]

    def retriever(self, chunker: str, spec: str) -> Retriever:
        """The retriever ``spec`` over index ``chunker`` (over none for one registered with ``needs_index=False``)."""
        key = (chunker, spec)
        if key not in self._retrievers:
            from ragrade.registry import create
            from ragrade.retrieval.base import RETRIEVER_KIND, Retriever, retriever_caps

            options = self.context.get("retriever_options", {})
            if retriever_caps(spec).needs_index:
                made = self.index(chunker).retriever(spec, **options)
            else:
                made = create(RETRIEVER_KIND, spec, index=None, **options)
            if not isinstance(made, Retriever):  # a plugin that is no Retriever (name, retrieve, describe)
                raise ConfigError(f"retriever '{spec}' does not implement ragrade.retrieval.base.Retriever")
            self._retrievers[key] = made
        return self._retrievers[key]

    def retrieval(self, spec: PipelineSpec) -> RetrievalPipeline:
        """The :class:`~ragrade.retrieval.transforms.RetrievalPipeline` of ``spec`` (query transform, post chain)."""
        key = (spec.chunker, spec.retriever, spec.query, spec.post)
        if key not in self._pipelines:
            from ragrade.retrieval.transforms import build_pipeline

            tx_llm = self.context.get("transform_llm")
            self._pipelines[key] = build_pipeline(
                self.index(spec.chunker),
                self.retriever(spec.chunker, spec.retriever),
                spec.query,
                spec.post,
                llm=self.llm(tx_llm) if tx_llm else None,
                options=self.context.get("transform_options") or {},
            )
        return self._pipelines[key]

    def template(self, name: str) -> PromptTemplate:
        """The prompt template called ``name``."""
        if name not in self._templates:
            self._templates[name] = resolve_template(name, self.context.get("prompts", {}))
        return self._templates[name]

    def external(self, name: str) -> ExternalSystem:
        """The external system called ``name``."""
        if name not in self._external:
            targets = self.context.get("external", {})
            if name not in targets:
                raise ConfigError(f"external pipeline '{name}' is not defined")
            dry_run = bool(self.context.get("llm_options", {}).get("dry_run", False))
            self._external[name] = create_external(name, targets[name], dry_run=dry_run)
        return self._external[name]

    def examples(self, question_id: str, n: int) -> list[Question]:
        """Few-shot examples for a question."""
        return icl_examples(question_id, self.pool, n, self.seed)

    # ------------------------------------------------------------ contexts
    async def contexts(self, spec: PipelineSpec, questions: Sequence[Question]) -> list[Contexts]:
        """Passages for each question under ``spec`` (errors recorded per question, config errors raised).

        Retrieval from an index runs once per (retrieval settings, batch of questions) in a process and is
        shared by every pipeline that differs only downstream (LLM, ICL, prompt); a Ray worker first reads
        what the driver computed before dispatch (:mod:`ragrade.run.shared`). ``RAGRADE_SHARE_RETRIEVAL=0``
        retrieves per pipeline.
        """
        if not spec.needs_index:  # closed book, the oracle, an external system: nothing to share
            return await self._retrieve(spec, questions)
        from ragrade.retrieval.query_memo import shared_call, sharing_enabled
        from ragrade.run.shared import batch_key, load_shared

        if not sharing_enabled():
            return await self._retrieve(spec, questions)
        key = batch_key(spec, questions)
        pre = load_shared(self.context.get("shared_retrieval")).get(key)
        if pre is not None and len(pre) == len(questions):
            return [Contexts(**c) for c in pre]
        got = await shared_call((id(self), key), lambda: self._retrieve(spec, questions), self._retrieved)
        return [replace(c) for c in got]

    async def _retrieve(self, spec: PipelineSpec, questions: Sequence[Question]) -> list[Contexts]:
        if spec.is_external:
            system = self.external(spec.retriever[len(EXTERNAL_PREFIX) :])
            results = await system.aquery(questions, spec.k)
            return [
                Contexts(
                    passages=r.contexts[: spec.k] if spec.k else r.contexts,
                    chunk_ids=r.context_ids[: spec.k] if spec.k else r.context_ids,
                    doc_ids=r.context_docs[: spec.k] if spec.k else r.context_docs,
                    error=r.error,
                    external=r,
                )
                for r in results
            ]
        if not spec.needs_index:
            return self._index_free(spec, questions)
        if spec.transformed:
            return await self._transformed(spec, questions)
        return self._ask(spec, questions, None, lambda hl: self.shown(spec, hl))

    def _ask(
        self,
        spec: PipelineSpec,
        questions: Sequence[Question],
        gold: list[list[Hit]] | None,
        passages: Callable[[Sequence[Hit]], list[str]],
    ) -> list[Contexts]:
        """The pipeline's retriever asked for ``questions`` (with each one's ``gold`` hits, for a retriever that
        takes them); ``passages`` renders a hit list. A failure, or a wrong number of hit lists, is an error on
        every row of the batch, never a dropped row."""
        from ragrade.retrieval.base import GoldRetriever

        retriever = self.retriever(spec.chunker, spec.retriever)
        queries = [q.question for q in questions]
        try:
            if gold is None:
                hits = retriever.retrieve(queries, spec.k)
            else:
                hits = cast(GoldRetriever, retriever).retrieve(queries, spec.k, gold=gold)
        except _FATAL:
            raise
        except Exception as exc:  # recorded on every row of the batch, never dropped
            msg = f"retrieval failed: {type(exc).__name__}: {exc}"[:500]
            return [Contexts(error=msg) for _ in questions]
        if len(hits) != len(questions):
            msg = f"retriever returned {len(hits)} hit lists for {len(questions)} queries"
            return [Contexts(error=msg) for _ in questions]
        return [
            Contexts(passages=passages(hl), chunk_ids=[h.chunk_id for h in hl], doc_ids=[h.doc_id for h in hl])
            for hl in hits
        ]

    def shown(self, spec: PipelineSpec, hits: Sequence[Hit]) -> list[str]:
        """The passages the reader sees: fences of a split code block balanced; the heading path first when the
        context sets ``passage_headings`` (see :mod:`ragrade.retrieval.passages`)."""
        from ragrade.retrieval.passages import shown_passages

        headings = bool(self.context.get("passage_headings", False))
        return shown_passages(hits, self.index(spec.chunker).chunk, headings=headings)

    async def _transformed(self, spec: PipelineSpec, questions: Sequence[Question]) -> list[Contexts]:
        pipe = self.retrieval(spec)
        try:
            results = await pipe.arun([q.question for q in questions], spec.k)
        except _FATAL:
            raise
        except Exception as exc:  # recorded on every row of the batch, never dropped
            msg = f"retrieval failed: {type(exc).__name__}: {exc}"[:500]
            return [Contexts(error=msg) for _ in questions]
        return [
            Contexts(
                passages=self.shown(spec, r.hits),
                chunk_ids=[h.chunk_id for h in r.hits],
                doc_ids=[h.doc_id for h in r.hits],
                transform_error=r.error,
            )
            for r in results
        ]

    def _index_free(self, spec: PipelineSpec, questions: Sequence[Question]) -> list[Contexts]:
        """Passages from a retriever that searches no index (closed book, the oracle, a plugin's), as it returns them.

        One registered with ``needs_gold`` is handed each question's source passage (chunk id, doc id, text); a
        question without one gets an error row and is not asked.
        """
        from ragrade.retrieval.base import Hit, retriever_caps

        needs_gold = retriever_caps(spec.retriever).needs_gold
        asked = [i for i, q in enumerate(questions) if q.context or not needs_gold]
        qs = [questions[i] for i in asked]
        gold = [[Hit(q.chunk_id, q.doc_id, 1.0, 1, q.context)] for q in qs] if needs_gold else None
        got = dict(zip(asked, self._ask(spec, qs, gold, lambda hl: [h.text for h in hl]) if qs else [], strict=True))
        missing = Contexts(error=f"the question has no source context for the {spec.retriever}")
        return [got.get(i, replace(missing)) for i in range(len(questions))]


R = TypeVar("R", bound=Resources)
_CACHE: dict[str, Resources] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 4


def cached_resources(cls: type[R], context: WorkerContext) -> R:
    """The process-wide ``cls(context)`` (built once per class and context; at most 4 kept in all).

    ``cls`` is :class:`Resources` or a subclass whose constructor takes only
    the context (e.g. the QA worker's, which reads its own question file).
    """
    key = f"{cls.__module__}.{cls.__qualname__}\0{json.dumps(context, sort_keys=True, default=str)}"
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cast(R, cached)  # the key names the class, so the type matches
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        made = cls(context)
        _CACHE[key] = made
        return made


def resources_for(context: WorkerContext) -> Resources:
    """The process-wide :class:`Resources` for ``context`` (one per distinct context, at most 4 kept)."""
    return cached_resources(Resources, context)


def clear_resources() -> None:
    """Forget cached resources (tests, long-lived processes)."""
    with _CACHE_LOCK:
        _CACHE.clear()


__all__ = ["Contexts", "Resources", "cached_resources", "clear_resources", "icl_examples", "resources_for"]
