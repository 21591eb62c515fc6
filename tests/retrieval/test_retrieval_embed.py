"""Embedders: the fast MiniLM paths match sentence-transformers, the ONNX export, OpenAI-compatible
endpoints, the embedding cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.support.typed import narrow

from ragrade.embedding.base import Embedder
from ragrade.embedding.cache import EmbeddingCache
from ragrade.embedding.embed import (
    OnnxSentenceEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    cached_embedder,
    create_embedder,
    default_embedder,
    plan_embedder,
)
from ragrade.errors import ConfigError

TEXTS = [
    "Short.",
    "The Zephyr-9 delivery drone carries a lithium-sulfur battery rated for 41 minutes of flight.",
    " ".join(["A much longer passage about glaciers, satellites and the retreat of ice sheets."] * 30),
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return np.asarray(cached_embedder("minilm-st").embed(TEXTS))


def test_default_embedder_matches_sentence_transformers(reference: np.ndarray) -> None:
    emb = default_embedder()
    assert isinstance(emb, Embedder)
    assert emb is default_embedder()
    vecs = emb.embed(TEXTS)
    assert vecs.dtype == np.float32 and vecs.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert float((vecs * reference).sum(1).min()) >= 0.99
    assert emb.embed([]).shape == (0, 384)


def test_onnx_path_matches_sentence_transformers(reference: np.ndarray) -> None:
    emb = cached_embedder("minilm-onnx")
    vecs = emb.embed(TEXTS)
    assert float((vecs * reference).sum(1).min()) >= 0.999
    # batching by length must not change results
    single = np.stack([emb.embed([t])[0] for t in TEXTS])
    assert np.allclose(single, vecs, atol=1e-4)
    assert Path(emb.describe()["onnx"]).is_file()


def test_onnx_export_of_any_st_folder(tiny_st_model: str) -> None:
    st = narrow(create_embedder(f"st:{tiny_st_model}"), SentenceTransformerEmbedder)
    ox = narrow(create_embedder(f"onnx:{tiny_st_model}"), OnnxSentenceEmbedder)
    assert ox.dim == st.dim == 32
    assert ox.space == st.space
    assert float((ox.embed(TEXTS[:2]) * st.embed(TEXTS[:2])).sum(1).min()) >= 0.999


def test_plan_matches_built_embedder(tiny_st_model: str) -> None:
    for spec in ("minilm", "minilm-st", f"st:{tiny_st_model}"):
        name, space, key = plan_embedder(spec)
        emb = cached_embedder(spec)
        assert (name, space, key) == (emb.name, emb.space, emb.cache_key)


def test_bad_specs() -> None:
    with pytest.raises(ConfigError, match="unknown embedder"):
        create_embedder("minlm")
    with pytest.raises(ConfigError, match="openai:<model>@<base_url>"):
        create_embedder("openai:text-embed")
    with pytest.raises(ConfigError, match="not found"):
        create_embedder("st:/no/such/model")


def test_openai_compatible_embedder() -> None:
    from tests.support.openai_server import OpenAIServer, embed_text

    with OpenAIServer(embedding_dim=24, faults={"script": ["500", "malformed"]}) as srv:
        emb = narrow(create_embedder(f"openai:test-model@{srv.base_url}"), OpenAIEmbedder)
        emb.batch_size = 2
        texts = ["alpha", "beta", "gamma"]
        vecs = emb.embed(texts)
        assert vecs.shape == (3, 24) and emb.dim == 24
        want = np.array([embed_text(t, 24) for t in texts], dtype=np.float32)
        assert np.allclose(vecs, want, atol=1e-6)
        assert srv.requests_by_path["/v1/embeddings"] >= 4  # two faults retried, then two batches
        assert emb.space == "openai:test-model"


def test_openai_permanent_error_is_backend_error() -> None:
    from tests.support.openai_server import OpenAIServer

    from ragrade.errors import BackendError

    with OpenAIServer(faults={"script": ["401"]}) as srv:
        emb = create_embedder(f"openai:test-model@{srv.base_url}")
        with pytest.raises(BackendError, match="401"):
            emb.embed(["x"])


def test_cache_counts_and_persists(tmp_path: Path) -> None:
    calls: list[int] = []

    def compute(texts: object) -> np.ndarray:
        seq = list(texts)  # type: ignore[call-overload]
        calls.append(len(seq))
        return np.array([[len(t), 1.0] for t in seq], dtype=np.float32)

    cache = EmbeddingCache(tmp_path / "c.sqlite")
    vecs, st = cache.embed("k", ["aa", "b", "aa"], compute)
    assert (st.embedded, st.cached) == (3, 0) and calls == [2]
    assert vecs[:, 0].tolist() == [2.0, 1.0, 2.0]
    cache.close()
    again = EmbeddingCache(tmp_path / "c.sqlite")
    vecs2, st2 = again.embed("k", ["b", "ccc"], compute)
    assert (st2.embedded, st2.cached) == (1, 1) and calls == [2, 1]
    assert vecs2[:, 0].tolist() == [1.0, 3.0]
    _, st3 = again.embed("other-model", ["b"], compute)
    assert st3.embedded == 1
