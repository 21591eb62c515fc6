"""The retrievers over an index: ``bm25``, ``dense``, ``hybrid`` (RRF or weighted score fusion),
``rerank(<base>)`` (cross-encoder over a base retriever's top-N), ``closed`` and ``oracle``.

Factories are registered under kind ``retriever`` with the CLI names; each takes the
loaded :class:`~ragrade.retrieval.index.Index` as ``index=`` plus its own options.
``closed`` and ``oracle`` declare that they search no index (``index=None`` in a pipeline), their fixed k,
and (the oracle) that they are handed the gold passages: see :func:`~ragrade.retrieval.base.register_retriever`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ragrade.errors import BackendError, ConfigError, DataError
from ragrade.io import JSONObject
from ragrade.registry import register
from ragrade.retrieval.base import Hit, Retriever, register_retriever

if TYPE_CHECKING:
    from ragrade.retrieval.index import Index

Pairs = list[tuple[int, float]]


def check_queries(queries: Sequence[str], k: int) -> None:
    """ConfigError on k <= 0 or an empty query."""
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    for i, q in enumerate(queries):
        if not isinstance(q, str) or not q.strip():
            raise ConfigError(f"query {i + 1} is empty")


def to_hits(index: Index, pairs: Pairs) -> list[Hit]:
    """Hits (rank from 1) for ``(position, score)`` pairs."""
    hits: list[Hit] = []
    for rank, (pos, score) in enumerate(pairs, start=1):
        ch = index.chunks[pos]
        hits.append(
            Hit(chunk_id=ch.id, doc_id=ch.doc_id, score=float(score), rank=rank, text=ch.text, source=ch.source)
        )
    return hits


class _PairSearch:
    """A retriever that ranks index positions (:meth:`search`, also used for fusion) and turns them into hits."""

    index: Index

    def search(self, queries: Sequence[str], k: int) -> list[Pairs]:
        """Positions and scores per query, best first."""
        raise NotImplementedError

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-k hits per query."""
        check_queries(queries, k)
        return [to_hits(self.index, p) for p in self.search(queries, k)]


class BM25Retriever(_PairSearch):
    """Sparse retrieval with the index's bm25s index."""

    name = "bm25"

    def __init__(self, index: Index) -> None:
        self.index = index

    def search(self, queries: Sequence[str], k: int) -> list[Pairs]:
        """Positions and scores (for fusion)."""
        return self.index.bm25().search(queries, k)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"retriever": self.name, "index": str(self.index.path), "bm25": self.index.manifest.get("bm25", {})}


class DenseRetriever(_PairSearch):
    """Embeds queries and searches the index's vector store by cosine."""

    name = "dense"

    def __init__(
        self, index: Index, store: str | None = None, embedder: str | None = None, **store_options: object
    ) -> None:
        self.index = index
        self.embedder = index.embedder(embedder)
        self.store = index.store(store, **store_options)

    def search(self, queries: Sequence[str], k: int) -> list[Pairs]:
        """Positions and cosines (for fusion); each batch of queries embedded and searched once (query_memo)."""
        from ragrade.retrieval.query_memo import embed_queries, memo_search

        def run() -> list[Pairs]:
            vecs = embed_queries(self.embedder, list(queries))
            return self.store.search(vecs, min(k, len(self.index.chunks)))

        return memo_search(_SEARCHES, self, queries, k, run)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "retriever": self.name,
            "index": str(self.index.path),
            "embedder": self.embedder.name,
            "store": self.store.describe(),
        }


def _searches() -> Any:
    from ragrade.retrieval.query_memo import register_memo

    return register_memo(256)


_SEARCHES = _searches()  # dense searches by (retriever, k, queries): hybrid at depth 100 repeats them per k


def rrf(rankings: Sequence[Pairs], k_rrf: float, weights: Sequence[float]) -> Pairs:
    """Reciprocal rank fusion: sum of ``w / (k_rrf + rank)``; ties by position."""
    scores: dict[int, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        for rank, (pos, _) in enumerate(ranking, start=1):
            scores[pos] = scores.get(pos, 0.0) + w / (k_rrf + rank)
    return sorted(scores.items(), key=lambda p: (-p[1], p[0]))


def weighted_fusion(rankings: Sequence[Pairs], weights: Sequence[float]) -> Pairs:
    """Min-max normalised score fusion (a retriever that misses a chunk contributes 0)."""
    scores: dict[int, float] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        if not ranking:
            continue
        vals = np.array([s for _, s in ranking], dtype=np.float64)
        lo, hi = float(vals.min()), float(vals.max())
        for pos, s in ranking:
            norm = (s - lo) / (hi - lo) if hi > lo else 1.0
            scores[pos] = scores.get(pos, 0.0) + w * norm
    return sorted(scores.items(), key=lambda p: (-p[1], p[0]))


class HybridRetriever(_PairSearch):
    """BM25 + dense, fused by reciprocal rank (default, ``rrf_k=60``) or weighted normalised scores."""

    name = "hybrid"

    def __init__(
        self,
        index: Index,
        fusion: Literal["rrf", "weighted"] = "rrf",
        rrf_k: float = 60.0,
        weights: Sequence[float] = (1.0, 1.0),
        depth: int = 100,
        **dense_options: Any,
    ) -> None:
        if fusion not in ("rrf", "weighted"):
            raise ConfigError(f"unknown fusion '{fusion}'; valid choices: rrf, weighted")
        if len(weights) != 2 or any(w < 0 for w in weights):
            raise ConfigError("hybrid weights must be two non-negative numbers (bm25, dense)")
        if rrf_k <= 0 or depth <= 0:
            raise ConfigError("rrf_k and depth must be positive")
        self.index = index
        self.fusion = fusion
        self.rrf_k = float(rrf_k)
        self.weights = tuple(float(w) for w in weights)
        self.depth = int(depth)
        self.sparse = BM25Retriever(index)
        self.dense = DenseRetriever(index, **dense_options)

    def search(self, queries: Sequence[str], k: int) -> list[Pairs]:
        """Fused positions and scores."""
        depth = max(k, self.depth)
        sparse = self.sparse.search(queries, depth)
        dense = self.dense.search(queries, depth)
        out: list[Pairs] = []
        for s, d in zip(sparse, dense, strict=True):
            fused = (
                rrf([s, d], self.rrf_k, self.weights) if self.fusion == "rrf" else weighted_fusion([s, d], self.weights)
            )
            out.append(fused[:k])
        return out

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "retriever": self.name,
            "fusion": self.fusion,
            "rrf_k": self.rrf_k,
            "weights": list(self.weights),
            "depth": self.depth,
            "dense": self.dense.describe(),
        }


DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"


class RerankRetriever(_PairSearch):
    """A sentence-transformers CrossEncoder re-scoring the top-N of a base retriever."""

    def __init__(
        self, index: Index, base: Any, model: str | None = None, top_n: int = 30, batch_size: int = 32
    ) -> None:
        if top_n <= 0:
            raise ConfigError("rerank top_n must be positive")
        self.index = index
        self.base = base
        self.model_name = model or DEFAULT_CROSS_ENCODER
        self.top_n = int(top_n)
        self.batch_size = batch_size
        self.name = f"rerank({base.name})"
        self._model = load_cross_encoder(self.model_name)
        self._lock = threading.Lock()

    def search(self, queries: Sequence[str], k: int) -> list[Pairs]:
        """Base top-N re-scored by the cross-encoder; ties by base order (scored once per batch and depth)."""
        from ragrade.retrieval.query_memo import memo_search

        depth = max(k, self.top_n)
        ranked = memo_search(_SEARCHES, self, queries, depth, lambda: self._rescore(queries, depth))
        return [r[:k] for r in ranked]

    def _rescore(self, queries: Sequence[str], depth: int) -> list[Pairs]:
        base = self.base.search(queries, depth)
        pairs_in = [
            (q, self.index.chunks[pos].text) for q, ranking in zip(queries, base, strict=True) for pos, _ in ranking
        ]
        if not pairs_in:
            return [[] for _ in queries]
        with self._lock:
            raw = self._model.predict(pairs_in, batch_size=self.batch_size, show_progress_bar=False)
        scores = np.asarray(raw, dtype=np.float64).reshape(len(pairs_in), -1)[:, -1]
        out: list[Pairs] = []
        at = 0
        for ranking in base:
            scored = [(pos, float(scores[at + j]), j) for j, (pos, _) in enumerate(ranking)]
            at += len(ranking)
            scored.sort(key=lambda t: (-t[1], t[2]))
            out.append([(pos, s) for pos, s, _ in scored])
        return out

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"retriever": self.name, "model": self.model_name, "top_n": self.top_n, "base": self.base.describe()}


_CE_CACHE: JSONObject = {}
_CE_LOCK = threading.Lock()


def load_cross_encoder(model: str) -> Any:
    """A CrossEncoder loaded offline on CPU (cached per process)."""
    with _CE_LOCK:
        if model in _CE_CACHE:
            return _CE_CACHE[model]
        from ragrade.deps import require
        from ragrade.embedding.embed import hub_offline

        hub_offline()
        st = require("sentence_transformers", package="sentence-transformers", purpose="cross-encoder reranking")
        try:
            ce = st.CrossEncoder(model, device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"cannot load cross-encoder '{model}' offline ({type(exc).__name__}); "
                "give a local model folder as $reranker"
            ) from exc
        _CE_CACHE[model] = ce
        return ce


class ClosedRetriever:
    """Closed book: never returns a passage (the lower bound of an exam); needs no index, its k is fixed at 0."""

    name = "closed"

    def __init__(self, index: Index | None = None) -> None:
        self.index = index

    def retrieve(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """An empty hit list per query (``k`` may be 0, the closed book's fixed k)."""
        check_queries(queries, 1 if k == 0 and not isinstance(k, bool) else k)
        return [[] for _ in queries]

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"retriever": self.name}


class OracleRetriever:
    """Returns the gold chunks of each query first (the upper bound of an exam).

    ``gold`` maps a query text to its relevant chunk ids (in order); it can also be given per call, per query
    as chunk ids (looked up in the index) or as the gold passages themselves (:class:`Hit`, no index needed:
    how a pipeline hands over each question's source passage). A query without gold is an error, never an
    empty result.
    """

    name = "oracle"

    def __init__(self, index: Index | None = None, gold: Mapping[str, Sequence[str]] | None = None) -> None:
        self.index = index
        self.gold = {q: list(ids) for q, ids in (gold or {}).items()}

    def retrieve(
        self, queries: Sequence[str], k: int, *, gold: Sequence[Sequence[str | Hit]] | None = None
    ) -> list[list[Hit]]:
        """The gold chunks (at most ``k``) of each query with score 1.0."""
        check_queries(queries, k)
        if gold is not None and len(gold) != len(queries):
            raise ConfigError(f"oracle: {len(gold)} gold lists for {len(queries)} queries")
        out: list[list[Hit]] = []
        for i, q in enumerate(queries):
            ids = list(gold[i]) if gold is not None else self.gold.get(q)
            if ids is None:
                raise DataError(f"oracle: no gold chunk ids for query '{q[:80]}'")
            out.append(self._hits(ids, k))
        return out

    def _hits(self, gold: Sequence[str | Hit], k: int) -> list[Hit]:
        """The first ``k`` distinct gold chunks, ranked from 1 with score 1.0."""
        first: dict[str, str | Hit] = {}
        for g in gold:
            first.setdefault(g.chunk_id if isinstance(g, Hit) else g, g)
        out: list[Hit] = []
        for rank, g in enumerate(list(first.values())[:k], start=1):
            if isinstance(g, Hit):
                out.append(Hit(g.chunk_id, g.doc_id, 1.0, rank, g.text, g.source))
            elif self.index is None:
                raise ConfigError("oracle: gold chunk ids need an index (or pass the gold passages)")
            else:
                ch = self.index.chunks[self.index.position(g)]
                out.append(Hit(ch.id, ch.doc_id, 1.0, rank, ch.text, ch.source))
        return out

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"retriever": self.name, "queries_with_gold": len(self.gold)}


@register("retriever", "bm25")
def _bm25(index: Index, **kw: object) -> BM25Retriever:
    if kw:
        raise ConfigError(f"bm25 takes no options, got: {', '.join(kw)}")
    return BM25Retriever(index)


@register("retriever", "dense")
def _dense(index: Index, **kw: Any) -> DenseRetriever:
    return DenseRetriever(index, **kw)


@register("retriever", "hybrid")
def _hybrid(index: Index, **kw: Any) -> HybridRetriever:
    return HybridRetriever(index, **kw)


@register("retriever", "rerank")
def _rerank(index: Index, base: object = "hybrid", **kw: Any) -> RerankRetriever:
    if isinstance(base, str):
        base = index.retriever(base, **{k: v for k, v in kw.items() if k in ("store", "embedder")})
    ce_kw = {k: v for k, v in kw.items() if k in ("model", "top_n", "batch_size")}
    return RerankRetriever(index, base, **ce_kw)


@register_retriever("closed", needs_index=False, fixed_k=0)
def _closed(index: Index | None = None, **_: object) -> ClosedRetriever:
    return ClosedRetriever(index)


@register_retriever("oracle", needs_index=False, fixed_k=1, needs_gold=True)
def _oracle(
    index: Index | None = None, gold: Mapping[str, Sequence[str]] | None = None, **_: object
) -> OracleRetriever:
    return OracleRetriever(index, gold)


__all__ = [
    "BM25Retriever",
    "ClosedRetriever",
    "DenseRetriever",
    "HybridRetriever",
    "OracleRetriever",
    "RerankRetriever",
    "Retriever",
    "check_queries",
    "rrf",
    "weighted_fusion",
]
