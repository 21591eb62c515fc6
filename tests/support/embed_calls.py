"""Count what an embedder's ``embed_fixed`` is asked (the real method runs; only the call sizes are recorded)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from ragrade.embedding.batching import DEFAULT_SHAPE, FixedShape
from ragrade.embedding.embed import OnnxSentenceEmbedder, SentenceTransformerEmbedder


def count_embed_fixed(monkeypatch: pytest.MonkeyPatch, emb: object) -> list[int]:
    """Wrap ``emb.embed_fixed`` for the test; returns the list that receives each call's number of texts."""
    assert isinstance(emb, SentenceTransformerEmbedder | OnnxSentenceEmbedder)
    real = emb.embed_fixed
    calls: list[int] = []

    def counted(texts: Sequence[str], shape: FixedShape = DEFAULT_SHAPE) -> npt.NDArray[np.float32]:
        calls.append(len(texts))
        return real(texts, shape)

    monkeypatch.setattr(emb, "embed_fixed", counted)
    return calls
