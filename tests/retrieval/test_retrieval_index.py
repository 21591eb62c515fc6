"""Index build/load, the retrievers on a corpus of distinctive facts, the embedding cache."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from tests.retrieval.retrieval_data import FACTS, fact_chunks
from tests.support.typed import narrow

from ragrade.corpus.types import Chunk
from ragrade.errors import ConfigError, DataError
from ragrade.retrieval.base import Hit, Retriever
from ragrade.retrieval.index import INDEX_VERSION, IndexConfig, build_index, load_index
from ragrade.retrieval.retrievers import OracleRetriever, rrf, weighted_fusion

QUERIES = [q for _, q, _ in FACTS]
GOLD = [f"fact{i}" for i in range(len(FACTS))]


@pytest.mark.parametrize("spec", ["bm25", "dense", "hybrid"])
def test_each_retriever_puts_the_right_fact_first(facts_index: Path, spec: str) -> None:
    idx = load_index(facts_index)
    ret = idx.retriever(spec)
    assert isinstance(ret, Retriever)
    hits = ret.retrieve(QUERIES, 3)
    assert len(hits) == len(QUERIES)
    for gold, hl in zip(GOLD, hits, strict=True):
        assert hl, spec
        assert hl[0].doc_id == gold, (spec, hl[0])
        assert [h.rank for h in hl] == list(range(1, len(hl) + 1))
        assert all(a.score >= b.score for a, b in itertools.pairwise(hl))
        assert hl[0].text == idx.chunk(hl[0].chunk_id).text
        assert hl[0].source.startswith("facts/")


def test_manifest_and_layout(facts_index: Path) -> None:
    man = json.loads((facts_index / "manifest.json").read_text())
    assert man["format"] == "ragrade-index" and man["version"] == INDEX_VERSION
    assert man["counts"] == {"chunks": len(FACTS), "documents": len(FACTS)}
    assert man["embedder"]["name"] == "minilm" and man["embedder"]["dim"] == 384
    assert man["store"]["backend"] == "exact"
    assert (facts_index / "chunks.jsonl").is_file() and (facts_index / "dense" / "vectors.npy").is_file()
    assert not list(facts_index.rglob("*.pkl")) and not list(facts_index.rglob("*.pickle"))
    idx = load_index(facts_index)
    assert len(idx.chunks) == len(FACTS)
    assert idx.chunk("fact3#c0").doc_id == "fact3"
    with pytest.raises(DataError):
        idx.chunk("nope")


def test_closed_and_oracle(facts_index: Path) -> None:
    idx = load_index(facts_index)
    assert idx.retriever("closed").retrieve(QUERIES[:2], 5) == [[], []]
    oracle = narrow(idx.retriever("oracle", gold={QUERIES[0]: ["fact5#c0", "fact0#c0"]}), OracleRetriever)
    hits = oracle.retrieve([QUERIES[0]], 5)[0]
    assert [h.chunk_id for h in hits] == ["fact5#c0", "fact0#c0"]
    assert oracle.retrieve([QUERIES[0]], 1)[0][0].chunk_id == "fact5#c0"
    per_call = oracle.retrieve(["anything"], 2, gold=[["fact2#c0"]])
    assert per_call[0][0].doc_id == "fact2"
    with pytest.raises(DataError, match="no gold"):
        oracle.retrieve(["unknown question"], 2)


def test_bad_queries_and_specs(facts_index: Path) -> None:
    idx = load_index(facts_index)
    ret = idx.retriever("bm25")
    with pytest.raises(ConfigError, match="empty"):
        ret.retrieve(["  "], 3)
    with pytest.raises(ConfigError, match="positive"):
        ret.retrieve(["lighthouse"], 0)
    with pytest.raises(ConfigError, match="unknown retriever"):
        idx.retriever("bm52")
    with pytest.raises(ConfigError):
        idx.retriever("hybrid(bm25)")
    with pytest.raises(ConfigError, match="fusion"):
        idx.retriever("hybrid", fusion="max")


def test_k_larger_than_corpus_and_unknown_words(facts_index: Path) -> None:
    idx = load_index(facts_index)
    assert len(idx.retriever("dense").retrieve(["glacier"], 100)[0]) == len(FACTS)
    assert idx.retriever("bm25").retrieve(["zzzqqq xyzzy"], 5) == [[]]


def test_rrf_and_weighted_fusion_hand_worked() -> None:
    a = [(0, 9.0), (1, 5.0), (2, 1.0)]
    b = [(2, 0.9), (0, 0.8)]
    fused = rrf([a, b], 60.0, (1.0, 1.0))
    assert fused[0][0] == 0 and fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert dict(fused)[2] == pytest.approx(1 / 63 + 1 / 61)
    assert dict(fused)[1] == pytest.approx(1 / 62)
    w = dict(weighted_fusion([a, b], (1.0, 2.0)))
    assert w[0] == pytest.approx(1.0 + 0.0)  # a: (9-1)/8 = 1; b: (0.8-0.8)/0.1 = 0
    assert w[2] == pytest.approx(0.0 + 2.0)
    assert w[1] == pytest.approx(0.5)


def test_hybrid_weighted_option(facts_index: Path) -> None:
    idx = load_index(facts_index)
    ret = idx.retriever("hybrid", fusion="weighted", weights=(0.3, 0.7))
    assert ret.retrieve([QUERIES[4]], 2)[0][0].doc_id == "fact4"
    assert ret.describe()["fusion"] == "weighted"


def test_rerank_orders_by_cross_encoder(facts_index: Path, tiny_cross_encoder: str) -> None:
    from sentence_transformers import CrossEncoder

    idx = load_index(facts_index)
    ret = idx.retriever("rerank(bm25)", model=tiny_cross_encoder, top_n=8)
    assert ret.name == "rerank(bm25)"
    query = "lighthouse drone glacier symphony quinoa"
    base = idx.retriever("bm25").retrieve([query], 8)[0]
    hits = ret.retrieve([query], 8)[0]
    assert {h.chunk_id for h in hits} == {h.chunk_id for h in base}
    ce = CrossEncoder(tiny_cross_encoder, device="cpu")
    scores = ce.predict([(query, h.text) for h in hits])
    assert list(np.argsort(-np.asarray(scores), kind="stable")) == list(range(len(hits)))
    assert [h.score for h in hits] == pytest.approx([float(s) for s in scores], abs=1e-5)
    deep = idx.retriever("rerank(hybrid)", model=tiny_cross_encoder, top_n=3)
    assert len(deep.retrieve([QUERIES[0]], 2)[0]) == 2


def test_rerank_missing_model_is_a_clear_error(facts_index: Path, tmp_path: Path) -> None:
    from ragrade.errors import BackendError

    idx = load_index(facts_index)
    with pytest.raises((BackendError, ConfigError)):
        idx.retriever("rerank(bm25)", model=str(tmp_path / "no-such-model"))


def test_load_errors(tmp_path: Path, facts_index: Path, tiny_st_model: str) -> None:
    with pytest.raises(DataError, match="not found"):
        load_index(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="manifest"):
        load_index(tmp_path / "empty")
    idx = load_index(facts_index)
    with pytest.raises(ConfigError, match="built with embedder 'minilm'"):
        idx.retriever("dense", embedder=f"st:{tiny_st_model}")


def test_cache_reindex_embeds_nothing_then_only_changed(
    tmp_path: Path, tiny_st_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    cfg = IndexConfig(embedder=f"st:{tiny_st_model}")
    chunks = fact_chunks()
    first = build_index(chunks, tmp_path / "idx", cfg)
    assert (first.chunks, first.embedded, first.cached) == (len(chunks), len(chunks), 0)
    second = build_index(chunks, tmp_path / "idx", cfg)
    assert (second.embedded, second.cached) == (0, len(chunks))
    edited = list(chunks)
    c = edited[2]
    text = c.text + " It was tested over the Faroe Islands."
    edited[2] = Chunk(id=c.id, doc_id=c.doc_id, text=text, start=0, end=len(text), strategy=c.strategy, source=c.source)
    third = build_index(edited, tmp_path / "idx", cfg)
    assert (third.embedded, third.cached) == (1, len(chunks) - 1)
    idx = load_index(tmp_path / "idx")
    assert idx.chunk(c.id).text == text
    hit = idx.retriever("dense").retrieve([text], 1)[0][0]
    assert hit.chunk_id == c.id and hit.score == pytest.approx(1.0, abs=1e-5)


def test_documents_are_chunked_and_bm25_options(tmp_path: Path) -> None:
    from ragrade.corpus.types import Document

    text = " ".join(f"Sentence number {i} mentions the keyword alpha{i}." for i in range(60))
    docs = [Document(id="long", text=text, source="long.txt")]
    cfg = IndexConfig(
        dense=False,
        strategy="token",
        size=40,
        overlap=5,
        bm25={"stemmer": "none", "stopwords": "none", "method": "bm25+"},
    )
    stats = build_index(docs, tmp_path / "idx", cfg)
    assert stats.chunks > 5 and stats.embedder is None and stats.embedded == 0
    idx = load_index(tmp_path / "idx")
    hits = idx.retriever("bm25").retrieve(["alpha42"], 1)[0]
    assert "alpha42" in hits[0].text
    assert idx.manifest["chunker"]["strategy"] == "token"
    assert idx.manifest["bm25"]["method"] == "bm25+"
    with pytest.raises(ConfigError, match="without dense"):
        idx.retriever("dense")


def test_empty_input_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nothing to index"):
        build_index([], tmp_path / "idx", IndexConfig(dense=False))


def test_hit_fields() -> None:
    h = Hit(chunk_id="a", doc_id="b", score=1.0, rank=1, text="t")
    assert h.source == ""
