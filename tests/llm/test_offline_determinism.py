"""The offline student's embeddings depend on each text only: scores are bit-identical whatever the batching,
concurrency or cache state; the bf16 MiniLM with stored bf16 linear weights equals autocast over fp32 ones."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from tests.llm.test_llm_offline import Item, make_exam

from ragrade.embedding.batching import FIXED_BATCH, FixedShape, fixed_shape_batches
from ragrade.embedding.embed import (
    OnnxSentenceEmbedder,
    SentenceTransformerEmbedder,
    default_embedder,
    minilm_path,
)
from ragrade.llm import LoglikelihoodRequest, create_llm, loglikelihood
from ragrade.llm.offline import _EMBED, sentences
from ragrade.llm.options import LLMOptions

TEXTS = [
    "Short.",
    "The Zephyr-9 delivery drone carries a lithium-sulfur battery rated for 41 minutes of flight.",
    " ".join(["A longer passage about glaciers, satellites and the retreat of ice sheets."] * 3),
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
    "The harbour master keeps a log of every ship that enters after dark.",
]


def test_fixed_shape_batches_by_width() -> None:
    lengths = [3, 16, 17, 40, 300, 64, 65] + [10] * (FIXED_BATCH + 1)
    batches = fixed_shape_batches(lengths, 256)
    widths = {i: w for idx, w in batches for i in idx}
    assert sorted(widths) == list(range(len(lengths)))  # every text exactly once
    assert [widths[i] for i in range(7)] == [16, 16, 32, 64, 256, 64, 128]
    assert all(len(idx) <= FIXED_BATCH for idx, _ in batches)
    assert [len(idx) for idx, w in batches if w == 16] == [FIXED_BATCH, 3]
    by8 = FixedShape(batch=4, step=8)
    assert [by8.width(n, 256) for n in (1, 8, 9, 250, 300)] == [8, 8, 16, 256, 256]
    assert [(len(idx), w) for idx, w in fixed_shape_batches([9, 3, 12, 16, 10, 17], 256, by8)] == [
        (1, 8),
        (4, 16),
        (1, 24),
    ]


@pytest.mark.slow
def test_embed_fixed_does_not_depend_on_the_batch() -> None:
    emb = default_embedder()
    assert isinstance(emb, SentenceTransformerEmbedder | OnnxSentenceEmbedder)
    fixed = emb.embed_fixed
    alone = np.stack([fixed([TEXTS[i]])[0] for i in (1, 2)])
    together = fixed(TEXTS)
    shuffled = fixed([TEXTS[i] for i in (4, 2, 0, 3, 1)] + ["filler text"] * 12)
    assert together.dtype == np.float32 and together.shape == (len(TEXTS), 384)
    assert np.array_equal(alone, together[[1, 2]])
    assert np.array_equal(together[[4, 2, 0, 3, 1]], shuffled[:5])
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # the same model: close to the plain batched vectors
    assert float((together * emb.embed(TEXTS)).sum(1).min()) >= 0.99


def test_embed_fixed_does_not_depend_on_the_thread_count() -> None:
    torch = pytest.importorskip("torch")
    emb = default_embedder()
    if not isinstance(emb, SentenceTransformerEmbedder):
        pytest.skip("the sentence-transformers path pins torch threads")
    before = torch.get_num_threads()
    try:
        vecs = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            vecs.append(emb.embed_fixed(TEXTS))
            assert torch.get_num_threads() == n  # restored after the call
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(vecs[0], vecs[1]) and np.array_equal(vecs[0], vecs[2])


def test_bf16_weights_stored_once_equal_autocast() -> None:
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("sentence_transformers")
    ours = SentenceTransformerEmbedder(bf16=True).embed(TEXTS)
    model = st.SentenceTransformer(minilm_path(), device="cpu")  # fp32 weights, cast on every call by autocast
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.inference_mode():
        ref = model.encode(TEXTS, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    ref = np.asarray(ref, dtype=np.float32)
    ref = ref / np.maximum(np.linalg.norm(ref, axis=1, keepdims=True), 1e-12)
    assert np.array_equal(ours, ref.astype(np.float32))


def _requests(items: list[Item]) -> list[LoglikelihoodRequest]:
    # each question gets its own passage and two others: texts shared between requests, as in a sweep
    return [
        LoglikelihoodRequest(
            context=it["q"],
            continuations=tuple(" " + c for c in it["choices"]),
            question=it["q"],
            passages=(it["passage"], items[(i + 1) % len(items)]["passage"], items[(i + 5) % len(items)]["passage"]),
        )
        for i, it in enumerate(items)
    ]


def _scores(reqs: list[LoglikelihoodRequest], shard: int, workers: int) -> list[list[float]]:
    """Student scores of ``reqs`` in shards of ``shard`` requests, ``workers`` shards at a time, cold memo."""
    _EMBED.clear()
    llm = create_llm("offline/student", LLMOptions(cache=False))
    shards = [reqs[i : i + shard] for i in range(0, len(reqs), shard)]
    with ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(lambda part: loglikelihood(llm, part), shards[::-1]))[::-1]
    out = [r for part in parts for r in part]
    assert all(r.ok for r in out)
    return [list(r.logprobs or []) for r in out]


def test_student_scores_are_bit_identical_across_shards_and_concurrency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reqs = _requests(make_exam(24, seed=3))
    runs = []
    for n, (shard, workers) in enumerate([(24, 1), (5, 3), (2, 4)]):
        monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / f"cache{n}"))  # an empty disk cache each time
        before = _EMBED.computed
        runs.append(_scores(reqs, shard, workers))
        distinct = {s for r in reqs for p in r.passages for s in sentences(p)}
        assert _EMBED.computed - before >= len(distinct)  # computed, not read from an earlier run
    assert runs[0] == runs[1] == runs[2]
    # a rerun on a warm disk cache embeds nothing and gives the same scores
    before = _EMBED.computed
    assert _scores(reqs, 7, 2) == runs[0]
    assert _EMBED.computed == before


def test_embed_fixed_on_every_core_equals_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragrade.embedding import batching

    emb = default_embedder()
    if not isinstance(emb, SentenceTransformerEmbedder):
        pytest.skip("the sentence-transformers path runs batches on threads")
    texts = [f"{t} (variant {i})" for i in range(9) for t in TEXTS]  # several batches of each width
    assert batching.fixed_workers(1) == 1 and 1 <= batching.fixed_workers(99) <= batching.MAX_FIXED_WORKERS
    monkeypatch.setattr(batching, "MAX_FIXED_WORKERS", 1)
    one = emb.embed_fixed(texts)
    monkeypatch.setattr(batching, "MAX_FIXED_WORKERS", 3)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2}, raising=False)
    assert batching.fixed_workers(99) == 3
    assert np.array_equal(one, emb.embed_fixed(texts))
