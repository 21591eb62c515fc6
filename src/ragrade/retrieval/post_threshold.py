"""``threshold``: drop candidates whose cosine similarity to the query is below ``min_similarity``.

The similarity is the index embedder's cosine (bag-of-words cosine without
dense vectors), so the threshold means the same across retrievers whose own
scores are on different scales. ``min_keep`` passages are kept regardless
(default 0: a query may end with no passage, and the LLM answers without).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit
from ragrade.retrieval.transforms import POST_KIND, Processed, Similarity, transform


class Threshold:
    """Similarity-threshold filter."""

    name = "threshold"

    def __init__(self, sim: Similarity, min_similarity: float = 0.3, min_keep: int = 0) -> None:
        if not -1.0 <= min_similarity <= 1.0 or min_keep < 0:
            raise ConfigError("threshold needs -1 <= min_similarity <= 1 and min_keep >= 0")
        self.sim = sim
        self.min_similarity = float(min_similarity)
        self.min_keep = int(min_keep)

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """The hits at or above the threshold, in their order (at least the first ``min_keep``)."""
        out: list[list[Hit]] = []
        for hl, vecs in zip(hits, self.sim.batch(queries, hits), strict=True):
            sims = vecs[1:] @ vecs[0]
            out.append([h for i, h in enumerate(hl) if i < self.min_keep or sims[i] >= self.min_similarity])
        return out, [None] * len(hits)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "name": self.name,
            "min_similarity": self.min_similarity,
            "min_keep": self.min_keep,
            "similarity": self.sim.kind,
        }


@transform(POST_KIND, "threshold")
def _threshold(*, index: object = None, llm: object = None, embedder: object = None, **kw: Any) -> Threshold:
    return Threshold(Similarity(index, embedder), **kw)
