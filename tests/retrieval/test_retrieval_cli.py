"""The retrieval verbs: index, search, ask, retrieval-eval, and their error paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.retrieval.retrieval_data import FACTS, fact_chunks, fact_docs

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks, write_documents


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("cli")
    write_chunks(base / "chunks.jsonl", fact_chunks())
    assert main(["index", str(base / "chunks.jsonl"), "--out", str(base / "idx")]) == 0
    return base / "idx"


def test_index_json_stats_and_second_run_uses_cache(cli_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chunks = cli_index.parent / "chunks.jsonl"
    rc, out, _ = _run(capsys, "index", str(chunks), "--out", str(cli_index), "--json")
    assert rc == 0
    stats = json.loads(out)
    assert stats["chunks"] == len(FACTS) and stats["embedded"] == 0 and stats["cached"] == len(FACTS)


def test_index_documents_with_strategy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_documents(tmp_path / "docs.jsonl", fact_docs())
    rc, out, _ = _run(
        capsys,
        "index",
        str(tmp_path / "docs.jsonl"),
        "-o",
        str(tmp_path / "idx"),
        "--strategy",
        "sentence",
        "--size",
        "64",
        "--overlap",
        "0",
        "--no-dense",
        "--json",
    )
    assert rc == 0, out
    assert json.loads(out)["chunks"] == len(FACTS)
    man = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert man["chunker"]["strategy"] == "sentence"


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid"])
def test_search(cli_index: Path, capsys: pytest.CaptureFixture[str], retriever: str) -> None:
    rc, out, _ = _run(capsys, "search", str(cli_index), FACTS[3][1], "-r", retriever, "-k", "2", "--json")
    assert rc == 0
    res = json.loads(out)
    assert res["hits"][0]["doc_id"] == "fact3" and 1 <= len(res["hits"]) <= 2
    rc, out, _ = _run(capsys, "search", str(cli_index), FACTS[3][1], "-r", retriever, "-k", "1")
    assert rc == 0 and "fact3#c0" in out


def test_search_rerank(cli_index: Path, tiny_cross_encoder: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(
        capsys, "search", str(cli_index), "drone", "-r", "rerank(bm25)", "--reranker", tiny_cross_encoder, "--json"
    )
    assert rc == 0 and json.loads(out)["retriever"] == "rerank(bm25)"


def test_ask_extractive_baseline(cli_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "ask", str(cli_index), FACTS[2][1], "-r", "bm25", "-k", "2")
    assert rc == 0
    assert "Extractive baseline" in out
    assert "41 minutes" in out and "fact2#c0" in out and "facts/drone.txt" in out
    rc, out, _ = _run(capsys, "ask", str(cli_index), FACTS[2][1], "-r", "bm25", "--json")
    ans = json.loads(out)
    assert ans["mode"] == "extractive-baseline" and ans["citations"][0]["chunk_id"] == "fact2#c0"


def test_ask_with_llm_cites_chunks(cli_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.openai_server import OpenAIServer

    seen: list[str] = []

    def responder(body: dict[str, object]) -> str:
        seen.append(json.dumps(body))
        return "It was painted crimson [1]."

    prompt = tmp_path / "p.txt"
    prompt.write_text("CUSTOM PROMPT\n{passages}\nQ: {question}\n")
    with OpenAIServer(responder=responder) as srv:
        rc, out, err = _run(
            capsys,
            "ask",
            str(cli_index),
            FACTS[0][1],
            "-r",
            "bm25",
            "-k",
            "2",
            "--llm",
            "openai/test-model",
            "--base-url",
            srv.base_url,
            "--prompt-file",
            str(prompt),
            "--json",
        )
    assert rc == 0, err
    ans = json.loads(out)
    assert ans["mode"] == "generated" and ans["answer"].startswith("It was painted crimson")
    assert ans["citations"] == [{"n": 1, "chunk_id": "fact0#c0", "doc_id": "fact0", "source": "facts/lighthouse.txt"}]
    assert "CUSTOM PROMPT" in seen[0] and "Varnholm" in seen[0]


def test_ask_interactive_reads_stdin(
    cli_index: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(f"{FACTS[6][1]}\n{FACTS[3][1]}\n\nignored\n"))
    rc, out, _ = _run(capsys, "ask", str(cli_index), "-r", "bm25", "--json")
    assert rc == 0
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [r["question"] for r in rows] == [FACTS[6][1], FACTS[3][1]]


def test_retrieval_eval(cli_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = tmp_path / "qrels.jsonl"
    qrels.write_text(
        "\n".join(json.dumps({"query": q, "relevant": [f"fact{i}#c0"]}) for i, (_, q, _) in enumerate(FACTS)) + "\n"
    )
    out_file = tmp_path / "eval.json"
    rc, out, _ = _run(
        capsys,
        "retrieval-eval",
        str(cli_index),
        str(qrels),
        "-r",
        "bm25,hybrid,closed,oracle",
        "-k",
        "3",
        "--json",
        "--out",
        str(out_file),
        "--n-boot",
        "200",
    )
    assert rc == 0
    res = {r["retriever"]: r["metrics"] for r in json.loads(out)["results"]}
    assert res["bm25"]["hit_rate"]["mean"] == 1.0 and res["hybrid"]["mrr"]["mean"] == 1.0
    assert res["closed"]["recall"]["mean"] == 0.0 and res["oracle"]["ndcg"]["mean"] == 1.0
    saved = json.loads(out_file.read_text())
    assert saved["version"] == 1 and len(saved["results"][0]["per_query"]) == len(FACTS)
    rc, out, _ = _run(capsys, "retrieval-eval", str(cli_index), str(qrels), "-r", "bm25", "--level", "doc")
    assert rc == 0 and "hit_rate@10" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "{idx}", "", "-r", "bm25"], "empty"),
        (["search", "{idx}", "x", "-k", "0"], "positive"),
        (["search", "{missing}", "x"], "not found"),
        (["search", "{idx}", "x", "-r", "dense", "--embedder", "st:{tiny}"], "built with embedder"),
        (["search", "{idx}", "x", "-r", "bm52"], "Did you mean 'bm25'"),
        (["ask", "{idx}", "  "], "empty"),
        (["ask", "{idx}", "q", "-k", "-1"], "positive"),
        (["retrieval-eval", "{idx}", "{missing}", "-r", "bm25"], "not found"),
        (["index", "{missing}", "--out", "{missing}"], "not found"),
    ],
)
def test_errors_are_one_line_exit_2(
    cli_index: Path,
    tmp_path: Path,
    tiny_st_model: str,
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    filled = [a.format(idx=cli_index, missing=tmp_path / "missing", tiny=tiny_st_model) for a in args]
    rc, _, err = _run(capsys, *filled)
    assert rc == 2
    lines = [line for line in err.splitlines() if line.startswith("ragrade: error:")]
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err


def test_ask_llm_failure_exits_2(cli_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.openai_server import Faults, OpenAIServer

    with OpenAIServer(faults=Faults(rate=1.0, seed=0, kinds=("400",))) as srv:
        rc, out, err = _run(
            capsys,
            "ask",
            str(cli_index),
            FACTS[0][1],
            "-r",
            "bm25",
            "--llm",
            "openai/test-model",
            "--llm-base-url",
            srv.base_url,
        )
    assert rc == 2
    assert "Answer failed" in out
    assert "got no answer from the LLM" in err and "Traceback" not in err
