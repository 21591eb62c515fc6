"""The local sweep's warm step: every pending shard's passages fetched once, the offline student's texts embedded
in one call before dispatch, and the same responses as the per-pipeline path (``RAGRADE_SHARE_RETRIEVAL=0``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
from tests.run.fakes import make_exam

from ragrade.corpus.types import Chunk
from ragrade.embedding.batching import DEFAULT_SHAPE, FixedShape
from ragrade.embedding.embed import OnnxSentenceEmbedder, SentenceTransformerEmbedder, default_embedder
from ragrade.llm.offline import _EMBED
from ragrade.retrieval.query_memo import SHARE_ENV, clear_query_memos
from ragrade.run.pipeline import clear_resources
from ragrade.run.spec import build_sweep_config
from ragrade.run.summary import read_responses
from ragrade.run.sweep import run_sweep


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, tiny_st_model: str) -> tuple[Path, Path]:
    from ragrade.retrieval.index import IndexConfig, build_index

    root = tmp_path_factory.mktemp("warm")
    qs = make_exam(root / "exam.jsonl", 12)
    chunks = [
        Chunk(id=q.chunk_id, doc_id=q.doc_id, text=q.context or "", start=0, end=len(q.context or ""), strategy="whole")
        for q in qs
    ]
    build_index(chunks, root / "idx", IndexConfig(embedder=f"st:{tiny_st_model}"))
    return root / "exam.jsonl", root / "idx"


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
        }
    )
    emb = default_embedder()
    assert isinstance(emb, SentenceTransformerEmbedder | OnnxSentenceEmbedder)
    real = emb.embed_fixed
    calls: list[int] = []

    def counted(texts: Sequence[str], shape: FixedShape = DEFAULT_SHAPE) -> npt.NDArray[np.float32]:
        calls.append(len(texts))
        return real(texts, shape)

    monkeypatch.setattr(emb, "embed_fixed", counted)
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
