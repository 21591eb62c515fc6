"""Query work shared by the pipelines of a grid gives the same responses as the per-pipeline path, doing it once.

Every retriever kind (closed, oracle, bm25, dense, hybrid, rerank(base)), every query transform (none,
hyde, multi-query, rm3), a cross-encoder post-processor, ICL 0/1 (pipelines differing only downstream),
the local executor (with its warm step: the offline student embeds every text once, before dispatch) and (slow)
the Ray executor. ``RAGRADE_SHARE_RETRIEVAL=0`` is the per-pipeline path.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.retrieval.rewriter import PROMPTS
from tests.run.fakes import make_exam
from tests.support.embed_calls import count_embed_fixed

from ragrade.corpus.types import Chunk
from ragrade.embedding.embed import default_embedder
from ragrade.llm.offline import _EMBED
from ragrade.retrieval.query_memo import QUERY_STATS, SHARE_ENV, Memo, clear_query_memos, shared_call
from ragrade.run.pipeline import clear_resources
from ragrade.run.spec import build_sweep_config
from ragrade.run.summary import read_responses
from ragrade.run.sweep import run_sweep

LL = "py/tests.run.fakes:make_llm"
REWRITER = "py/tests.retrieval.rewriter:make_rewriter"
VOLATILE = ["latency_s", "cached"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, tiny_st_model: str) -> tuple[Path, Path]:
    from ragrade.retrieval.index import IndexConfig, build_index

    root = tmp_path_factory.mktemp("shared")
    qs = make_exam(root / "exam.jsonl", 20)
    chunks = [
        Chunk(id=q.chunk_id, doc_id=q.doc_id, text=q.context or "", start=0, end=len(q.context or ""), strategy="whole")
        for q in qs
    ]
    build_index(chunks, root / "idx", IndexConfig(embedder=f"st:{tiny_st_model}"))
    return root / "exam.jsonl", root / "idx"


def _config(idx: Path, grid: dict[str, Any], **extra: Any) -> Any:
    return build_sweep_config(
        {
            "grid": {"llms": [LL], "icl": [0, 1], **grid},
            "indexes": {"small": str(idx)},
            "icl_pool": 2,
            "shard_size": 6,
            "transform_llm": REWRITER,
            **extra,
        }
    )


def _run(exam: Path, cfg: Any, out: Path, share: bool, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """One sweep from a cold start (no memo, no loaded resources, an empty embedding cache)."""
    monkeypatch.setenv(SHARE_ENV, "1" if share else "0")
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(out.parent / f"cache-{out.name}"))
    clear_query_memos()
    clear_resources()
    QUERY_STATS.reset()
    PROMPTS.clear()
    run_sweep(exam, cfg, out, overwrite=True)
    df = read_responses(out)
    assert not (out / "retrieval.shared.json").exists()
    return df.drop(columns=VOLATILE)


def test_shared_retrieval_equals_per_pipeline_locally(
    inputs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exam, idx = inputs
    grid = {"retrievers": ["closed", "oracle", "bm25", "dense", "hybrid"], "query": ["none", "hyde"], "k": [2]}
    cfg = _config(idx, grid, limit=8)
    per = _run(exam, cfg, tmp_path / "per", False, monkeypatch)
    per_batches, per_prompts = dict(QUERY_STATS.per_batch), len(PROMPTS)
    shared = _run(exam, cfg, tmp_path / "shared", True, monkeypatch)
    pd.testing.assert_frame_equal(per, shared)  # same answers, same order, every column
    assert shared["pipeline"].nunique() == (2 + 3 * 2) * 2 and len(shared) == 16 * 8
    assert shared["transform_error"].notna().any() and shared["retrieved"].map(len).max() == 2
    # each batch of query texts (questions, HyDE passages) encoded once, not once per pipeline
    assert set(QUERY_STATS.per_batch.values()) == {1} and set(QUERY_STATS.per_batch) == set(per_batches)
    questions = [b for b in per_batches if all(t.startswith("What does the keeper") and t.endswith("____") for t in b)]
    assert len(questions) == 2 and {per_batches[b] for b in questions} == {4}  # dense, hybrid x ICL 0, 1
    assert len(PROMPTS) == len(set(PROMPTS)) == 8 and per_prompts == 6 * 8  # HyDE once per question


@pytest.mark.slow
def test_every_query_transform_shared(
    inputs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exam, idx = inputs
    grid = {
        "retrievers": ["bm25", "dense", "hybrid"],
        "query": ["none", "hyde", "multi-query", "rm3"],
        "post": ["none", "mmr"],
        "k": [2],
    }
    cfg = _config(idx, grid)
    per = _run(exam, cfg, tmp_path / "per", False, monkeypatch)
    per_batches, per_prompts = dict(QUERY_STATS.per_batch), len(PROMPTS)
    shared = _run(exam, cfg, tmp_path / "shared", True, monkeypatch)
    pd.testing.assert_frame_equal(per, shared)
    assert shared["pipeline"].nunique() == 3 * 4 * 2 * 2
    # each batch of query texts (questions, HyDE passages, rm3 expansions, rephrasings) encoded once: dense and
    # hybrid x post none/mmr x ICL 0/1 repeat the question batches 8 times on the per-pipeline path
    assert set(QUERY_STATS.per_batch.values()) == {1} and set(QUERY_STATS.per_batch) == set(per_batches)
    questions = [b for b in per_batches if all(t.startswith("What does the keeper") and t.endswith("____") for t in b)]
    assert len(questions) == 3 and {per_batches[b] for b in questions} == {8}
    # each LLM rewrite once per (question, transform): 18 evaluated questions x hyde and multi-query
    assert len(PROMPTS) == len(set(PROMPTS)) == 2 * 18 and per_prompts == 12 * len(PROMPTS)


@pytest.mark.slow
def test_rerank_retriever_kind_shared(
    inputs: tuple[Path, Path], tiny_cross_encoder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exam, idx = inputs
    grid = {"retrievers": ["rerank(bm25)", "rerank(hybrid)"], "k": [2], "post": ["none", "rerank"]}
    ce = tiny_cross_encoder
    cfg = _config(idx, grid, retriever_options={"model": ce}, transform_options=_ce(ce), limit=6)
    per = _run(exam, cfg, tmp_path / "per", False, monkeypatch)
    shared = _run(exam, cfg, tmp_path / "shared", True, monkeypatch)
    pd.testing.assert_frame_equal(per, shared)
    assert set(shared["retriever"]) == {"rerank(bm25)", "rerank(hybrid)"} and len(shared) == 8 * 6


def _ce(model: str) -> dict[str, Any]:
    return {"rerank": {"model": model}}


@pytest.mark.slow
def test_shared_retrieval_equals_per_pipeline_on_ray(
    inputs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exam, idx = inputs
    grid = {"retrievers": ["closed", "bm25", "dense", "hybrid"], "query": ["none", "hyde"], "k": [2]}
    local = _run(exam, _config(idx, grid), tmp_path / "local", False, monkeypatch)
    cfg = _config(idx, grid, executor="ray", ray_workers=2)
    try:
        per = _run(exam, cfg, tmp_path / "per", False, monkeypatch)
        shared = _run(exam, cfg, tmp_path / "shared", True, monkeypatch)
    finally:
        import ray

        ray.shutdown()
    pd.testing.assert_frame_equal(local, per)
    pd.testing.assert_frame_equal(per, shared)
    # the driver retrieved each distinct batch once before dispatch: 18 questions x hyde, asked here only
    assert len(PROMPTS) == len(set(PROMPTS)) == 18


def test_shared_call_runs_once_and_does_not_keep_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    async def work(tag: str, fail: bool = False) -> str:
        calls.append(tag)
        await asyncio.sleep(0.01)
        if fail:
            raise ValueError("boom")
        return tag.upper()

    async def scenario() -> list[Any]:
        memo = Memo(8)
        first = await asyncio.gather(*(shared_call("a", lambda: work("a"), memo) for _ in range(3)))
        again = await shared_call("a", lambda: work("a"), memo)
        failed = await asyncio.gather(shared_call("b", lambda: work("b", True), memo), return_exceptions=True)
        retried = await shared_call("b", lambda: work("b"), memo)
        return [first, again, failed, retried]

    monkeypatch.setenv(SHARE_ENV, "1")
    first, again, failed, retried = asyncio.run(scenario())
    assert first == ["A", "A", "A"] and again == "A" and retried == "B"
    assert isinstance(failed[0], ValueError) and calls == ["a", "b", "b"]
    monkeypatch.setenv(SHARE_ENV, "0")
    calls.clear()
    asyncio.run(scenario())
    assert calls == ["a", "a", "a", "a", "b", "b"]


def test_warm_embeds_the_students_texts_once_before_dispatch(
    inputs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exam, idx = inputs
    cfg = build_sweep_config(
        {
            "grid": {
                "llms": ["offline/student"],
                "retrievers": ["closed", "bm25", "dense"],
                "k": [1, 2],
                "icl": [0, 1],
            },
            "indexes": {"small": str(idx)},
            "icl_pool": 2,
            "shard_size": 4,
            "limit": 12,
        }
    )
    calls = count_embed_fixed(monkeypatch, default_embedder())
    frames = []
    for share in ("0", "1"):
        monkeypatch.setenv(SHARE_ENV, share)
        monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / f"cache{share}"))  # nothing embedded before
        clear_query_memos()
        clear_resources()
        _EMBED.clear()
        calls.clear()
        out = tmp_path / f"run{share}"
        run_sweep(exam, cfg, out, overwrite=True)
        frames.append(read_responses(out).drop(columns=["latency_s", "cached"]))
        if share == "0":
            assert len(calls) > 3  # shard by shard
        else:
            assert len(calls) == 1 and calls[0] > 12  # every passage sentence and filled question at once
    pd.testing.assert_frame_equal(frames[0], frames[1])
    assert frames[1]["pipeline"].nunique() == 2 + 2 * 2 * 2 and frames[1]["correct"].notna().all()
    assert len(frames[1]) == 10 * 12


def test_warm_leaves_llm_retrieval_to_the_shards() -> None:
    from ragrade.run.spec import PipelineSpec
    from ragrade.run.warm import _warmable

    def spec(**kw: str) -> PipelineSpec:
        return PipelineSpec(chunker="small", **kw)

    assert _warmable(spec(retriever="bm25")) and _warmable(spec(retriever="dense", query="rm3", post="mmr"))
    assert _warmable(PipelineSpec(retriever="oracle")) and _warmable(PipelineSpec(retriever="closed"))
    # an LLM in the retrieval: its calls are counted by the shards' progress, not run before the first row
    assert not _warmable(spec(retriever="bm25", query="hyde"))
    assert not _warmable(spec(retriever="dense", query="multi-query"))
    assert not _warmable(spec(retriever="bm25", post="mmr+llm-rerank"))
    # side effects or nothing to fetch
    assert not _warmable(PipelineSpec(retriever="external:mine"))
    assert not _warmable(spec(retriever="bm25", llm="replay/run1"))
    assert not _warmable(spec(retriever="bm25", llm="none"))
