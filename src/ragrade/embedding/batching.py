"""Fixed-shape batches: a text's vector must not depend on the texts it was batched with.

Shared by the sentence-transformers and ONNX embedders (their ``embed_fixed``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragrade.embedding.base import Embedder

#: rows of every batch of :meth:`SentenceTransformerEmbedder.embed_fixed` (short batches are filled up)
FIXED_BATCH = 16
#: padded widths are multiples of this many tokens (``None``: powers of two, measured fastest for MiniLM bf16)
WIDTH_STEP: int | None = None
#: torch intra-op threads of ``embed_fixed``: the vectors depend on the thread count (it splits the kernels'
#: sums), so it is pinned; one thread is also the fastest on a shared 2-core machine (no spinning at barriers)
FIXED_THREADS = 1
#: most Python threads that run ``embed_fixed`` batches at once (each on FIXED_THREADS torch threads; a batch's
#: numbers do not depend on which thread runs it, so the vectors equal a one-thread run's)
MAX_FIXED_WORKERS = 4
_THREADS_LOCK = threading.Lock()


def fixed_workers(n_batches: int) -> int:
    """Threads for ``n_batches`` fixed-shape batches: one per usable core, at most :data:`MAX_FIXED_WORKERS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_FIXED_WORKERS, n_batches))


@dataclass(frozen=True)
class FixedShape:
    """The batch shapes of ``embed_fixed``: ``batch`` rows, widths multiples of ``step`` (``None``: powers of two)."""

    batch: int = FIXED_BATCH
    step: int | None = WIDTH_STEP

    def width(self, n: int, limit: int) -> int:
        """Padded width of a text of ``n`` tokens: a function of ``n`` alone (at least one step, at most ``limit``)."""
        if self.step is None:
            width = 16
            while width < n and width < limit:
                width *= 2
            return min(width, limit)
        return min(max(self.step, -(-n // self.step) * self.step), limit)


#: the shapes used by ``embed_fixed`` (part of the offline student's cache key through its version)
DEFAULT_SHAPE = FixedShape()
#: the shapes of index vectors (chunks are longer than the student's sentences: widths in steps of 16 tokens
#: pad less than powers of two; measured fastest for MiniLM bf16 on 100-200-token chunks)
INDEX_SHAPE = FixedShape(batch=16, step=16)


def fixed_cache_key(key: str, shape: FixedShape) -> str:
    """The embedding-cache key of ``embed_fixed`` vectors of shape ``shape`` from an embedder keyed ``key``."""
    return f"{key}|fixed-{shape.batch}x{shape.step or 'pow2'}"


@dataclass(frozen=True)
class ChunkEmbedding:
    """How chunks are embedded and cached (the index, the exam generator): the one rule for both.

    A local model (an embedder with ``embed_fixed``) embeds in :data:`INDEX_SHAPE` batches under
    :func:`fixed_cache_key`, texts sorted by length (``order``); an endpoint embeds as it does, under its own key.
    """

    key: str
    compute: Callable[[Sequence[str]], npt.NDArray[np.float32]]
    order: Callable[[str], int] | None

    @classmethod
    def of(cls, embedder: Embedder, key: str) -> ChunkEmbedding:
        """The rule for ``embedder`` whose cache key is ``key``."""
        fixed = getattr(embedder, "embed_fixed", None)
        if fixed is None:
            return cls(key, embedder.embed, None)
        return cls(fixed_cache_key(key, INDEX_SHAPE), lambda texts: fixed(texts, INDEX_SHAPE), len)


@contextlib.contextmanager
def fixed_threads() -> Iterator[None]:
    """Run torch with :data:`FIXED_THREADS` intra-op threads inside the block (one such block at a time)."""
    import torch

    with _THREADS_LOCK:
        before = torch.get_num_threads()
        if before != FIXED_THREADS:
            torch.set_num_threads(FIXED_THREADS)
        try:
            yield
        finally:
            if before != FIXED_THREADS:
                torch.set_num_threads(before)


def fixed_shape_batches(
    lengths: Sequence[int], limit: int, shape: FixedShape = DEFAULT_SHAPE
) -> list[tuple[list[int], int]]:
    """``(indices, width)`` batches of at most ``shape.batch`` texts of equal padded width.

    A text's width depends on its own token count only (:meth:`FixedShape.width`); with every batch of the same
    ``(shape.batch, width)`` shape, each row's numbers no longer depend on the other rows (bf16 kernels block
    their sums by shape), so a text gets the same vector in any batch.
    """
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(shape.width(n, limit), []).append(i)
    return [
        (idx[start : start + shape.batch], width)
        for width, idx in sorted(groups.items())
        for start in range(0, len(idx), shape.batch)
    ]


__all__ = [
    "DEFAULT_SHAPE",
    "FIXED_BATCH",
    "FIXED_THREADS",
    "INDEX_SHAPE",
    "MAX_FIXED_WORKERS",
    "WIDTH_STEP",
    "ChunkEmbedding",
    "FixedShape",
    "fixed_cache_key",
    "fixed_shape_batches",
    "fixed_threads",
    "fixed_workers",
]
