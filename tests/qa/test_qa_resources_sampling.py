"""QA on the sweep's shared machinery: worker resources, chunk sampling, resumable runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragrade.corpus.types import Chunk
from ragrade.errors import ConfigError
from ragrade.qa.answer import QAResources, qa_resources_for, qa_shard
from ragrade.qa.files import QAItem, write_qa
from ragrade.qa.generate import Funnel, QAGenConfig, sample_chunks
from ragrade.qa.run import run_qa_answers
from ragrade.run.manifest import read_manifest
from ragrade.run.pipeline import clear_resources, resources_for
from ragrade.run.records import WorkerContext
from ragrade.run.spec import build_sweep_config


def _items() -> list[QAItem]:
    return [
        QAItem(
            id=f"qa-{i}",
            question=f"Which colour does keeper {i} carry?",
            reference=colour,
            reference_context=f"Keeper {i} always carries a {colour} lantern at night.",
            chunk_id=f"c{i}",
            doc_id=f"d{i % 2}",
            metadata={"topic": "keepers"},
        )
        for i, colour in enumerate(["amber", "cobalt", "indigo", "scarlet", "teal"])
    ]


@pytest.fixture()
def qa_file(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    write_qa(path, _items())
    return path


def test_qa_resources_build_on_the_sweep_resources(qa_file: Path) -> None:
    clear_resources()
    ctx: WorkerContext = {"qa": str(qa_file), "seed": 4, "icl_pool": ["qa-1"]}
    res = qa_resources_for(ctx)
    assert isinstance(res, QAResources) and qa_resources_for(ctx.copy()) is res
    assert list(res.items) == list(res.questions) == [f"qa-{i}" for i in range(5)]
    assert res.questions["qa-2"].context == "Keeper 2 always carries a indigo lantern at night."
    assert [q.id for q in res.pool] == ["qa-1"] and res.seed == 4
    with pytest.raises(ConfigError, match=r"question ids not in the QA file: \['nope'\]"):
        asyncio.run(qa_shard(ctx, {"llm": "offline/extractive", "retriever": "oracle", "k": 1}, ["qa-0", "nope"]))
    with pytest.raises(ConfigError, match="no exam file"):  # cached apart from QA resources; names no exam
        resources_for(ctx)
    clear_resources()


def test_qa_answers_resume_keeps_rows_and_start_time(
    qa_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    grid = {"llms": ["py/tests.qa.qa_fakes:make_echo_llm"], "retrievers": ["oracle"], "icl": [0, 1]}
    cfg = build_sweep_config({"grid": grid, "icl_pool": 1})
    run_dir = tmp_path / "run"
    first = run_qa_answers(qa_file, cfg, run_dir)
    assert first.n_questions == 4 and first.n_new_rows == 8
    started = read_manifest(run_dir)["started"]
    again = run_qa_answers(qa_file, cfg, run_dir)
    assert again.n_new_rows == 0 and again.summary == first.summary
    assert [row["exact"] for row in first.summary] == [1.0, 1.0]  # the echo reads the oracle passage
    m = read_manifest(run_dir)
    assert m["kind"] == "qa-answer" and m["started"] == started and len(m["resumed"]) == 1


def _chunk(i: int, doc: str) -> Chunk:
    text = f"Chunk {i} of document {doc} says something long enough to be eligible for sampling here."
    return Chunk(id=f"{doc}-{i:02d}", doc_id=doc, text=text, start=0, end=len(text), strategy="t", source=doc)


def test_sample_chunks_alternates_documents_and_is_seeded() -> None:
    chunks = [_chunk(i, d) for d in ("a", "b", "c") for i in range(4)] + [_chunk(9, "d")]
    cfg = QAGenConfig(seed=3, min_chunk_chars=10)
    order = sample_chunks(chunks, cfg, Funnel())
    assert sorted(c.id for c in order) == sorted(c.id for c in chunks)
    docs = [c.doc_id for c in order]
    assert len(set(docs[:4])) == 4  # every document once before any repeats
    assert len(set(docs[4:7])) == 3 and "d" not in docs[4:]
    assert [c.id for c in sample_chunks(list(reversed(chunks)), cfg, Funnel())] == [c.id for c in order]
    assert [c.id for c in sample_chunks(chunks, QAGenConfig(seed=4, min_chunk_chars=10), Funnel())] != [
        c.id for c in order
    ]
