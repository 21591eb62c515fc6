"""Retrieval metrics with bootstrap confidence intervals: hit rate@k, recall@k, MRR@k, nDCG@k.

Definitions (per query, then averaged over queries; the CI is a percentile
bootstrap over queries via :func:`ragrade.stats.bootstrap_ci`):

* hit rate@k: 1 when at least one relevant id is in the top k;
* recall@k: relevant ids in the top k / all relevant ids of the query;
* MRR@k: 1 / rank of the first relevant id in the top k (0 when none);
* nDCG@k: sum of ``grade / log2(rank + 1)`` over the top k, divided by the same sum
  for the ideal ordering (linear gains, as trec_eval and ranx compute it).

Qrels files are JSONL, one query per line: ``{"query": ..., "relevant": [ids]}`` or
``{"query": ..., "relevant": {id: grade}}`` (also accepted: ``relevant_chunk_ids``/
``relevant_doc_ids`` as ``ragrade qa generate --qrels`` writes them, ``chunk_id``/``chunk_ids``/
``doc_id``/``doc_ids``), or a ragrade exam file (its questions with their source chunk
and document). A record without any of these fields is an error.

A query with no relevant id is either unjudged (its relevant ids are an empty
list: no qrels line at all, in trec_eval's terms) or judged only not relevant
(no grade above 0). ``empty_queries="skip"`` (the default) does what trec_eval
does: an unjudged query is left out of the means and the intervals and counted
(``skipped_queries``), and a query judged only not relevant is kept and scores
0 on every metric (``no_relevant`` in its row). ``"zero"`` (ranx's convention)
scores both kinds 0, so every qrels query stays in the denominator. Both are
counted in ``n_empty_queries``; neither stops the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from ragrade.errors import DataError
from ragrade.io import JSONObject, read_jsonl
from ragrade.schemas import check_question

METRICS = ("hit_rate", "recall", "mrr", "ndcg")
Level = Literal["chunk", "doc"]
LEVELS: tuple[Level, ...] = get_args(Level)
EmptyQueries = Literal["skip", "zero"]
EMPTY_QUERIES: tuple[EmptyQueries, ...] = get_args(EmptyQueries)


def per_query(ranked: Sequence[str], relevant: Mapping[str, float], k: int) -> dict[str, float]:
    """The four metrics of one ranked id list against graded relevance (grades > 0 are relevant; none: DataError)."""
    rel = {i: float(g) for i, g in relevant.items() if g > 0}
    if not rel:
        raise DataError("a query has no relevant ids")
    top = list(dict.fromkeys(ranked))[:k]
    found = [i for i in top if i in rel]
    first = next((r for r, i in enumerate(top, start=1) if i in rel), None)
    dcg = sum(rel.get(i, 0.0) / math.log2(r + 1) for r, i in enumerate(top, start=1))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(r + 1) for r, g in enumerate(ideal, start=1))
    return {
        "hit_rate": 1.0 if found else 0.0,
        "recall": len(found) / len(rel),
        "mrr": 1.0 / first if first else 0.0,
        "ndcg": dcg / idcg if idcg > 0 else 0.0,
    }


@dataclass
class MetricSummary:
    """Mean of one metric over queries with its bootstrap interval."""

    mean: float
    low: float
    high: float


@dataclass
class RetrievalReport:
    """Metrics of one retriever over a qrels set."""

    retriever: str
    k: int
    n_queries: int
    level: str
    metrics: dict[str, MetricSummary]
    per_query: list[JSONObject] = field(default_factory=list)
    empty_queries: str = "skip"
    skipped_queries: list[str] = field(default_factory=list)
    n_empty_queries: int = 0

    def to_dict(self, with_queries: bool = False) -> JSONObject:
        """A JSON-ready dict (per-query rows and skipped queries only when asked; no NaN: None)."""

        def num(x: float) -> float | None:
            return None if math.isnan(x) else x

        out: JSONObject = {
            "retriever": self.retriever,
            "k": self.k,
            "n_queries": self.n_queries,
            "n_empty_queries": self.n_empty_queries,
            "n_skipped_queries": len(self.skipped_queries),
            "empty_queries": self.empty_queries,
            "level": self.level,
            "metrics": {
                m: {"mean": num(s.mean), "ci_low": num(s.low), "ci_high": num(s.high)} for m, s in self.metrics.items()
            },
        }
        if with_queries:
            out["per_query"] = self.per_query
            out["skipped_queries"] = self.skipped_queries
        return out


def evaluate_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, float]],
    k: int,
    *,
    retriever: str = "",
    level: str = "chunk",
    n_boot: int = 2000,
    seed: int = 0,
    level_ci: float = 0.95,
    empty_queries: EmptyQueries = "skip",
) -> RetrievalReport:
    """Score ``run`` (query -> ranked ids) against ``qrels``; every qrels query with a relevant id must be in the run.

    A query with no relevant id needs no ranking. ``empty_queries="skip"`` (trec_eval): one with no judged id is
    skipped (counted), one judged only not relevant scores 0; ``"zero"`` (ranx): both score 0.
    """
    from ragrade.stats import bootstrap_ci

    if k <= 0:
        raise DataError(f"k must be positive, got {k}")
    if empty_queries not in EMPTY_QUERIES:
        raise DataError(f"empty_queries must be skip or zero, got '{empty_queries}'")
    empty = [q for q, rel in qrels.items() if not any(g > 0 for g in rel.values())]
    empty_set = set(empty)
    missing = [q for q in qrels if q not in run and q not in empty_set]
    if missing:
        raise DataError(f"{len(missing)} qrels queries have no ranking, e.g. '{missing[0][:80]}'")
    # trec_eval leaves out only a query without any qrels line; one judged only not relevant scores 0 and is kept
    skipped = [q for q in empty if not qrels[q]] if empty_queries == "skip" else []
    skipped_set = set(skipped)
    rows: list[JSONObject] = []
    for q, rel in qrels.items():
        if q not in empty_set:
            rows.append({"query": q, **per_query(run[q], rel, k)})
        elif q not in skipped_set:
            rows.append({"query": q, **dict.fromkeys(METRICS, 0.0), "no_relevant": True})
    if qrels and not rows:
        raise DataError(
            f"none of the {len(qrels)} qrels queries has a judged id (every relevant list is empty): nothing to "
            "evaluate; give relevant ids, or score such queries 0 (empty_queries = zero)"
        )
    metrics: dict[str, MetricSummary] = {}
    for m in METRICS:
        vals = np.array([r[m] for r in rows], dtype=np.float64)
        lo, hi = bootstrap_ci(vals, n_boot=n_boot, level=level_ci, seed=seed)
        metrics[m] = MetricSummary(mean=float(vals.mean()) if len(vals) else float("nan"), low=lo, high=hi)
    return RetrievalReport(
        retriever=retriever,
        k=k,
        n_queries=len(rows),
        level=level,
        metrics=metrics,
        per_query=rows,
        empty_queries=empty_queries,
        skipped_queries=skipped,
        n_empty_queries=len(empty),
    )


def _grades(rec: Mapping[str, object], level: Level, where: str) -> dict[str, float]:
    rel = rec.get("relevant")
    if isinstance(rel, Mapping):
        return {str(i): float(g) for i, g in rel.items()}
    if isinstance(rel, list):
        return {str(i): 1.0 for i in rel}
    keys = (
        ("relevant_chunk_ids", "chunk_ids", "chunk_id")
        if level == "chunk"
        else ("relevant_doc_ids", "doc_ids", "doc_id")
    )
    for key in keys:
        val = rec.get(key)
        if isinstance(val, list):
            return {str(i): 1.0 for i in val}
        if isinstance(val, str) and val:
            return {val: 1.0}
    raise DataError(f"{where}: no relevant ids (expected 'relevant' or '{keys[0]}')")


def read_qrels(path: str | Path, level: Level = "chunk") -> dict[str, dict[str, float]]:
    """Query -> {judged id: grade} from a qrels JSONL or an exam file (duplicate queries merge; ``{}``: none)."""
    header, records = read_jsonl(path)
    if not records:
        raise DataError(f"{path}: no qrels records")
    qrels: dict[str, dict[str, float]] = {}
    first_line = 2 if header is not None else 1
    for n, rec in enumerate(records, start=first_line):
        where = f"{path}:{n}"
        if header is not None and header.kind == "exam":
            check_question(rec, where)
        query = rec.get("query", rec.get("question"))
        if not isinstance(query, str) or not query.strip():
            raise DataError(f"{where}: missing 'query' text")
        qrels.setdefault(query, {}).update(_grades(rec, level, where))  # none relevant: see empty_queries
    return qrels


def hits_to_ids(hits: Sequence[Any], level: Level) -> list[str]:
    """Ranked chunk ids, or doc ids (first occurrence kept) for ``level='doc'``."""
    ids = [h.chunk_id if level == "chunk" else h.doc_id for h in hits]
    return list(dict.fromkeys(ids))


__all__ = [
    "EMPTY_QUERIES",
    "LEVELS",
    "METRICS",
    "EmptyQueries",
    "Level",
    "MetricSummary",
    "RetrievalReport",
    "evaluate_run",
    "hits_to_ids",
    "per_query",
    "read_qrels",
]
