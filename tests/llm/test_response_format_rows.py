"""Which response format each row was produced under, per verb, against a server that refuses structured output.

The local test server answers ``response_format=json_schema`` (and, when asked, ``json_object``) with an error
that names the format; the client steps down to ``json_object`` (or to plain text, parsed tolerantly). Every
verb that asks for JSON and writes per-item records says so per row and counts the rows per format:
``exam generate`` (kept questions' ``generator``, ``exam.rejected.jsonl``, the funnel), ``qa generate``
(each triplet's ``generator``, the funnel) and ``judge`` (each LLM-judged score row, the summary per metric).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.exam.exam_helpers import HashEmbedder
from tests.support.openai_server import OpenAIServer
from tests.support.typed import dig

from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig, FilterConfig
from ragrade.exam.files import read_exam
from ragrade.exam.funnel import read_funnel, read_rejected
from ragrade.exam.generate import generate_exam_full, write_exam_result
from ragrade.io import read_jsonl
from ragrade.judge.run import JudgeRunConfig, run_judging
from ragrade.llm import create_llm
from ragrade.llm.options import LLMOptions
from ragrade.qa.files import read_qa, write_qa
from ragrade.qa.generate import QAGenConfig, generate_qa

# what the server refuses (HTTP 400 naming the format) -> the format every reply is then asked with
REFUSALS = [(("json_schema",), "json_object"), (("json_schema", "json_object"), "text")]
IDS = ["schema-refused", "both-refused"]


def _llm(url: str, **kw: Any) -> Any:
    options = LLMOptions(base_url=url, cache=False, backoff_s=0.01, max_retries=0, **kw)
    return create_llm("openai/test-model", options, api_key="sk-test")


def _sent_formats(log: list[dict[str, Any]]) -> set[str | None]:
    return {(b.get("response_format") or {}).get("type") for b in log if "messages" in b}


# --- exam generate ---------------------------------------------------------------------------------------------

QUESTIONS = {
    "pelican": (
        "Which compression algorithm does the Pelican archiver use by default?",
        ["zstd", "gzip", "lz4", "brotli"],
    ),
    "puffin": (
        "What share of reads did the Puffin cache serve from memory in the benchmark?",
        ["45%", "62%", "78%", "91%"],
    ),
    "albatross": (
        "Which protocol does the Albatross sync client use to talk to its server?",
        ["gRPC", "WebSocket", "MQTT", "AMQP"],
    ),
    "kingfisher": (
        "When are the Kingfisher audit logs rotated on a busy server?",
        ["every hour", "at midnight UTC", "weekly on Sunday", "when they reach 1 GB"],
    ),
}
EXAM_CASES = [*QUESTIONS, "garbage", "server-error"]


def _exam_chunks() -> list[Chunk]:
    body = "This chunk documents one component of a fictional platform in enough detail for a question. " * 3
    out = []
    for i, case in enumerate(EXAM_CASES):
        text = f"[case:{case}] {body}"
        out.append(Chunk(f"chunk-{i}", f"doc-{i}", text, 0, len(text), "test", source=f"docs/{case}.md"))
    return out


def _exam_reply(body: dict[str, Any]) -> str:
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    case = prompt.split("[case:", 1)[1].split("]", 1)[0]
    if case == "server-error":
        raise RuntimeError("scripted failure")  # HTTP 500: no reply, no format
    if case == "garbage":
        return "lorem ipsum dolor sit amet"
    question, choices = QUESTIONS[case]
    return json.dumps({"question": question, "choices": choices, "answer": "B"})


@pytest.mark.parametrize(("refuse", "fmt"), REFUSALS, ids=IDS)
def test_exam_generate_records_the_response_format_per_question_and_rejection(
    tmp_path: Path, refuse: tuple[str, ...], fmt: str
) -> None:
    cfg = ExamConfig(
        n=10,
        seed=3,
        min_chunk_chars=50,
        intra_candidate=FilterConfig(mode="fixed", cosine=0.9),
        extra_candidate=FilterConfig(mode="fixed", jaccard=0.2),
        near_duplicate=FilterConfig(mode="fixed", cosine=0.97),
    )
    with OpenAIServer(responder=_exam_reply, reject=refuse, reject_status=400) as srv:
        result = generate_exam_full(_exam_chunks(), _llm(srv.base_url, concurrency=2), cfg, embedder=HashEmbedder())
        assert "json_schema" in _sent_formats(srv.log)  # asked first, refused
    path = tmp_path / "exam.jsonl"
    write_exam_result(path, result, cfg)
    header, questions = read_exam(path)
    assert len(questions) == len(QUESTIONS)
    assert all(q.generator["response_format"] == fmt for q in questions)
    rejected = {r["source"]: r for r in read_rejected(path)}
    assert rejected["docs/garbage.md"]["stage"] == "parse" and rejected["docs/garbage.md"]["response_format"] == fmt
    assert rejected["docs/server-error.md"]["reason"] == "generation:llm_error"
    assert rejected["docs/server-error.md"]["response_format"] is None  # the request failed: no reply
    funnel = read_funnel(path)
    assert funnel is not None and funnel["response_format"] == {fmt: len(EXAM_CASES) - 1}
    assert header is not None and dig(header.meta, "funnel", "response_format") == {fmt: len(EXAM_CASES) - 1}


def test_offline_exam_funnel_and_rejections_have_no_response_format(tmp_path: Path) -> None:
    from tests.exam.exam_helpers import synthetic_chunks

    result = generate_exam_full(synthetic_chunks(20), None, ExamConfig(n=4, seed=1), embedder=HashEmbedder())
    assert "response_format" not in result.funnel
    assert all("response_format" not in r for r in result.rejected)
    assert all("response_format" not in q.generator for q in result.questions)


# --- qa generate -----------------------------------------------------------------------------------------------

QA_TEXTS = {
    "Eiffel": (
        "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It was designed by the engineering "
        "company of Gustave Eiffel.",
        '{"question": "When was the Eiffel Tower completed?", "answer": "1889"}',
    ),
    "Curie": (
        "Marie Curie received the Nobel Prize in Chemistry in 1911 for her work on radium and polonium.",
        '{"question": "When did Marie Curie receive the Nobel Prize in Chemistry?", "answer": "1911"}',
    ),
    "Danube": (
        "The Danube flows through ten countries before it reaches the Black Sea, and its delta is a wetland.",
        "garbage without fields",
    ),
}


@pytest.mark.parametrize(("refuse", "fmt"), REFUSALS, ids=IDS)
def test_qa_generate_records_the_response_format_per_triplet(tmp_path: Path, refuse: tuple[str, ...], fmt: str) -> None:
    chunks = [
        Chunk(f"c{i}", f"d{i}", text, 0, len(text), "test", source=f"{key}.txt")
        for i, (key, (text, _)) in enumerate(QA_TEXTS.items())
    ]

    def reply(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        return next(r for key, (_, r) in QA_TEXTS.items() if key in prompt)

    with OpenAIServer(responder=reply, reject=refuse, reject_status=400) as srv:
        items, funnel = generate_qa(chunks, _llm(srv.base_url, concurrency=2), QAGenConfig(n=5, min_chunk_chars=50))
        assert "json_schema" in _sent_formats(srv.log)
    assert sorted(i.reference for i in items) == ["1889", "1911"] and funnel.unparsed == 1
    assert all(i.generator["response_format"] == fmt for i in items)
    assert funnel.response_format == {fmt: 3}  # every reply, the unparsed one included
    write_qa(tmp_path / "qa.jsonl", items, meta={"funnel": funnel.to_dict()})
    header, back = read_qa(tmp_path / "qa.jsonl")
    assert [i.generator["response_format"] for i in back] == [fmt, fmt]
    assert header is not None and dig(header.meta, "funnel", "response_format") == {fmt: 3}


def test_offline_qa_funnel_counts_no_format() -> None:
    chunks = [Chunk(f"c{i}", f"d{i}", t, 0, len(t), "test") for i, (t, _) in enumerate(QA_TEXTS.values())]
    items, funnel = generate_qa(chunks, None, QAGenConfig(n=2, min_chunk_chars=50))
    assert items and funnel.to_dict()["response_format"] == {}
    assert all("response_format" not in i.generator for i in items)


# --- judge -----------------------------------------------------------------------------------------------------

ANSWERS = [
    {
        "id": f"a{i}",
        "pipeline": "p1",
        "query": f"Where is tower {i}?",
        "answer": f"Tower {i} is in Paris.",
        "reference": f"Tower {i} stands in Paris.",
        "contexts": [f"Tower {i} stands in Paris and opened in 1889."],
    }
    for i in range(3)
]
_NUMBERED = re.compile(r"^\d+\. ", re.MULTILINE)


def _judge_reply(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    if "Text to split" in prompt:  # claims: extraction
        text = prompt.split("<<<", 1)[1].split(">>>", 1)[0].strip()
        return json.dumps({"claims": [text]})
    if "numbered claims" in prompt:  # claims: a check of every numbered claim
        n = len(_NUMBERED.findall(prompt.split("Claims:", 1)[1]))
        return json.dumps({"verdicts": ["yes"] * n})
    if "Reference answer:" in prompt:  # correctness
        return '{"score": 4, "reason": "right"}'
    return '{"verdict": "yes", "reason": "in [1]"}'  # faithfulness


def _answers(tmp_path: Path) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in ANSWERS))
    return path


@pytest.fixture
def judge_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-formats")
    return tmp_path


def _at(cfg: JudgeRunConfig, base_url: str) -> JudgeRunConfig:
    """The same judge settings against another server (``model_copy`` runs no validator: set the nested field)."""
    return cfg.model_copy(update={"llm_options": cfg.llm_options.model_copy(update={"base_url": base_url})})


@pytest.mark.parametrize(("refuse", "fmt"), REFUSALS, ids=IDS)
def test_judge_score_rows_and_summary_record_the_response_format(
    judge_env: Path, refuse: tuple[str, ...], fmt: str
) -> None:
    metrics = ["correctness", "faithfulness", "claims", "exact"]
    with OpenAIServer(responder=_judge_reply, reject=refuse, reject_status=400) as srv:
        options = LLMOptions(base_url=srv.base_url, max_retries=0, cache=False)
        cfg = JudgeRunConfig(metrics=metrics, llm="openai/test-model", llm_options=options)
        summary = run_judging(_answers(judge_env), judge_env / "out", cfg)
        assert "json_schema" in _sent_formats(srv.log)
    _, recs = read_jsonl(judge_env / "out" / "scores.jsonl", kind="judge_scores")
    by = {(r["id"], r["metric"]): r for r in recs}
    assert len(recs) == len(ANSWERS) * len(metrics)
    for a in ANSWERS:
        for metric in ("correctness", "faithfulness", "claims"):
            rec = by[(a["id"], metric)]
            assert rec["status"] == "ok" and rec["response_format"] == fmt, (metric, rec)
        assert [s["response_format"] for s in by[(a["id"], "correctness")]["samples"]] == [fmt]
        claims = by[(a["id"], "claims")]
        # two extractions, the answer's claim against the reference, the reference's against the answer, one passage
        assert claims["response_formats"] == {k: fmt for k in claims["requests"]} and len(claims["requests"]) == 5
        assert all("response_format" not in sub for sub in claims["requests"].values())
        assert "response_format" not in by[(a["id"], "exact")]  # no LLM behind it
    n = len(ANSWERS)
    assert summary["response_format"] == {"correctness": {fmt: n}, "faithfulness": {fmt: n}, "claims": {fmt: n}}


def test_judge_rows_after_a_json_schema_500_are_json_object_never_text(judge_env: Path) -> None:
    """HTTP 500 for json_schema, several requests in flight: each request retried after it asks with json_object,
    the next format down, never with plain text, and every row records json_object (a row made of requests of
    several formats records the weakest: see the rerun test below)."""
    with OpenAIServer(responder=_judge_reply, reject=("json_schema",), latency_s=0.02) as srv:
        options = LLMOptions(base_url=srv.base_url, concurrency=4, cache=False, backoff_s=0.01)
        cfg = JudgeRunConfig(metrics=["claims", "correctness"], llm="openai/test-model", llm_options=options)
        summary = run_judging(_answers(judge_env), judge_env / "out", cfg)
        assert _sent_formats(srv.log) == {"json_schema", "json_object"} and srv.max_in_flight > 1
        port = _port(srv.base_url)
    _, recs = read_jsonl(judge_env / "out" / "scores.jsonl", kind="judge_scores")
    assert all(r["status"] == "ok" and r["response_format"] == "json_object" for r in recs)
    per_request = [f for r in recs if r["metric"] == "claims" for f in r["response_formats"].values()]
    assert set(per_request) == {"json_object"}
    n = len(ANSWERS)
    assert summary["response_format"] == {"claims": {"json_object": n}, "correctness": {"json_object": n}}
    # a rerun reuses the rows (same settings, the same server restarted at its address) with their formats
    with OpenAIServer(responder=_judge_reply, port=port) as srv:
        again = run_judging(_answers(judge_env), judge_env / "out", _at(cfg, srv.base_url))
        assert srv.requests_total == 0
    assert again["response_format"] == summary["response_format"]


def test_a_claims_rerun_keeps_the_formats_of_the_requests_it_reuses(judge_env: Path) -> None:
    """A failed extraction is asked again by the rerun; the requests reused from the first run keep their format."""
    broken = {"on": True}

    def reply(body: dict[str, Any]) -> str:
        if broken["on"] and "Tower 1 stands in Paris." in body["messages"][-1]["content"]:
            raise RuntimeError("scripted failure")  # HTTP 500 for a1's reference (extraction and checks)
        return _judge_reply(body)

    answers = _answers(judge_env)
    with OpenAIServer(responder=reply, reject=("json_schema",), reject_status=400) as srv:
        options = LLMOptions(base_url=srv.base_url, max_retries=0, cache=False)
        cfg = JudgeRunConfig(metrics=["claims"], llm="openai/test-model", llm_options=options)
        first = run_judging(answers, judge_env / "out", cfg)
        port = _port(srv.base_url)  # the same server is restarted at its address below (another is another judge)
    _, recs = read_jsonl(judge_env / "out" / "scores.jsonl", kind="judge_scores")
    failed = {r["id"]: r for r in recs}["a1"]
    assert failed["status"] == "failed" and failed["response_formats"]["extract:answer"] == "json_object"
    assert "extract:reference" not in failed["response_formats"]  # no reply, no format
    assert first["response_format"] == {"claims": {"json_object": len(ANSWERS)}}
    broken["on"] = False
    with OpenAIServer(responder=reply, reject=("json_schema", "json_object"), reject_status=400, port=port) as srv:
        second = run_judging(answers, judge_env / "out", _at(cfg, srv.base_url))
    _, recs = read_jsonl(judge_env / "out" / "scores.jsonl", kind="judge_scores")
    again = {r["id"]: r for r in recs}["a1"]
    assert again["status"] == "ok" and again["response_format"] == "text"
    assert again["response_formats"]["extract:answer"] == "json_object"  # reused from the first run
    assert again["response_formats"]["extract:reference"] == "text"  # asked again, as plain text
    assert second["response_format"] == {"claims": {"json_object": len(ANSWERS) - 1, "text": 1}}


def _port(base_url: str) -> int:
    """The port of a server's ``http://127.0.0.1:PORT/v1``."""
    return int(base_url.rsplit(":", 1)[1].split("/")[0])
