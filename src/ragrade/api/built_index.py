"""What :func:`ragrade.api.build_index` returns (its own module: it loads numpy and the index code)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragrade.retrieval.index import Index

if TYPE_CHECKING:
    from ragrade.retrieval.index import IndexStats


class BuiltIndex(Index):
    """The index :func:`ragrade.api.build_index` built, opened (an :class:`~ragrade.retrieval.index.Index`),
    with the build's statistics."""

    def __init__(self, index: Index, stats: IndexStats) -> None:
        super().__init__(index.path, index.manifest, index.chunks)
        #: chunks, documents, embedded and cached vectors, embedder, store, seconds, timings
        self.stats = stats


__all__ = ["BuiltIndex"]
