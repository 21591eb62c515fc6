"""Query transforms and passage post-processors around a retriever (the ``query`` and ``post`` factors).

A :class:`QueryTransform` turns each query into one or more retrieval queries
(``none``, ``hyde``, ``multi-query``, ``rm3``); several are fused by reciprocal
rank. A :class:`PassageProcessor` rewrites each hit list (``rerank``,
``llm-rerank``, ``mmr``, ``threshold``, ``compress``, ``llm-compress``);
processors run in order, as a chain written ``rerank+compress``. Each is one
module registered under kind ``query_transform`` or ``post_processor``; its
factory takes ``index=`` (the loaded index), ``llm=`` (an LLM or None) and
its own options, and is registered with :func:`transform` so that a spec can
tell whether it needs an LLM before anything is built.

:class:`RetrievalPipeline` composes them: transform, retrieve (deeper than
``k`` when processors follow, so that they have candidates to choose from),
process, cut to ``k``. An LLM rewrite that fails falls back to the original
query (or passages) and is reported on the result (``errors``), never silently.
"""

from __future__ import annotations

import inspect
import math
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragrade.errors import ConfigError, DataError
from ragrade.io import JSONObject
from ragrade.registry import did_you_mean, lookup, names, register
from ragrade.retrieval.base import Hit

if TYPE_CHECKING:
    from ragrade.llm.base import LLM, Completion

F = TypeVar("F", bound=Callable[..., Any])
QUERY_KIND = "query_transform"
POST_KIND = "post_processor"
NONE = "none"
LLM_SETTING = "$transform_llm"  # how an error names where a transform's LLM comes from ($name: see ragrade.errors)
Processed = tuple[list[list[Hit]], list[str | None]]  # hit lists and, per query, an error (or None)


@dataclass
class QueryPlan:
    """What a query transform made of one query: the retrieval queries (fused by RRF when several)."""

    original: str
    queries: list[str]
    error: str | None = None  # an LLM rewrite failed: ``queries`` is the original query
    added_terms: list[str] = field(default_factory=list)  # expansion terms (rm3)


@runtime_checkable
class QueryTransform(Protocol):
    """Rewrites queries before retrieval."""

    name: str

    async def transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        """One plan per query, in order (failures recorded on the plan)."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        ...


@runtime_checkable
class PassageProcessor(Protocol):
    """Rewrites, reorders or filters the hits of each query after retrieval."""

    name: str

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """New hit lists (at most as long as given) and per query an error message or None."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        ...


def transform(kind: str, name: str, *, needs_llm: bool = False) -> Callable[[F], F]:
    """Register a factory of a query transform / post-processor, marking whether it needs an LLM."""

    def deco(factory: F) -> F:
        factory.needs_llm = needs_llm  # type: ignore[attr-defined]
        return register(kind, name)(factory)

    return deco


# --------------------------------------------------------------------------- names


def parse_post(spec: str) -> list[str]:
    """The processor names of a chain ``a+b+c`` (``none`` or empty: no processor)."""
    names = [p.strip() for p in (spec or NONE).split("+")]
    if any(not n for n in names):
        raise ConfigError(f"malformed post-processing chain '{spec}'; expected names joined by '+'")
    names = [n for n in names if n != NONE]
    return names


def needs_llm(kind: str, name: str) -> bool:
    """Whether component ``name`` of ``kind`` needs an LLM (ConfigError with did-you-mean when unknown)."""
    if name == NONE:
        return False
    return bool(getattr(lookup(kind, name), "needs_llm", False))


def check_transforms(query: str, post: str, has_llm: bool, setting: str = LLM_SETTING) -> None:
    """Validate a query transform and a post chain by name; ConfigError naming ``setting`` (where the LLM comes
    from: ``$transform_llm``, say) when an LLM is missing."""
    wanting = [query] if needs_llm(QUERY_KIND, query) else []
    wanting += [p for p in parse_post(post) if needs_llm(POST_KIND, p)]
    if wanting and not has_llm:
        raise ConfigError(f"{', '.join(wanting)} needs an LLM to rewrite with; pass {setting} PROVIDER/MODEL")


def _options(options: Mapping[str, object] | None, name: str, kind: str | None = None) -> dict[str, Any]:
    """The options of ``name`` from a ``transform_options`` table (checked by name when ``kind`` is given)."""
    opts = (options or {}).get(name) or {}
    if not isinstance(opts, dict):
        raise ConfigError(f"options of '{name}' must be a table, got {opts!r}")
    if kind is not None:
        check_options(kind, name, opts)
    return dict(opts)


_RESERVED = ("index", "llm")  # what every factory is given; never an option
POST_OPTIONS = ("depth",)  # the options under ``post``: how deep to retrieve before the processors


def _keywords(fn: Any) -> tuple[list[str], bool]:
    """Parameters of ``fn`` that take a value by keyword and have a default; whether it takes ``**kwargs``."""
    params = inspect.signature(fn).parameters.values()
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty]
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def accepted_options(kind: str, name: str) -> tuple[str, ...] | None:
    """The option names component ``name`` of ``kind`` accepts; None when they cannot be told (then any goes).

    Read from the signatures: the factory's keyword arguments and those of the class it returns (its return
    annotation), less ``index`` and ``llm``; a trailing ``_`` is dropped (``mmr``'s ``lambda``).
    """
    factory = lookup(kind, name)
    if name == NONE:
        return ()
    found, more = _keywords(factory)
    if more:  # the rest go to the class the factory builds
        try:
            made = typing.get_type_hints(factory).get("return")
        except (NameError, TypeError):
            made = None
        if not isinstance(made, type):
            return None
        own, more = _keywords(made)
        found += own
    if more:
        return None
    return tuple(dict.fromkeys(n.rstrip("_") for n in found if n not in _RESERVED))


def check_options(kind: str, name: str, opts: Mapping[str, Any]) -> None:
    """ConfigError (with did-you-mean) for an option ``name`` does not take."""
    valid = list(POST_OPTIONS) if name == "post" else accepted_options(kind, name)
    if valid is None:
        return
    for key in opts:
        if key not in valid:
            what = "post (the post-processing chain)" if name == "post" else name
            raise ConfigError(
                f"transform_options: {what} has no option '{key}'; valid: {', '.join(valid) or '(none)'}."
                + did_you_mean(str(key), list(valid))
            )


def check_transform_options(options: Mapping[str, object] | None) -> None:
    """Validate a whole ``transform_options`` table up front: every key a known transform, processor or
    ``post``, every value a table of options that component takes (ConfigError naming the first problem)."""
    known = [*names(QUERY_KIND), *names(POST_KIND)]
    for name in options or {}:
        if name == "post":
            _options(options, name, POST_KIND)
            continue
        if name not in known:
            valid = [*sorted(set(known) - {NONE}), "post"]
            raise ConfigError(
                f"transform_options: unknown transform '{name}'; valid: {', '.join(valid)}."
                + did_you_mean(str(name), valid)
            )
        _options(options, name, QUERY_KIND if name in names(QUERY_KIND) else POST_KIND)


def create_query_transform(
    name: str,
    *,
    index: object = None,
    llm: object = None,
    options: Mapping[str, object] | None = None,
    setting: str = LLM_SETTING,
) -> QueryTransform:
    """The query transform ``name`` (``options`` maps a transform name to its keyword arguments)."""
    check_transforms(name, NONE, llm is not None, setting)
    made: QueryTransform = lookup(QUERY_KIND, name)(index=index, llm=llm, **_options(options, name, QUERY_KIND))
    return made


def create_post_chain(
    spec: str,
    *,
    index: object = None,
    llm: object = None,
    options: Mapping[str, object] | None = None,
    setting: str = LLM_SETTING,
) -> list[PassageProcessor]:
    """The processors of chain ``spec`` in order."""
    check_transforms(NONE, spec, llm is not None, setting)
    return [lookup(POST_KIND, n)(index=index, llm=llm, **_options(options, n, POST_KIND)) for n in parse_post(spec)]


# --------------------------------------------------------------------------- the pipeline


@dataclass
class Retrieved:
    """One query's result: the final hits, the queries actually searched, and what failed on the way."""

    query: str
    hits: list[Hit]
    searched: list[str]
    errors: list[str] = field(default_factory=list)
    added_terms: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        """The failures joined in one line, or None."""
        return "; ".join(self.errors) if self.errors else None


def renumber(hits: Sequence[Hit]) -> list[Hit]:
    """The hits with ranks 1..n in their current order."""
    return [h if h.rank == i else replace(h, rank=i) for i, h in enumerate(hits, start=1)]


def fuse_hits(lists: Sequence[Sequence[Hit]], k: int, k_rrf: float = 60.0) -> list[Hit]:
    """Reciprocal rank fusion of hit lists by chunk id (score = sum of ``1 / (k_rrf + rank)``); ties by first seen."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for hits in lists:
        for rank, h in enumerate(hits, start=1):
            scores[h.chunk_id] = scores.get(h.chunk_id, 0.0) + 1.0 / (k_rrf + rank)
            first.setdefault(h.chunk_id, h)
    seen = {c: i for i, c in enumerate(first)}
    ranked = sorted(seen, key=lambda c: (-scores[c], seen[c]))[:k]
    return [replace(first[c], score=scores[c], rank=i) for i, c in enumerate(ranked, start=1)]


class RetrievalPipeline:
    """Query transform -> retriever -> passage processors (in order) -> top ``k``."""

    def __init__(
        self,
        retriever: Any,
        query: QueryTransform | None = None,
        post: Sequence[PassageProcessor] = (),
        *,
        depth: int | None = None,
    ) -> None:
        if depth is not None and depth <= 0:
            raise ConfigError("the candidate depth of post-processing must be positive")
        self.retriever = retriever
        self.query = query
        self.post = list(post)
        self.depth = depth
        parts = [str(retriever.name)]
        if query is not None and query.name != NONE:
            parts.append(f"query={query.name}")
        if self.post:
            parts.append("post=" + "+".join(p.name for p in self.post))
        self.name = "|".join(parts)

    def fetch_depth(self, k: int) -> int:
        """How many hits are retrieved before post-processing (``k`` without processors, else 3k)."""
        return max(k, self.depth if self.depth is not None else 3 * k) if self.post else k

    async def arun(self, queries: Sequence[str], k: int) -> list[Retrieved]:
        """One :class:`Retrieved` per query, in order."""
        from ragrade.retrieval.retrievers import check_queries

        check_queries(queries, k)
        if self.query is None:
            plans = [QueryPlan(q, [q]) for q in queries]
        else:
            plans = await self.query.transform(queries)
        depth = self.fetch_depth(k)
        flat = [q for p in plans for q in p.queries]
        raw = self.retriever.retrieve(flat, depth) if flat else []
        hits: list[list[Hit]] = []
        at = 0
        for p in plans:
            lists = raw[at : at + len(p.queries)]
            at += len(p.queries)
            hits.append(list(lists[0]) if len(lists) == 1 else fuse_hits(lists, depth))
        out = [
            Retrieved(p.original, [], list(p.queries), [p.error] if p.error else [], list(p.added_terms)) for p in plans
        ]
        for proc in self.post:
            hits, errors = await proc.process(list(queries), hits, k)
            for r, e in zip(out, errors, strict=True):
                if e:
                    r.errors.append(e)
        for r, hl in zip(out, hits, strict=True):
            r.hits = renumber(hl[:k])
        return out

    def run(self, queries: Sequence[str], k: int) -> list[Retrieved]:
        """Synchronous :meth:`arun`."""
        from ragrade.llm.base import run_sync

        return run_sync(self.arun(queries, k))

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """The :class:`~ragrade.retrieval.base.Retriever` view: top-k hits per query (failures not reported)."""
        return [r.hits for r in self.run(queries, k)]

    def describe(self) -> JSONObject:
        """Arguments for the manifest: the retriever, the transform and each processor."""
        return {
            "retriever": self.retriever.describe() if hasattr(self.retriever, "describe") else str(self.retriever),
            "query": self.query.describe() if self.query is not None else {"name": NONE},
            "post": [p.describe() for p in self.post],
            "depth": self.depth if self.depth is not None else "3k" if self.post else "k",
        }


def build_pipeline(
    index: object,
    retriever: object,
    query: str = NONE,
    post: str = NONE,
    *,
    llm: object = None,
    options: dict[str, Any] | None = None,
    setting: str = LLM_SETTING,
) -> RetrievalPipeline:
    """A :class:`RetrievalPipeline` from names (``options``: per-name keyword arguments; ``depth`` under ``post``)."""
    check_transforms(query, post, llm is not None, setting)
    qt = (
        None if query == NONE else create_query_transform(query, index=index, llm=llm, options=options, setting=setting)
    )
    chain = create_post_chain(post, index=index, llm=llm, options=options, setting=setting)
    depth = _options(options, "post", POST_KIND).get("depth")
    return RetrievalPipeline(retriever, qt, chain, depth=int(depth) if depth is not None else None)


# --------------------------------------------------------------------------- shared helpers


class Identity:
    """The ``none`` transform and processor: changes nothing."""

    name = NONE

    async def transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        """Each query as it is."""
        return [QueryPlan(q, [q]) for q in queries]

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """The hits as they are."""
        return hits, [None] * len(hits)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"name": NONE}


@transform(QUERY_KIND, NONE)
def _none_query(**_: object) -> Identity:
    return Identity()


@transform(POST_KIND, NONE)
def _none_post(**_: object) -> Identity:
    return Identity()


_WORD = re.compile(r"[A-Za-z0-9_]+")


class Similarity:
    """Cosine similarities of texts: the index's embedder when it has dense vectors, else bag-of-words cosine."""

    def __init__(self, index: Any = None, embedder: Any = None) -> None:
        self.embedder = embedder
        self.index: Any = None
        if self.embedder is None and index is not None and (getattr(index, "manifest", None) or {}).get("embedder"):
            self.embedder = index.embedder()
            self.index = index  # its stored chunk vectors stand in for unchanged passages
        self.kind = f"embedder:{self.embedder.name}" if self.embedder is not None else "bag-of-words"
        self._matrix: Any = None

    def _stored(self) -> Any:
        if self._matrix is None and self.index is not None:
            try:
                from ragrade.retrieval.store import create_store

                info = self.index.manifest["embedder"]
                store: Any = create_store("exact", self.index.path / "dense", int(info["dim"]))
                self._matrix = store.matrix()
            except Exception:  # no exact matrix: embed the passages instead
                self.index = None
        return self._matrix

    def batch(self, queries: Sequence[str], hit_lists: Sequence[Sequence[Hit]]) -> list[npt.NDArray[np.float64]]:
        """Per query: rows for the query then each hit, embedded in one call for the whole batch.

        A hit whose text is its whole chunk reuses the index's stored vector instead of being embedded.
        """
        if self.embedder is None:  # bag-of-words: one vocabulary per query and its passages
            return [self.vectors([q, *(h.text for h in hl)]) for q, hl in zip(queries, hit_lists, strict=True)]
        matrix = self._stored()
        texts: list[str] = list(queries)
        plan: list[list[tuple[str, int]]] = []
        for hl in hit_lists:
            rows = []
            for h in hl:
                pos = self._position(h) if matrix is not None else None
                if pos is not None:
                    rows.append(("stored", pos))
                else:
                    rows.append(("fresh", len(texts)))
                    texts.append(h.text)
            plan.append(rows)
        fresh = self.vectors(texts)
        out = []
        for i, rows in enumerate(plan):
            vecs = [fresh[i]] + [np.asarray(matrix[j] if kind == "stored" else fresh[j]) for kind, j in rows]
            out.append(np.vstack(vecs).astype(np.float64))
        return out

    def _position(self, hit: Hit) -> int | None:
        try:
            pos = int(self.index.position(hit.chunk_id))
        except DataError:
            return None
        return pos if self.index.chunks[pos].text == hit.text else None

    def vectors(self, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        """L2-normalised rows, one per text."""
        if self.embedder is not None:
            return np.asarray(self.embedder.embed(list(texts)), dtype=np.float64)
        vocab: dict[str, int] = {}
        bags = []
        for t in texts:
            bag: dict[int, float] = {}
            for w in _WORD.findall(t.lower()):
                j = vocab.setdefault(w, len(vocab))
                bag[j] = bag.get(j, 0.0) + 1.0
            bags.append(bag)
        mat = np.zeros((len(texts), max(1, len(vocab))), dtype=np.float64)
        for i, bag in enumerate(bags):
            for j, v in bag.items():
                mat[i, j] = v
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return mat / np.where(norms > 0, norms, 1.0)

    def to_query(self, query: str, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        """Cosine of each text to ``query``."""
        if not texts:
            return np.zeros(0)
        vecs = self.vectors([query, *texts])
        sims: npt.NDArray[np.float64] = vecs[1:] @ vecs[0]
        return sims


async def ask_llm(
    llm: LLM, prompts: Sequence[tuple[str, str]], *, task: str, max_tokens: int, questions: Sequence[str]
) -> list[Completion]:
    """Completions of ``(system, user)`` prompts, batched in one call (temperature 0, cached by the LLM)."""
    from ragrade.llm.base import GenerationRequest, Message

    reqs = [
        GenerationRequest(
            messages=(Message("system", s), Message("user", u)),
            temperature=0.0,
            max_tokens=max_tokens,
            question=q,
            task=task,
        )
        for (s, u), q in zip(prompts, questions, strict=True)
    ]
    return list(await llm.agenerate(reqs)) if reqs else []


async def ask_per_passage(
    llm: LLM,
    system: str,
    user: str,
    queries: Sequence[str],
    hits: Sequence[Sequence[Hit]],
    *,
    task: str,
    max_tokens: int,
) -> list[Completion]:
    """One completion per (query, passage), in hit order: ``user`` with ``{question}`` and ``{passage}`` filled."""
    prompts, qs = [], []
    for q, hl in zip(queries, hits, strict=True):
        for h in hl:
            prompts.append((system, user.replace("{question}", q).replace("{passage}", h.text.strip())))
            qs.append(q)
    return await ask_llm(llm, prompts, task=task, max_tokens=max_tokens, questions=qs)


def failure(name: str, comp: Completion) -> str:
    """The message of a failed rewrite (an empty reply counts as a failure)."""
    why = comp.error if comp.error else "empty reply"
    return f"{name} failed ({str(why)[:160]}); used the original"


def finite(x: float) -> bool:
    """True for a finite float."""
    return not (math.isnan(x) or math.isinf(x))


__all__ = [
    "LLM_SETTING",
    "NONE",
    "POST_KIND",
    "POST_OPTIONS",
    "QUERY_KIND",
    "PassageProcessor",
    "Processed",
    "QueryPlan",
    "QueryTransform",
    "RetrievalPipeline",
    "Retrieved",
    "Similarity",
    "accepted_options",
    "ask_llm",
    "ask_per_passage",
    "build_pipeline",
    "check_options",
    "check_transform_options",
    "check_transforms",
    "create_post_chain",
    "create_query_transform",
    "failure",
    "fuse_hits",
    "needs_llm",
    "parse_post",
    "renumber",
    "transform",
]
