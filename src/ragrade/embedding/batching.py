"""Fixed-shape batches: a text's vector must not depend on the texts it was batched with.

Shared by the sentence-transformers and ONNX embedders (their ``embed_fixed``).
"""

from __future__ import annotations

from collections.abc import Sequence

#: rows of every batch of :meth:`SentenceTransformerEmbedder.embed_fixed` (short batches are filled up)
FIXED_BATCH = 16


def fixed_shape_batches(lengths: Sequence[int], limit: int) -> list[tuple[list[int], int]]:
    """``(indices, width)`` batches of at most :data:`FIXED_BATCH` texts of equal padded width.

    A text's width is the smallest power of two (at least 16) not below its token count, capped at ``limit``;
    with every batch of the same ``(FIXED_BATCH, width)`` shape, each row's numbers no longer depend on the
    other rows (bf16 kernels block their sums by shape), so a text gets the same vector in any batch.
    """
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        width = 16
        while width < n and width < limit:
            width *= 2
        groups.setdefault(min(width, limit), []).append(i)
    return [
        (idx[start : start + FIXED_BATCH], width)
        for width, idx in sorted(groups.items())
        for start in range(0, len(idx), FIXED_BATCH)
    ]


__all__ = ["FIXED_BATCH", "fixed_shape_batches"]
