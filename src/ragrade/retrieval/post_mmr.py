"""``mmr``: maximal marginal relevance; picks ``k`` of the candidates, trading relevance for diversity.

Greedy: the next passage maximises ``lambda * cos(query, p) - (1 - lambda) *
max cos(p, chosen)``. A near-duplicate of a chosen passage loses almost all of
its relevance, so duplicates give way to passages that add something. Vectors
come from the index's embedder (bag-of-words cosine without dense vectors).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit
from ragrade.retrieval.transforms import POST_KIND, Processed, Similarity, transform


def mmr_order(query_sim: np.ndarray, pair_sim: np.ndarray, k: int, lam: float) -> list[int]:
    """Indices of the ``k`` passages MMR picks, in pick order (ties by position)."""
    n = len(query_sim)
    chosen: list[int] = []
    left = list(range(n))
    while left and len(chosen) < k:
        best, best_v = left[0], -np.inf
        for i in left:
            redundancy = max((float(pair_sim[i, j]) for j in chosen), default=0.0)
            v = lam * float(query_sim[i]) - (1.0 - lam) * redundancy
            if v > best_v + 1e-12:
                best, best_v = i, v
        chosen.append(best)
        left.remove(best)
    return chosen


class MMR:
    """Maximal marginal relevance selection of ``k`` passages."""

    name = "mmr"

    def __init__(self, sim: Similarity, lambda_: float = 0.5) -> None:
        if not 0.0 <= lambda_ <= 1.0:
            raise ConfigError(f"mmr lambda must be in [0, 1], got {lambda_}")
        self.sim = sim
        self.lam = float(lambda_)

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """At most ``k`` hits per query, in MMR order (scores: the MMR cosine to the query)."""
        out: list[list[Hit]] = []
        for hl, vecs in zip(hits, self.sim.batch(queries, hits), strict=True):
            if len(hl) <= 1:
                out.append(list(hl))
                continue
            qs, ps = vecs[1:] @ vecs[0], vecs[1:] @ vecs[1:].T
            order = mmr_order(qs, ps, k, self.lam)
            out.append([replace(hl[i], score=float(qs[i])) for i in order])
        return out, [None] * len(hits)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"name": self.name, "lambda": self.lam, "similarity": self.sim.kind}


@transform(POST_KIND, "mmr")
def _mmr(*, index: object = None, llm: object = None, embedder: object = None, **kw: Any) -> MMR:
    if "lambda" in kw:
        kw["lambda_"] = kw.pop("lambda")
    return MMR(Similarity(index, embedder), **kw)
