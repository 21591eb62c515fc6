"""Shared helpers of the corpus tests (a fast deterministic embedder, invariant checks)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragrade.corpus.chunk import Chunker
from ragrade.corpus.tokens import get_counter
from ragrade.corpus.types import Chunk, Document


class HashEmbedder:
    """Bag of hashed lower-cased words, L2-normalised: similar word sets give similar vectors."""

    name = "test:hash"
    dim = 64

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[row, h % self.dim] += 1.0
            out[row, -1] += 0.01  # no zero rows
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    def describe(self) -> dict[str, Any]:
        return {"kind": "hash"}


def check_invariants(doc: Document, chunks: list[Chunk], chunker: Chunker) -> None:
    """The guarantees every chunker documents (see ragrade.corpus.chunk)."""
    text = doc.text
    counter = get_counter()
    size, overlap = chunker.size, chunker.overlap
    covered = np.zeros(len(text), dtype=bool)
    prev: Chunk | None = None
    standalone = counter.count_many([c.text for c in chunks]) if chunks else []
    for c, n_alone in zip(chunks, standalone, strict=True):
        assert text[c.start : c.end] == c.text, (c.start, c.end)
        assert c.text and c.text == c.text.strip()
        assert c.doc_id == doc.id and c.source == doc.source
        assert {k: v for k, v in c.metadata.items() if k in doc.metadata} == doc.metadata
        assert isinstance(c.metadata["heading_path"], list)
        # size: the text encoded on its own has exactly the recorded token count
        assert n_alone == c.tokens, (c.text, n_alone, c.tokens)
        if c.tokens > size:
            assert c.oversize
            assert counter.index(c.text).n_words == 1, c.text  # only one unsplittable word
        else:
            assert not c.oversize
        if prev is not None:
            assert c.start > prev.start and c.end > prev.end
            if c.start < prev.end:  # overlap is bounded
                shared = counter.index(text).count(c.start, prev.end)
                assert shared <= overlap, (shared, overlap)
        covered[c.start : c.end] = True
        prev = c
    missing = [i for i in np.flatnonzero(~covered) if not text[i].isspace()]
    assert not missing, f"uncovered characters at {missing[:5]}: {[text[i] for i in missing[:5]]}"
    assert len({c.id for c in chunks}) == len(chunks)
