"""Broken LLM servers against exam generate, qa generate, judge, robust run and ask (see test_failed_requests.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer, always, recovers_after

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks
from ragrade.corpus.types import Chunk

CHAT = "/v1/chat/completions"
DATA = Path(__file__).resolve().parents[1] / "robust" / "data"
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord"]


pytestmark = pytest.mark.usefixtures("isolated_llm_env")


def _chunks(tmp_path: Path, words: Sequence[str] = WORDS) -> Path:
    """One chunk per word, each about that word's valve (its number in the text: see :func:`_which`)."""
    chunks = []
    for i, w in enumerate(words):
        text = (
            f"Chunk {i} about the {w} valve. The {w} valve of the Tern pump opens at {10 + i} bar and closes "
            f"at {5 + i} bar; operators replace its {w} seal every {3 + i} months. " * 3
        )
        chunks.append(Chunk(id=f"c{i}", doc_id=f"d{i}", text=text, start=0, end=len(text), strategy="t", source=w))
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, chunks)
    return path


def _which(body: dict[str, Any]) -> int:
    text = " ".join(str(m.get("content", "")) for m in body.get("messages") or [])
    m = re.search(r"Chunk (\d+) about", text)
    return int(m.group(1)) if m else 0


def _question_writer(body: dict[str, Any]) -> str:
    i = _which(body)
    if i == 5:
        return "I'm sorry, but I can't help with writing that question."
    w = WORDS[i]
    return json.dumps(
        {
            "question": f"At what pressure does the {w} valve of the Tern pump open?",
            "choices": [f"{10 + i} bar", f"{40 + i} bar", f"{70 + i} bar", f"{95 + i} bar"],
            "answer": "A",
        }
    )


def _exam_generate(chunks: Path, url: str, out: Path, *extra: str) -> list[str]:
    return [
        "exam", "generate", str(chunks), "--llm", "openai/test-model", "--llm-base-url", url, "--out", str(out),
        "--n", "6", "--oversample", "1", "--max-retries", "0", "--concurrency", "2",
        "--embedder", f"openai:test-model@{url}", *extra,
    ]  # fmt: skip


def test_exam_generate_funnel_separates_failed_refused_unparsed_and_rerun_resends_only_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks, out = _chunks(tmp_path), tmp_path / "exam.jsonl"
    with OpenAIServer(responder=_question_writer, faults=recovers_after(2, paths=[CHAT])) as srv:
        assert main(_exam_generate(chunks, srv.base_url, out)) == 3
        assert "2 of 6 LLM requests failed" in capsys.readouterr().err
        funnel = json.loads(out.with_name("exam.funnel.json").read_text())
        assert funnel["reasons"].get("generation:llm_error") == 2
        assert funnel["reasons"].get("generation:refused") == 1
        assert not any(k.startswith("parse:") for k in funnel["reasons"])  # a refusal is not a parse failure
        srv.reset_counters()
        assert main(_exam_generate(chunks, srv.base_url, out)) == 0
        assert srv.requests_by_path[CHAT] == 2  # the failed requests only; the rest came from the cache
        funnel = json.loads(out.with_name("exam.funnel.json").read_text())
        assert "generation:llm_error" not in funnel["reasons"]


def test_exam_generate_401_and_dead_server_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chunks, out = _chunks(tmp_path), tmp_path / "exam.jsonl"
    with OpenAIServer(faults=always("401", paths=[CHAT])) as srv:
        assert main([*_exam_generate(chunks, srv.base_url, out), "--concurrency", "1"]) == 2
        assert srv.requests_by_path[CHAT] == 1
    err = capsys.readouterr().err
    assert "the server rejected the API key" in err and "no question survived" not in err
    with OpenAIServer(faults=always("401")) as srv:  # the embeddings endpoint too: the key never shows
        assert main(_exam_generate(chunks, srv.base_url, out)) == 2
    err = capsys.readouterr().err
    assert "rejected the API key" in err and "sk-test-key" not in err
    with OpenAIServer(faults=always("500", paths=[CHAT])) as srv:
        assert main([*_exam_generate(chunks, srv.base_url, out), "--concurrency", "1"]) == 2
        assert srv.requests_by_path[CHAT] == 5
    assert "server unreachable" in capsys.readouterr().err


def _qa_writer(body: dict[str, Any]) -> str:
    i = _which(body)
    return json.dumps({"question": f"When is the {WORDS[i]} seal replaced?", "answer": f"every {3 + i} months"})


def test_qa_generate_counts_failures_and_reruns_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chunks, out = _chunks(tmp_path), tmp_path / "qa.jsonl"
    args = ["qa", "generate", str(chunks), "--n", "6", "--llm", "openai/test-model", "--out", str(out),
            "--max-retries", "0", "--min-chars", "50", "--json"]  # fmt: skip
    with OpenAIServer(responder=_qa_writer, faults=recovers_after(2)) as srv:
        assert main([*args, "--llm-base-url", srv.base_url]) == 3
        report = json.loads(capsys.readouterr().out)
        assert report["funnel"]["failed"] == 2 and report["funnel"]["accepted"] == 4
        srv.reset_counters()
        assert main([*args, "--llm-base-url", srv.base_url]) == 0
        assert srv.requests_by_path[CHAT] == 2
        assert json.loads(capsys.readouterr().out)["funnel"]["failed"] == 0


def _answers(tmp_path: Path) -> Path:
    """Five answers in the plain JSONL any system can write (id, query, answer, reference, config)."""
    path = tmp_path / "answers.jsonl"
    rows = [
        {"id": f"a{i}", "query": f"When is the {w} seal replaced?", "answer": f"every {3 + i} months",
         "reference": f"every {3 + i} months", "config": "mine"}
        for i, w in enumerate(WORDS[:5])
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_judge_failures_missing_counted_and_retried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["judge", str(_answers(tmp_path)), "--metrics", "correctness", "--llm", "openai/test-model",
            "--max-retries", "0", "--concurrency", "1", "--json", "--out", str(tmp_path / "judge")]  # fmt: skip
    capsys.readouterr()
    with OpenAIServer(responder=lambda b: '{"score": 4, "reason": "close"}', faults=recovers_after(2)) as srv:
        assert main([*args, "--llm-base-url", srv.base_url]) == 3
        summary = json.loads(capsys.readouterr().out)
        assert summary["totals"]["correctness"]["failed"] == 2
        srv.reset_counters()
        assert main([*args, "--llm-base-url", srv.base_url]) == 0
        assert srv.requests_by_path[CHAT] == 2
    with OpenAIServer(faults=always("401")) as srv:
        assert main([*args, "--llm-base-url", srv.base_url, "--no-cache", "--out", str(tmp_path / "j2")]) == 2
        assert srv.requests_total == 1
    assert "the server rejected the API key" in capsys.readouterr().err


def _robust(url: str, out: Path, *extra: str) -> list[str]:
    return [
        "robust", "run", str(DATA / "en_base.jsonl"), "--testbed", "noise", "--noise-ratios", "0",
        "--limit", "4", "--llm", "openai/test-model", "--llm-base-url", url, "--out", str(out), "--max-retries", "0",
        *extra,
    ]  # fmt: skip


def test_robust_run_failures_missing_exit_3_rerun_resends_only_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "robust"
    with OpenAIServer(responder=lambda b: "I do not know.", faults=recovers_after(1)) as srv:
        assert main(_robust(srv.base_url, out)) == 3
        metrics = json.loads((out / "metrics.json").read_text())
        assert (metrics["n"], metrics["failed"], metrics["accuracy"]["n"]) == (3, 1, 3)  # missing, not wrong
        srv.reset_counters()
        assert main(_robust(srv.base_url, out)) == 0
        assert srv.requests_by_path[CHAT] == 1
    capsys.readouterr()
    with OpenAIServer(faults=always("401")) as srv:
        assert main([*_robust(srv.base_url, tmp_path / "r401"), "--no-cache"]) == 2
        assert srv.requests_total <= 16 and "rejected the API key" in capsys.readouterr().err


def test_robust_run_checks_every_model_before_the_first_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "robust"
    args = ["robust", "run", str(DATA / "en_base.jsonl"), "--testbed", "noise", "--limit", "2",
            "--llm", "offline/extractive,nosuch/model", "--out", str(out)]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragrade: error:") and "nosuch" in err
    assert not out.exists()  # offline/extractive did not run first


def test_ask_stops_on_a_rejected_key_and_takes_timeouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "index"
    assert main(["index", str(_chunks(tmp_path)), "--out", str(index), "--no-dense"]) == 0
    with OpenAIServer(faults=always("401")) as srv:
        code = main(["ask", str(index), "When is the amber seal replaced?", "--retriever", "bm25",
                     "--llm", "openai/test-model", "--llm-base-url", srv.base_url, "--max-retries", "0"])  # fmt: skip
        assert code == 2 and srv.requests_total == 1
    assert "rejected the API key" in capsys.readouterr().err
    with OpenAIServer(faults=always("hang", hang_s=5)) as srv:
        ask = ["ask", str(index), "When is the amber seal replaced?", "-r", "bm25", "--llm", "openai/test-model"]
        code = main([*ask, "--llm-base-url", srv.base_url, "--max-retries", "0", "--timeout", "0.5"])
        assert code == 2
    assert "timed out after 0.5s" in capsys.readouterr().out


def test_index_with_a_bad_store_fails_before_embedding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "idx"
    assert main(["index", str(_chunks(tmp_path)), "--out", str(out), "--store", "bogus"]) == 2
    assert "unknown vector_store 'bogus'" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--embedder", "bogus"], "unknown embedder 'bogus'"),
        (["--embedder", "st:/nonexistent/model"], "model folder '/nonexistent/model' not found"),
        (["--store", "pgvector"], "needs a connection string"),
        (["--embedder", "openai:text-embedding-3-small@http://127.0.0.1:9/v1"], "Connection refused"),
    ],
)
def test_index_with_a_bad_embedder_or_store_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, flags: list[str], says: str
) -> None:
    # issue 38.2: these failed after writing bm25/ and chunks.jsonl (and dense/) into --out
    monkeypatch.delenv("RAGRADE_PG_DSN", raising=False)
    out = tmp_path / "idx"
    assert main(["index", str(_chunks(tmp_path)), "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not out.exists()  # checked before any file is written, or a failed new index removed


def test_exam_generate_stops_once_a_hanging_server_is_judged_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 38.5: a server that accepts connections and never answers; every candidate of the exam would fail
    with OpenAIServer(faults=always("hang", hang_s=5)) as srv:
        args = ["exam", "generate", str(_chunks(tmp_path)), "--out", str(tmp_path / "exam.jsonl"), "-n", "20",
                "--llm", "openai/test-model", "--llm-base-url", srv.base_url, "--timeout", "0.5",
                "--max-retries", "1"]  # fmt: skip
        assert main(args) == 2
        sent = srv.requests_total
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # (the embedding model's loading bar comes first)
    assert last.startswith("ragrade: error:") and "unreachable or too slow" in last and "Traceback" not in err
    assert sent <= 3  # judged from the first requests, sent one at a time: the rest are never sent
    assert "rerun the same command" in err
