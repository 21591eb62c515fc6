"""Retrieval evaluation over a qrels file: the metrics of each retriever with bootstrap intervals.

``ragrade retrieval-eval`` and :func:`ragrade.api.evaluate_retrieval` run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ragrade.errors import ConfigError, check_choice
from ragrade.retrieval.base import Hit, retriever_caps
from ragrade.retrieval.setup import retriever_options

if TYPE_CHECKING:
    from ragrade.retrieval.base import GoldRetriever
    from ragrade.retrieval.index import Index
    from ragrade.retrieval.metrics import EmptyQueries, Level, RetrievalReport


@dataclass(frozen=True)
class RetrievalEvaluation:
    """What :func:`evaluate_retrieval` measured: one report per retriever (metrics with bootstrap intervals)."""

    k: int
    level: Level
    n_queries: int  # queries in the qrels file
    n_empty_queries: int  # of them, with no relevant id (skipped or scored 0, as ``empty_queries`` says)
    empty_queries: EmptyQueries
    reports: list[RetrievalReport]
    n_skipped_queries: int = 0  # of those, left out of the means: with no judged id, under ``"skip"``


def evaluate_retrieval(
    index: Index | str | Path,
    qrels: str | Path,
    retrievers: Sequence[str] = ("bm25", "dense", "hybrid"),
    *,
    k: int = 10,
    level: str = "chunk",
    embedder: str | None = None,
    reranker: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    empty_queries: str = "skip",
    out: str | Path | None = None,
) -> RetrievalEvaluation:
    """Hit rate@k, recall@k, MRR and nDCG@k with bootstrap 95% intervals per retriever .

    ``qrels``: a qrels JSONL (query + relevant ids) or an exam file; ``level``: ``chunk`` or ``doc`` ids.
    Queries with no relevant id: as trec_eval (``empty_queries="skip"``), one with no judged id is skipped and one
    judged only not relevant (grade 0) scores 0; as ranx (``"zero"``), both score 0. Writes the results with
    per-query rows as JSON to ``out`` when given.
    """
    from ragrade.io import write_json
    from ragrade.retrieval.index import load_index
    from ragrade.retrieval.metrics import EMPTY_QUERIES, LEVELS, evaluate_run, hits_to_ids, read_qrels

    if k <= 0:
        raise ConfigError(f"$k must be a positive integer, got {k}")
    lvl = check_choice(level, LEVELS, "level")
    mode = check_choice(empty_queries, EMPTY_QUERIES, "empty_queries")
    gold = read_qrels(qrels, level=lvl)
    idx = load_index(index) if isinstance(index, (str, Path)) else index
    queries = [q for q, g in gold.items() if any(x > 0 for x in g.values())]  # the others need no ranking
    reports = []
    for spec in retrievers:
        needs_gold = retriever_caps(spec).needs_gold  # handed the relevant chunks of each query
        if needs_gold and lvl != "chunk":
            raise ConfigError(f"the {spec.strip()} retriever needs $level chunk")
        ret = idx.retriever(spec, **retriever_options(spec, embedder=embedder, reranker=reranker))
        if not queries:
            hits = []
        elif needs_gold:
            relevant = [_gold_hits(idx, [i for i, x in gold[q].items() if x > 0][:k]) for q in queries]
            hits = cast("GoldRetriever", ret).retrieve(queries, k, gold=relevant)
        else:
            hits = ret.retrieve(queries, k)
        run = {q: hits_to_ids(h, lvl) for q, h in zip(queries, hits, strict=True)}
        reports.append(
            evaluate_run(run, gold, k, retriever=ret.name, level=lvl, n_boot=n_boot, seed=seed, empty_queries=mode)
        )
    n_skipped = sum(1 for g in gold.values() if not g) if mode == "skip" else 0  # no judged id: no qrels line
    result = RetrievalEvaluation(k, lvl, len(gold), len(gold) - len(queries), mode, reports, n_skipped)
    if out is not None:
        write_json(
            out,
            {
                "format": "ragrade-retrieval-eval",
                "version": 1,
                "index": str(getattr(index, "path", index)),
                "qrels": str(qrels),
                "n_queries": result.n_queries,
                "n_empty_queries": result.n_empty_queries,
                "n_skipped_queries": result.n_skipped_queries,
                "empty_queries": mode,
                "results": [r.to_dict(with_queries=True) for r in reports],
            },
        )
    return result


def _gold_hits(index: Index, chunk_ids: Sequence[str]) -> list[Hit]:
    """The relevant chunks as hits (score 1.0, in qrels order): what a ``needs_gold`` retriever is handed (the
    first k of each query; a chunk id not in the index is a DataError)."""
    chunks = [index.chunk(cid) for cid in chunk_ids]
    return [Hit(c.id, c.doc_id, 1.0, rank, c.text, c.source) for rank, c in enumerate(chunks, start=1)]


__all__ = ["RetrievalEvaluation", "evaluate_retrieval"]
