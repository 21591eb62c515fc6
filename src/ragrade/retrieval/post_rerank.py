"""``rerank``: a sentence-transformers cross-encoder re-scores the candidates of each query (composable).

The same model as the ``rerank(<base>)`` retriever (option ``model``, default
``cross-encoder/ms-marco-MiniLM-L-6-v2`` loaded offline), but as a step of a
post-processing chain: it sees whatever the steps before it left, e.g.
``rerank+compress``. Ties keep the incoming order.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ragrade.io import JSONObject
from ragrade.retrieval.base import Hit
from ragrade.retrieval.transforms import POST_KIND, Processed, transform


class CrossEncoderRerank:
    """Cross-encoder re-scoring of each hit list."""

    name = "rerank"

    def __init__(self, model: str | None = None, batch_size: int = 32) -> None:
        from ragrade.retrieval.retrievers import DEFAULT_CROSS_ENCODER, load_cross_encoder

        self.model_name = model or DEFAULT_CROSS_ENCODER
        self.batch_size = int(batch_size)
        self._model = load_cross_encoder(self.model_name)
        self._lock = threading.Lock()

    async def process(self, queries: Sequence[str], hits: list[list[Hit]], k: int) -> Processed:
        """Each list sorted by cross-encoder score (the new ``score``)."""
        pairs = [(q, h.text) for q, hl in zip(queries, hits, strict=True) for h in hl]
        if not pairs:
            return hits, [None] * len(hits)
        with self._lock:
            raw = self._model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        scores = np.asarray(raw, dtype=np.float64).reshape(len(pairs), -1)[:, -1]
        out: list[list[Hit]] = []
        at = 0
        for hl in hits:
            scored = [(float(scores[at + j]), j) for j in range(len(hl))]
            at += len(hl)
            scored.sort(key=lambda t: (-t[0], t[1]))
            out.append([replace(hl[j], score=s) for s, j in scored])
        return out, [None] * len(hits)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"name": self.name, "model": self.model_name, "batch_size": self.batch_size}


@transform(POST_KIND, "rerank")
def _rerank(*, index: Any = None, llm: Any = None, **kw: Any) -> CrossEncoderRerank:
    return CrossEncoderRerank(**kw)
