"""A memo around any embedder: each distinct text is embedded once per process (and, for embedders
with a ``cache_key``, once per machine through the on-disk embedding cache).

A local model embeds with ``embed_fixed`` in the index's batch shapes
(:data:`~ragrade.embedding.batching.INDEX_SHAPE`), under the index's cache key: a chunk the index embedded is
read back, not embedded again, and every vector depends on its text only. New texts are embedded in slices of
about a twentieth of them (whole index batches, at most :data:`SLICE`: :func:`slice_size`), announced on the
progress display (``embedding 3,000 texts with minilm: 160/3,000 ...``, :mod:`ragrade.progress_phases`), so the
count moves within a step of a hundred texts too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.embedding.base import Embedder
from ragrade.embedding.batching import INDEX_SHAPE, ChunkEmbedding
from ragrade.errors import DataError
from ragrade.io import JSONObject
from ragrade.progress_phases import phase

SLICE = 512  # most new texts per call of the inner embedder (each slice counted on the display)
STEPS = 20  # slices a call is cut into, so that the display moves (fewer when the texts are few)


def slice_size(n: int) -> int:
    """New texts per call of the inner embedder for ``n`` texts: about ``n / STEPS``, in whole index batches
    (:data:`~ragrade.embedding.batching.INDEX_SHAPE`), at least one batch and at most :data:`SLICE`."""
    step = INDEX_SHAPE.batch
    return max(step, min(SLICE, -(-n // (STEPS * step)) * step))


class MemoEmbedder:
    """Wraps an :class:`~ragrade.retrieval.base.Embedder`; repeated texts are served from memory."""

    def __init__(self, inner: Embedder, max_items: int = 500_000, persistent: bool = True) -> None:
        self.inner = inner
        key = getattr(inner, "cache_key", None)
        self._rule = ChunkEmbedding.of(inner, key if isinstance(key, str) else "")
        # embedders with a cache key also use the on-disk embedding cache ($RAGRADE_CACHE_DIR)
        self._disk_key: str | None = self._rule.key if persistent and isinstance(key, str) and key else None
        self._disk: Any = None
        self.name = inner.name
        self.dim = int(inner.dim)
        self.max_items = max_items
        self._memo: dict[str, npt.NDArray[np.float32]] = {}
        self.calls = 0  # texts actually sent to the inner embedder

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """L2-normalised float32 vectors of ``texts`` (shape ``(len(texts), dim)``)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            vecs = self._compute_counted(missing)
            if vecs.shape != (len(missing), self.dim):
                raise ValueError(f"embedder returned shape {vecs.shape}, expected {(len(missing), self.dim)}")
            self.calls += len(missing)
            if len(self._memo) + len(missing) > self.max_items:
                self._memo.clear()
            for t, v in zip(missing, vecs, strict=True):
                self._memo[t] = v
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts]).astype(np.float32, copy=False)

    def _compute_counted(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """:meth:`_compute` of ``texts`` in slices of :data:`SLICE`, announced and counted on the display (the first
        call's count includes loading the model)."""
        parts = []
        with phase(f"embedding {len(texts):,} texts with {self.name}", len(texts)) as counted:
            size = slice_size(len(texts))
            for start in range(0, len(texts), size):
                parts.append(self._compute(texts[start : start + size]))
                counted.advance(len(parts[-1]))
        return np.concatenate(parts)

    def _compute(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self._disk_key is not None:
            try:
                if self._disk is None:
                    from ragrade.embedding.cache import EmbeddingCache

                    self._disk = EmbeddingCache()
                vecs, _ = self._disk.embed(self._disk_key, texts, self._rule.compute, order=self._rule.order)
                return np.asarray(vecs, dtype=np.float32)
            except (ImportError, OSError, DataError):  # no usable disk cache: compute directly
                self._disk_key = None
        return np.asarray(self._rule.compute(texts), dtype=np.float32)

    def describe(self) -> JSONObject:
        """The wrapped embedder's description."""
        return self.inner.describe()


def memoised(embedder: Embedder) -> MemoEmbedder:
    """``embedder`` wrapped in a :class:`MemoEmbedder` (returned as is when it already is one)."""
    return embedder if isinstance(embedder, MemoEmbedder) else MemoEmbedder(embedder)


__all__ = ["SLICE", "STEPS", "MemoEmbedder", "memoised", "slice_size"]
