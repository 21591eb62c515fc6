"""The semantic chunker: break where consecutive sentences stop being similar.

Each sentence is embedded together with ``buffer`` neighbours on each side
(a window smooths single short sentences). The cosine distance between the
windows of consecutive sentences is computed, and a chunk boundary is placed
after every sentence whose distance to the next exceeds the ``threshold``-th
percentile of that document's distances (95 by default: the 5 % largest
drops in similarity become breakpoints). Documents with fewer than three
sentences have no breakpoints.

Groups of sentences that exceed ``size`` tokens are packed by sentences like
the sentence chunker (with ``overlap``), so the size guarantee of
:mod:`ragrade.corpus.chunk` holds here too; groups never overlap each other.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ragrade.corpus.chunk import (
    DEFAULT_MIN_SIZE,
    DEFAULT_OVERLAP,
    DEFAULT_SIZE,
    BaseChunker,
    _checked,
    sentence_pieces,
)
from ragrade.corpus.spans import Piece, Span, merge, trimmed
from ragrade.corpus.structure import is_heading
from ragrade.corpus.tokens import DEFAULT_TOKENIZER, TokenIndex
from ragrade.corpus.types import Chunk, Document
from ragrade.embedding.base import Embedder
from ragrade.errors import ConfigError
from ragrade.registry import register

DEFAULT_THRESHOLD = 95.0
DEFAULT_BUFFER = 1


def _resolve_embedder(spec: str) -> Embedder:
    from ragrade.embedding import embed

    factory = getattr(embed, "create_embedder", None)
    if factory is None:  # a retrieval stage without embedder specs: only the default model
        if spec != embed.DEFAULT_EMBEDDER:
            raise ConfigError(f"unknown embedder {spec!r}; available: {embed.DEFAULT_EMBEDDER}")
        return embed.default_embedder()
    embedder: Embedder = factory(spec)
    return embedder


class SemanticChunker(BaseChunker):
    """Embedding-similarity breakpoints between sentences (percentile threshold)."""

    strategy = "semantic"
    options: ClassVar[tuple[str, ...]] = ("size", "overlap", "tokenizer", "min_size", "embedder", "threshold", "buffer")

    def __init__(
        self,
        size: int = DEFAULT_SIZE,
        overlap: int = DEFAULT_OVERLAP,
        tokenizer: str = DEFAULT_TOKENIZER,
        embedder: Embedder | str | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        buffer: int = DEFAULT_BUFFER,
        min_size: int = DEFAULT_MIN_SIZE,
    ) -> None:
        super().__init__(size, overlap, tokenizer, min_size)
        if not isinstance(threshold, (int, float)) or not 0 < float(threshold) <= 100:
            raise ConfigError(f"the semantic threshold is a percentile in (0, 100], got {threshold!r}")
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 0:
            raise ConfigError(f"the semantic buffer must be zero or a positive whole number, got {buffer!r}")
        self.threshold = float(threshold)
        self.buffer = buffer
        self._embedder_spec = embedder
        self._embedder: Embedder | None = embedder if embedder is not None and not isinstance(embedder, str) else None

    @property
    def embedder(self) -> Embedder:
        """The sentence embedder (the bundled MiniLM unless one was given), loaded on first use."""
        if self._embedder is None:
            if isinstance(self._embedder_spec, str):
                self._embedder = _resolve_embedder(self._embedder_spec)
            else:
                from ragrade.embedding.embed import default_embedder

                self._embedder = default_embedder()
        return self._embedder

    def params(self) -> dict[str, Any]:
        """Base parameters plus threshold, buffer and the embedder's name."""
        return {
            **super().params(),
            "threshold": self.threshold,
            "buffer": self.buffer,
            "embedder": str(getattr(self.embedder, "name", type(self.embedder).__name__)),
        }

    def chunk_many(self, docs: Sequence[Document]) -> list[list[Chunk]]:
        """Chunks of each document; the sentence windows of the whole batch are embedded together."""
        indexes = self.counter.index_many([d.text for d in docs])
        sentences = [self._sentences(ix) for ix in indexes]
        windows: dict[str, int] = {}
        keys: list[list[int]] = []
        for ix, sents in zip(indexes, sentences, strict=True):
            row: list[int] = []
            if len(sents) >= 3:
                row = [windows.setdefault(w, len(windows)) for w in self._windows(ix.text, sents)]
            keys.append(row)
        vectors = self.embedder.embed(list(windows)) if windows else np.zeros((0, 1), dtype=np.float32)
        out: list[list[Chunk]] = []
        for doc, ix, sents, row in zip(docs, indexes, sentences, keys, strict=True):
            breaks = self._breakpoints(np.asarray(vectors[row], dtype=np.float64)) if row else []
            out.append(self._records(doc, self.merge_small(ix, self._group_spans(ix, sents, breaks))))
        return out

    def spans(self, index: TokenIndex) -> list[Span]:
        """Semantic spans of one tokenised document (embeds its sentence windows)."""
        sents = self._sentences(index)
        breaks: list[int] = []
        if len(sents) >= 3:
            vecs = self.embedder.embed(self._windows(index.text, sents))
            breaks = self._breakpoints(np.asarray(vecs, dtype=np.float64))
        return self.merge_small(index, self._group_spans(index, sents, breaks))

    def _windows(self, text: str, sents: list[Piece]) -> list[str]:
        """Each sentence with ``buffer`` neighbours on each side."""
        last = len(sents) - 1
        return [
            text[sents[max(0, i - self.buffer)][0] : sents[min(last, i + self.buffer)][1]] for i in range(len(sents))
        ]

    def _sentences(self, index: TokenIndex) -> list[Piece]:
        """Sentences, code blocks (whole when they fit) and heading lines, in order."""
        whole = trimmed(index.text)
        return [] if whole is None else sentence_pieces(index, whole[0], whole[1], self.size)

    def _breakpoints(self, vecs: np.ndarray) -> list[int]:
        """Indices ``i`` such that a chunk ends after sentence ``i``."""
        norms = np.linalg.norm(vecs, axis=1)
        norms[norms == 0] = 1.0
        unit = vecs / norms[:, None]
        dist = 1.0 - np.einsum("ij,ij->i", unit[:-1], unit[1:])
        cut = float(np.percentile(dist, self.threshold))
        return [int(i) for i in np.flatnonzero(dist > cut)]

    def _group_spans(self, index: TokenIndex, sents: list[Piece], breaks: list[int]) -> list[Span]:
        if not sents:
            return []
        out: list[Span] = []
        breaks = [b for b in breaks if not is_heading(index.text, *sents[b])]  # a heading stays with its text
        bounds = [-1, *breaks, len(sents) - 1]
        for a, b in itertools.pairwise(bounds):
            s, e = sents[a + 1][0], sents[b][1]
            n = index.count(s, e)
            if n <= self.size:
                out.append((s, e, n))
            else:
                out.extend(merge(sentence_pieces(index, s, e, self.size), index, self.size, self.overlap))
        return out


@register("chunker", "semantic")
def _make_semantic(
    size: int = DEFAULT_SIZE, overlap: int = DEFAULT_OVERLAP, tokenizer: str = DEFAULT_TOKENIZER, **extra: Any
) -> BaseChunker:
    _checked("semantic", SemanticChunker.options, {k: v for k, v in extra.items() if k not in SemanticChunker.options})
    return SemanticChunker(size, overlap, tokenizer, **extra)


__all__ = ["DEFAULT_BUFFER", "DEFAULT_THRESHOLD", "SemanticChunker"]
