"""``rm3``: offline pseudo-relevance feedback (no LLM): expand the query with terms of its top BM25 passages.

RM3-style relevance model: the top ``fb_docs`` BM25 passages of the query are
taken as relevant; each term's weight is the sum over them of the passage's
normalised BM25 score times the term's frequency in the passage (relative to
its length). The ``fb_terms`` heaviest terms that are not stopwords, numbers
or words of the query are appended to it, and the expanded query is what every
retriever searches with (dense embeds it, BM25 matches it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError, MissingDependency
from ragrade.io import JSONObject
from ragrade.retrieval.transforms import QUERY_KIND, QueryPlan, transform

if TYPE_CHECKING:
    from ragrade.retrieval.index import Index

_WORD = re.compile(r"[A-Za-z][A-Za-z_]+")


# frequent words that carry no topic, beyond bm25s' English list
_MORE = frozenset({"every", "also", "each", "many", "much", "used", "uses", "using", "may", "might", "must", "would"})


def _stopwords() -> frozenset[str]:
    try:
        from ragrade.retrieval.bm25 import import_bm25s

        return frozenset(import_bm25s("bm25s.stopwords").STOPWORDS_EN_PLUS) | _MORE
    except (ImportError, MissingDependency):  # bm25s is a core dependency; keep a small list for safety
        return _MORE | frozenset({"the", "and", "for", "are", "was", "with", "this", "that", "from", "into"})


def terms_of(text: str) -> list[str]:
    """Lower-cased word tokens of at least three letters."""
    return [w for w in (m.lower() for m in _WORD.findall(text)) if len(w) >= 3]


def expansion_terms(query: str, passages: Sequence[str], scores: Sequence[float], n_terms: int) -> list[str]:
    """The ``n_terms`` heaviest feedback terms (ties by first occurrence), never a query word or a stopword."""
    stop = _stopwords()
    in_query = set(terms_of(query))
    total = sum(max(0.0, float(s)) for s in scores) or 1.0
    weights: dict[str, float] = {}
    for text, score in zip(passages, scores, strict=True):
        words = [w for w in terms_of(text) if w not in stop and w not in in_query]
        if not words:
            continue
        counts = Counter(words)
        for w, c in counts.items():
            weights[w] = weights.get(w, 0.0) + (max(0.0, float(score)) / total) * c / len(words)
    first = {w: i for i, w in enumerate(weights)}
    return sorted(weights, key=lambda w: (-weights[w], first[w]))[:n_terms]


class RM3:
    """Pseudo-relevance feedback expansion from the top BM25 passages."""

    name = "rm3"

    def __init__(self, index: Index, fb_docs: int = 3, fb_terms: int = 8) -> None:
        if index is None:
            raise ConfigError("rm3 needs an index (its BM25 passages are the feedback)")
        if fb_docs <= 0 or fb_terms <= 0:
            raise ConfigError("rm3 fb_docs and fb_terms must be positive")
        self.index = index
        self.fb_docs = int(fb_docs)
        self.fb_terms = int(fb_terms)

    async def transform(self, queries: Sequence[str]) -> list[QueryPlan]:
        """One expanded query per query (the query itself when the feedback adds nothing)."""
        results = self.index.bm25().search(list(queries), self.fb_docs)
        plans = []
        for q, ranking in zip(queries, results, strict=True):
            texts = [self.index.chunks[pos].text for pos, _ in ranking]
            terms = expansion_terms(q, texts, [s for _, s in ranking], self.fb_terms)
            plans.append(QueryPlan(q, [f"{q} {' '.join(terms)}" if terms else q], added_terms=terms))
        return plans

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"name": self.name, "fb_docs": self.fb_docs, "fb_terms": self.fb_terms, "feedback": "bm25"}


@transform(QUERY_KIND, "rm3")
def _rm3(*, index: Any = None, llm: Any = None, **kw: Any) -> RM3:
    return RM3(index, **kw)
