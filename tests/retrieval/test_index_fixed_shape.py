"""Index vectors depend on each chunk's text only (fixed-shape batches on every core), under their own cache key,
and the exam generator reads them back from the embedding cache instead of embedding the chunks again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from tests.support.embed_calls import count_embed_fixed

from ragrade.corpus.types import Chunk
from ragrade.embedding.batching import INDEX_SHAPE, fixed_cache_key
from ragrade.embedding.embed import cached_embedder
from ragrade.exam.embedding import MemoEmbedder
from ragrade.retrieval.index import IndexConfig, build_index, load_index


def _chunks() -> list[Chunk]:
    texts = [
        f"Record {i}: the keeper of site {i} carries {'copper ' * (i % 9)}samples to the northern lab."
        for i in range(40)
    ]
    return [
        Chunk(id=f"c{i}", doc_id=f"d{i}", text=t, start=0, end=len(t), strategy="whole") for i, t in enumerate(texts)
    ]


def _vectors(folder: Path) -> dict[str, npt.NDArray[np.float32]]:
    ids = [c.id for c in _read_chunks(folder)]
    vecs = np.load(folder / "dense" / "vectors.npy")
    return dict(zip(ids, vecs, strict=True))


def _read_chunks(folder: Path) -> list[Chunk]:
    return load_index(folder).chunks


def _build(chunks: list[Chunk], out: Path, spec: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(cache))
    build_index(chunks, out, IndexConfig(embedder=spec))


def test_index_vectors_do_not_depend_on_order_or_batch(
    tmp_path: Path, tiny_st_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = f"st:{tiny_st_model}"
    chunks = _chunks()
    _build(chunks, tmp_path / "a", spec, tmp_path / "cache-a", monkeypatch)
    _build(chunks[::-1][:25], tmp_path / "b", spec, tmp_path / "cache-b", monkeypatch)  # again, in another order
    a, b = _vectors(tmp_path / "a"), _vectors(tmp_path / "b")
    assert len(b) == 25 and all(np.array_equal(a[cid], v) for cid, v in b.items())
    emb = cached_embedder(spec)
    info = load_index(tmp_path / "a").manifest["embedder"]
    assert info is not None
    assert info["cache_key"] == fixed_cache_key(emb.cache_key, INDEX_SHAPE) != emb.cache_key
    # close to the plain batched vectors of the same model
    plain = emb.embed([c.text for c in chunks])
    assert float((np.stack([a[c.id] for c in chunks]) * plain).sum(1).min()) > 0.999


def test_exam_embedder_reads_the_index_vectors(
    tmp_path: Path, tiny_st_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = f"st:{tiny_st_model}"
    chunks = _chunks()
    _build(chunks, tmp_path / "idx", spec, tmp_path / "cache", monkeypatch)
    emb = cached_embedder(spec)
    sent = count_embed_fixed(monkeypatch, emb)
    memo = MemoEmbedder(emb)
    vecs = memo.embed([c.text for c in chunks] + ["a text the index never saw"])
    assert sent == [1]  # only the new text
    index = _vectors(tmp_path / "idx")
    assert all(np.array_equal(index[c.id], v) for c, v in zip(chunks, vecs, strict=False))


def test_an_endpoint_embeds_chunks_as_it_does() -> None:
    from ragrade.embedding.batching import ChunkEmbedding
    from ragrade.embedding.embed import plan_chunk_key, plan_embedder

    class Endpoint:  # an embedder without embed_fixed (the shape of OpenAIEmbedder)
        name = dim = cache_key = "openai:m@http://localhost:1"

        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            return np.ones((len(texts), 2), dtype=np.float32)

        def describe(self) -> dict[str, object]:
            return {}

    rule = ChunkEmbedding.of(Endpoint(), "k")  # type: ignore[arg-type]
    assert rule.key == "k" and rule.order is None and rule.compute(["a"]).shape == (1, 2)
    spec = "openai:m@http://localhost:1"
    assert plan_chunk_key(spec) == plan_embedder(spec)[2]
    assert plan_chunk_key("minilm-st") == fixed_cache_key(plan_embedder("minilm-st")[2], INDEX_SHAPE)
