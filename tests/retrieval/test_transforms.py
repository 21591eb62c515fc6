"""Query transforms and passage post-processors: each changes what is retrieved where the effect is known."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer
from tests.support.typed import as_list, dig

from ragrade.corpus.types import Chunk
from ragrade.errors import ConfigError
from ragrade.retrieval.base import Hit
from ragrade.retrieval.index import IndexConfig, build_index, load_index
from ragrade.retrieval.transforms import (
    RetrievalPipeline,
    Similarity,
    build_pipeline,
    check_transforms,
    create_post_chain,
    create_query_transform,
    fuse_hits,
    parse_post,
)

# A constructed corpus: the answer to the crane question shares no content word with it, the distractors do.
TEXTS = {
    "answer": "Each October the operators fill the Kranholt lifting rig radiator with glycol antifreeze.",
    "d1": "The harbour crane was repainted in blue after the storm damaged its cabin.",
    "d2": "Freezing rain closed the harbour for two days and the crane stood idle.",
    "d3": "The coolant circuit of the ferry engine is flushed every spring by the mechanics.",
    "glacier1": "Meltwater from the retreating glacier carved a moraine lake below the valley wall.",
    "glacier2": "Surveyors measured the glacier moraine and the meltwater channels every summer.",
    "dup1": "The Brenna bakery sells a rye loaf fermented for three days in oak barrels.",
    "dup2": "The Brenna bakery sells a rye loaf fermented for three days in oak barrels!",
    "other": "The Brenna bakery also bakes a spelt loaf with honey for the winter market.",
    "long": (
        "The museum opened in 1921 in a former customs house. Its first curator collected ship models. "
        "The Kestrel model was carved from a single block of pear wood by Ada Lund. "
        "Visitors can climb the tower on Sundays. The cafe serves herring and rye bread."
    ),
}
QUESTION = "How is the coolant circuit of the harbour crane protected from freezing?"
HYPOTHETICAL = "To protect it from frost, the lifting rig radiator is filled with glycol antifreeze every October."


def _chunks() -> list[Chunk]:
    return [
        Chunk(id=cid, doc_id=cid, text=t, start=0, end=len(t), strategy="whole", source=f"{cid}.txt")
        for cid, t in TEXTS.items()
    ]


@pytest.fixture(scope="module")
def sparse_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """BM25 only (post-processors fall back to bag-of-words cosine)."""
    out = tmp_path_factory.mktemp("tx") / "bm25"
    build_index(_chunks(), out, IndexConfig(dense=False))
    return load_index(out)


def _responder(body: dict[str, Any]) -> str:
    text = body["messages"][-1]["content"]
    if "Passage:" in text and "answers the question" in text:  # hyde
        return HYPOTHETICAL
    if "different ways" in text:  # multi-query
        return "1. crane radiator antifreeze\n2. how the lifting rig is kept from frost\n- " + QUESTION
    if "Score:" in text:  # llm-rerank: the bakery's spelt loaf is what the test wants first
        return "9" if "spelt" in text else "2"
    if "Condensed passage:" in text:
        return "NONE" if "herring" in text or "storm" in text else "Glycol antifreeze fills the radiator."
    return "?"


@pytest.fixture(scope="module")
def llm_server() -> Any:
    with OpenAIServer(responder=_responder) as srv:
        yield srv


def _llm(srv: OpenAIServer, **kw: Any) -> Any:
    from ragrade.llm import create_llm

    return create_llm("openai/test-model", base_url=srv.base_url, api_key="sk-test", cache=False, **kw)


def _ids(hits: list[Hit]) -> list[str]:
    return [h.chunk_id for h in hits]


def test_hyde_finds_what_the_bare_query_misses(sparse_index: Any, llm_server: OpenAIServer) -> None:
    bm25 = sparse_index.retriever("bm25")
    assert _ids(bm25.retrieve([QUESTION], 2)[0])[0] != "answer"  # the bare query matches the distractors
    assert "answer" not in _ids(bm25.retrieve([QUESTION], 2)[0])
    pipe = build_pipeline(sparse_index, bm25, "hyde", llm=_llm(llm_server))
    res = pipe.run([QUESTION], 2)[0]
    assert _ids(res.hits)[0] == "answer"
    assert res.searched == [HYPOTHETICAL] and res.error is None
    assert dig(pipe.describe(), "query", "name") == "hyde"


def test_hyde_passage_is_embedded_for_dense_retrieval(tmp_path: Path, llm_server: OpenAIServer) -> None:
    build_index(_chunks(), tmp_path / "dense", IndexConfig())  # MiniLM vectors
    idx = load_index(tmp_path / "dense")
    dense = idx.retriever("dense")
    assert "answer" not in _ids(dense.retrieve([QUESTION], 2)[0])  # the bare question lands near the distractors
    res = build_pipeline(idx, dense, "hyde", llm=_llm(llm_server)).run([QUESTION], 2)[0]
    assert _ids(res.hits)[0] == "answer"


def test_hyde_failure_falls_back_and_is_reported(sparse_index: Any) -> None:
    with OpenAIServer(responder=_responder, faults=["500"] * 4) as srv:
        pipe = build_pipeline(sparse_index, sparse_index.retriever("bm25"), "hyde", llm=_llm(srv, max_retries=0))
        res = pipe.run([QUESTION], 2)[0]
    assert res.searched == [QUESTION]  # the original query, never nothing
    assert res.error is not None and res.error.startswith("hyde failed")
    assert res.hits == sparse_index.retriever("bm25").retrieve([QUESTION], 2)[0]


def test_multi_query_fuses_rephrasings(sparse_index: Any, llm_server: OpenAIServer) -> None:
    pipe = build_pipeline(sparse_index, sparse_index.retriever("bm25"), "multi-query", llm=_llm(llm_server))
    res = pipe.run([QUESTION], 3)[0]
    # the original first, then the two rephrasings; the copy of the original was dropped
    assert res.searched == [QUESTION, "crane radiator antifreeze", "how the lifting rig is kept from frost"]
    assert "answer" in _ids(res.hits)


def test_fuse_hits_is_reciprocal_rank_fusion() -> None:
    def h(c: str, r: int) -> Hit:
        return Hit(chunk_id=c, doc_id=c, score=0.0, rank=r, text=c)

    fused = fuse_hits([[h("a", 1), h("b", 2)], [h("b", 1), h("c", 2)]], 3, k_rrf=60)
    assert _ids(fused) == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert [x.rank for x in fused] == [1, 2, 3]


def test_rm3_adds_the_feedback_terms(sparse_index: Any) -> None:
    rm3 = create_query_transform("rm3", index=sparse_index, options={"rm3": {"fb_docs": 2, "fb_terms": 3}})
    plan = asyncio.run(rm3.transform(["glacier"]))[0]
    # the two terms both feedback passages share weigh most; then one of a single passage
    assert set(plan.added_terms[:2]) == {"meltwater", "moraine"} and len(plan.added_terms) == 3
    assert "glacier" not in plan.added_terms and "the" not in plan.added_terms
    assert plan.queries == [f"glacier {' '.join(plan.added_terms)}"]


def test_mmr_removes_a_near_duplicate(sparse_index: Any) -> None:
    bm25 = sparse_index.retriever("bm25")
    q = "Brenna bakery rye loaf"
    assert _ids(bm25.retrieve([q], 3)[0]) == ["dup1", "dup2", "other"]
    res = build_pipeline(sparse_index, bm25, post="mmr").run([q], 2)[0]
    assert "other" in _ids(res.hits) and len({"dup1", "dup2"} & set(_ids(res.hits))) == 1
    plain = build_pipeline(sparse_index, bm25, post="mmr", options={"mmr": {"lambda": 1.0}}).run([q], 2)[0]
    assert set(_ids(plain.hits)) == {"dup1", "dup2"}  # lambda 1: relevance only, the duplicate stays


def test_compress_keeps_the_answer_sentence_within_budget_with_offsets(sparse_index: Any) -> None:
    chunk = sparse_index.chunk("long")
    hit = Hit(chunk_id="long", doc_id="long", score=1.0, rank=1, text=chunk.text)
    (proc,) = create_post_chain("compress", index=sparse_index, options={"compress": {"budget": 16}})
    out = asyncio.run(proc.process(["Who carved the Kestrel model from pear wood?"], [[hit]], 1))[0][0][0]
    answer = "The Kestrel model was carved from a single block of pear wood by Ada Lund."
    assert out.spans is not None
    kept = [chunk.text[s:e] for s, e in out.spans]
    assert answer in kept
    assert sum(len(k.split()) for k in kept) <= 16
    assert out.text == " ... ".join(kept) and out.chunk_id == "long"
    assert len(out.text) < len(chunk.text)


def test_compress_cuts_an_overlong_best_sentence(sparse_index: Any) -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa."
    hit = Hit(chunk_id="x", doc_id="x", score=1.0, rank=1, text=text)
    (proc,) = create_post_chain("compress", options={"compress": {"budget": 3}})
    out = asyncio.run(proc.process(["gamma"], [[hit]], 1))[0][0][0]
    assert out.spans == ((0, len("alpha beta gamma")),) and out.text == "alpha beta gamma"


def test_threshold_drops_unrelated_passages(sparse_index: Any) -> None:
    bm25 = sparse_index.retriever("bm25")
    q = "glacier moraine meltwater"
    opts = {"threshold": {"min_similarity": 0.2}}
    res = build_pipeline(sparse_index, bm25, post="threshold", options=opts).run([q], 5)[0]
    assert set(_ids(res.hits)) == {"glacier1", "glacier2"}


def test_llm_rerank_and_compress_chain(sparse_index: Any, llm_server: OpenAIServer) -> None:
    bm25 = sparse_index.retriever("bm25")
    q = "Brenna bakery loaf"
    pipe = build_pipeline(sparse_index, bm25, post="llm-rerank", llm=_llm(llm_server))
    res = pipe.run([q], 2)[0]
    assert _ids(res.hits)[0] == "other" and res.hits[0].score == 9.0 and res.error is None
    chain = build_pipeline(sparse_index, bm25, post="llm-compress", llm=_llm(llm_server)).run([QUESTION], 3)[0]
    assert "d1" not in _ids(chain.hits)  # NONE drops the passage
    assert all(h.text == "Glycol antifreeze fills the radiator." for h in chain.hits)


def test_llm_rerank_failure_keeps_the_order_and_is_counted(sparse_index: Any) -> None:
    bm25 = sparse_index.retriever("bm25")
    with OpenAIServer(responder=_responder, faults=["500"] * 50) as srv:
        res = build_pipeline(sparse_index, bm25, post="llm-rerank", llm=_llm(srv, max_retries=0)).run(["rye loaf"], 2)
    assert res[0].error is not None and "llm-rerank failed" in res[0].error
    assert _ids(res[0].hits) == _ids(bm25.retrieve(["rye loaf"], 2)[0])


def test_cross_encoder_rerank_composes(sparse_index: Any, tiny_cross_encoder: str) -> None:
    bm25 = sparse_index.retriever("bm25")
    opts = {"rerank": {"model": tiny_cross_encoder}, "compress": {"budget": 5}}
    pipe = build_pipeline(sparse_index, bm25, post="rerank+compress", options=opts)
    res = pipe.run(["Brenna bakery loaf"], 2)[0]
    assert len(res.hits) == 2 and all(len(h.text.split()) <= 5 for h in res.hits)
    assert [dig(p, "name") for p in as_list(dig(pipe.describe(), "post"))] == ["rerank", "compress"]
    assert pipe.fetch_depth(2) == 6


def test_names_suggest_and_llm_requirement_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'hyde'"):
        check_transforms("hydee", "none", has_llm=True)
    with pytest.raises(ConfigError, match="Did you mean 'mmr'"):
        check_transforms("none", "rerank+mrr", has_llm=True)
    with pytest.raises(ConfigError, match="pass transform_llm PROVIDER/MODEL") as no_llm:
        check_transforms("hyde", "none", has_llm=False)
    assert no_llm.value.settings == ("transform_llm",)  # the command line spells it --transform-llm
    with pytest.raises(ConfigError, match=r"llm-compress needs an LLM.*pass llm PROVIDER"):
        check_transforms("none", "mmr+llm-compress", has_llm=False, setting="$llm")
    assert parse_post("none") == [] and parse_post("rerank+compress") == ["rerank", "compress"]
    with pytest.raises(ConfigError, match="malformed"):
        parse_post("rerank++mmr")


def test_similarity_uses_the_index_embedder(facts_index: Path) -> None:
    idx = load_index(facts_index)
    sim = Similarity(idx)
    assert sim.kind.startswith("embedder:")
    s = sim.to_query("lighthouse colour", ["The lighthouse was painted crimson.", "Quinoa exports doubled."])
    assert s[0] > s[1]
    hits = idx.retriever("bm25").retrieve(["lighthouse crimson"], 3)[0]
    (stored,) = sim.batch(["lighthouse crimson"], [hits])  # the index's vectors for unchanged chunks
    fresh = sim.vectors(["lighthouse crimson", *(h.text for h in hits)])
    assert stored.shape == fresh.shape and abs(stored - fresh).max() < 1e-3
    # compress embeds every sentence of the batch in one call: the same choice as passage by passage
    from ragrade.retrieval.post_compress import Compress

    comp = Compress(sim, budget=6)
    long = [Hit(chunk_id="x", doc_id="x", score=1.0, rank=1, text=" ".join(TEXTS[c] for c in ("d1", "answer", "d2")))]
    batched = asyncio.run(comp.process(["glycol radiator"], [long], 1))[0][0][0]
    assert batched == comp.compress("glycol radiator", long[0])
    assert batched.text == "Each October the operators fill the"  # the best sentence, cut to the budget


def test_pipeline_without_transforms_equals_the_retriever(sparse_index: Any) -> None:
    bm25 = sparse_index.retriever("bm25")
    pipe = RetrievalPipeline(bm25)
    assert pipe.retrieve([QUESTION], 3) == bm25.retrieve([QUESTION], 3)
    assert pipe.name == "bm25"
