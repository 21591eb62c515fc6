"""Query transforms and post-processing from the command line: search, ask, --dry-run, qa answer factors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.retrieval.test_transforms import QUESTION, TEXTS, _chunks

from ragrade.cli.main import main


@pytest.fixture(scope="module")
def bm25_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragrade.retrieval.index import IndexConfig, build_index

    out = tmp_path_factory.mktemp("txcli") / "idx"
    build_index(_chunks(), out, IndexConfig(dense=False))
    return out


def test_search_with_rm3_and_a_chain(bm25_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["search", str(bm25_dir), "glacier", "-r", "bm25", "-k", "2", "--query", "rm3", "--post", "mmr+compress"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["retriever"] == "bm25|query=rm3|post=mmr+compress"
    assert {"moraine", "meltwater"} <= set(out["added_terms"]) and out["transform_error"] is None
    hit = out["hits"][0]
    assert hit["chunk_id"].startswith("glacier")
    assert [TEXTS[hit["chunk_id"]][s:e] for s, e in hit["spans"]] == [hit["text"]]  # offsets into the chunk


def test_search_and_ask_refuse_bad_transform_input(bm25_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["search", str(bm25_dir), "glacier", "-r", "bm25"]
    assert main([*base, "--query", "hyde"]) == 2
    assert "hyde needs an LLM" in capsys.readouterr().err
    assert main([*base, "--query", "none,rm3"]) == 2
    assert "takes one value" in capsys.readouterr().err
    assert main([*base, "--post", "compres"]) == 2
    assert "Did you mean 'compress'" in capsys.readouterr().err
    assert main(["ask", str(bm25_dir), "glacier", "-r", "bm25", "--post", "llm-rerank"]) == 2
    assert "--transform-llm or --llm" in capsys.readouterr().err


def test_ask_with_hyde_uses_the_answering_llm(bm25_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.retrieval.test_transforms import _responder
    from tests.support.openai_server import OpenAIServer

    with OpenAIServer(responder=_responder) as srv:
        args = ["ask", str(bm25_dir), QUESTION, "-r", "bm25", "-k", "1", "--query", "hyde", "--llm"]
        rc = main([*args, "openai/test-model", "--llm-base-url", srv.base_url, "--json"])
        n_requests = srv.requests_total
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passages"][0]["chunk_id"] == "answer" and out["transform_error"] is None
    assert n_requests == 2  # the hypothetical passage, then the answer


def test_dry_run_counts_the_rewrites(bm25_dir: Path, capsys: pytest.CaptureFixture[str], openai_server: Any) -> None:
    args = ["search", str(bm25_dir), QUESTION, "-r", "bm25", "--query", "multi-query", "--post", "llm-rerank"]
    rc = main(["--dry-run", *args, "--transform-llm", "openai/test-model", "--llm-base-url", openai_server.base_url])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert openai_server.requests_total == 0
    (counts,) = json.loads(captured.out.strip().splitlines()[-1])["dry_run"]
    from ragrade.retrieval.index import load_index

    candidates = len(load_index(bm25_dir).retriever("bm25").retrieve([QUESTION], 3 * 5)[0])  # depth 3k, k=5
    # one rephrasing request; the dry run's failure falls back to the query, then one score per candidate
    assert counts["by_task"]["multi-query"] == 1 and counts["by_task"]["llm-rerank"] == candidates >= 5
    assert "multi-query failed" in captured.err


def test_qa_answer_generation_settings_and_transforms_as_factors(tmp_path: Path, bm25_dir: Path) -> None:
    from ragrade.qa.files import QAItem, write_qa

    items = [
        QAItem(
            id=f"q{i}", question=f"What does the {w} do?", reference=w, reference_context=TEXTS[c], chunk_id=c, doc_id=c
        )
        for i, (w, c) in enumerate([("glacier", "glacier1"), ("bakery", "dup1"), ("crane", "d1")])
    ]
    write_qa(tmp_path / "qa.jsonl", items)
    out = tmp_path / "run"
    args = ["qa", "answer", str(tmp_path / "qa.jsonl"), "--out", str(out), "--index", f"s={bm25_dir}"]
    args += ["--retrievers", "bm25", "--llm", "offline/extractive", "--query", "none,rm3", "--temperature", "0,0.7"]
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()[1:]]
    assert {(r["query_transform"], r["temperature"]) for r in rows} == {
        ("none", 0.0),
        ("none", 0.7),
        ("rm3", 0.0),
        ("rm3", 0.7),
    }
    assert all(r["query"].startswith("What does") for r in rows)  # "query" stays the question
    summary = (out / "summary.csv").read_text().splitlines()[0].split(",")
    assert {"query_transform", "post", "temperature", "n_transform_failures"} <= set(summary)
