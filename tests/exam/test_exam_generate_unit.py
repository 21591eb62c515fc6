from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from tests.support.typed import as_dict, as_list, dig

from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig
from ragrade.exam.embedding import MemoEmbedder
from ragrade.exam.funnel import build_funnel
from ragrade.exam.generate import generate_exam_full, sample_order
from ragrade.exam.offline import extract_terms


def test_sample_order_uniform_is_seeded(synth_chunks: list[Chunk]) -> None:
    a = [c.id for c in sample_order(synth_chunks, 1)]
    assert a == [c.id for c in sample_order(list(reversed(synth_chunks)), 1)]  # input order does not matter
    assert a != [c.id for c in sample_order(synth_chunks, 2)]
    assert sorted(a) == sorted(c.id for c in synth_chunks)


def test_sample_order_stratified_prefix_is_balanced() -> None:
    chunks = [
        Chunk(
            id=f"c{i}",
            doc_id=f"d{i % 7}",
            text="x",
            start=0,
            end=1,
            strategy="t",
            metadata={"topic": "big" if i < 80 else ("mid" if i < 95 else "small")},
        )
        for i in range(100)
    ]
    order = sample_order(chunks, 0, "topic")
    first = Counter(c.metadata["topic"] for c in order[:15])
    assert first == {"big": 5, "mid": 5, "small": 5}
    big_docs = Counter(c.doc_id for c in order[:40] if c.metadata["topic"] == "big")
    assert max(big_docs.values()) - min(big_docs.values()) <= 1  # documents take turns inside a stratum


def test_build_funnel_rows_and_invariant() -> None:
    f = build_funnel(
        10,
        ["parse:no_answer", "parse:no_answer", "intra_candidate:cosine", "surplus"],
        6,
        thresholds={"intra_candidate": {"mode": "quantile", "thresholds": {"cosine": 0.9}}},
    )
    rows = {str(dig(r, "stage")): as_dict(r) for r in as_list(f["stages"])}
    assert rows["parse"] == {"stage": "parse", "in": 10, "removed": 2, "out": 8, "reasons": {"no_answer": 2}}
    assert rows["intra_candidate"]["in"] == 8 and dig(rows, "intra_candidate", "filter", "thresholds") == {
        "cosine": 0.9
    }
    assert rows["surplus"]["reasons"] == {"surplus": 1} and rows["surplus"]["out"] == 6
    assert f["version"] == 1 and f["kind"] == "exam_funnel"
    with pytest.raises(ValueError, match="does not add up"):
        build_funnel(10, ["parse:no_answer"], 8)
    with pytest.raises(ValueError, match="unknown funnel stage"):
        build_funnel(1, ["bogus:x"], 0)


def test_memo_embedder_embeds_each_text_once(hash_embedder: Any) -> None:
    memo = MemoEmbedder(hash_embedder, persistent=False)
    v1 = memo.embed(["a b", "c d", "a b"])
    v2 = memo.embed(["c d"])
    assert memo.calls == 2 and v1.shape == (3, hash_embedder.dim)
    assert (v1[1] == v2[0]).all() and (v1[0] == v1[2]).all()


def test_extract_terms_kinds() -> None:
    text = (
        "The Redis Cluster feature shipped in 2015 with version 3.0. By default the server listens on port 6379 "
        "and keeps 45% of memory free. Calling os.path.join() or max_connections changes it; pass --upgrade."
    )
    got = {(t.kind, t.text) for t in extract_terms(text)}
    assert {
        ("name", "Redis Cluster"),
        ("date", "2015"),
        ("number", "3.0"),
        ("number", "6379"),
        ("number", "45%"),
        ("code", "os.path.join()"),
        ("code", "max_connections"),
        ("code", "--upgrade"),
    } <= got


def test_rounds_top_up_and_shortfall(synth_chunks: list[Chunk], hash_embedder: Any) -> None:
    res = generate_exam_full(synth_chunks, None, ExamConfig(n=50, seed=4, oversample=1.0), embedder=hash_embedder)
    assert res.funnel["rounds"] >= 2 and len(res.questions) == 50  # the first round alone falls short
    small = generate_exam_full(synth_chunks[:10], None, ExamConfig(n=50, seed=4), embedder=hash_embedder)
    assert small.funnel["shortfall"] == 50 - len(small.questions) > 0
    assert small.funnel["chunks"]["asked"] == 10


def test_short_chunks_are_counted_not_asked(hash_embedder: Any, synth_chunks: list[Chunk]) -> None:
    tiny = Chunk(id="tiny", doc_id="t", text="Too short.", start=0, end=10, strategy="t")
    res = generate_exam_full([*synth_chunks[:20], tiny], None, ExamConfig(n=5), embedder=hash_embedder)
    assert res.funnel["chunks"]["too_short"] == 1 and all(q.chunk_id != "tiny" for q in res.questions)
