"""Exam generation against the local OpenAI-compatible test server: every candidate is counted exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig, FilterConfig
from ragrade.exam.files import read_exam
from ragrade.exam.funnel import read_funnel, read_rejected, sidecar_paths
from ragrade.exam.generate import generate_exam_full, write_exam_result
from ragrade.exam.writers import LLMWriter


def layout(q: str, choices: list[str], answer: str) -> str:
    return (
        "Question: "
        + q
        + "\n"
        + "\n".join(f"{'ABCDE'[i]}) {c}" for i, c in enumerate(choices))
        + f"\nCorrect Answer: {answer}\nExplanation: see the release notes."
    )


def as_json(q: str, choices: list[str], answer: str) -> str:
    return json.dumps({"question": q, "choices": choices, "answer": answer})


GOOD_TEXT = [
    (
        "Which port does the Kestrel gateway listen on when no configuration file is present?",
        ["8443", "9090", "7001", "5050"],
        "A",
    ),
    (
        "What is the maximum number of snapshots the Marlin backup tool keeps per volume?",
        ["14", "30", "90", "365"],
        "C",
    ),
    (
        "Who designed the original scheduler of the Osprey batch system?",
        ["Grace Hopper", "Alan Turing", "Ada Lovelace", "Edsger Dijkstra"],
        "B",
    ),
    ("In which year did the Heron message queue add support for transactions?", ["2012", "2015", "2018", "2021"], "D"),
    (
        "Which function releases the file handles held by a Falcon worker process?",
        ["close_pool()", "drop_cache()", "flush_buffer()", "rotate_logs()"],
        "A) close_pool()",
    ),
    (
        "How long does the Condor load balancer wait before closing an idle connection?",
        ["30 seconds", "2 minutes", "5 minutes", "1 hour"],
        "B",
    ),
]
GOOD_JSON = [
    ("Which compression algorithm does the Pelican archiver use by default?", ["zstd", "gzip", "lz4", "brotli"], "C"),
    ("What share of reads did the Puffin cache serve from memory in the benchmark?", ["45%", "62%", "78%", "91%"], "B"),
    (
        "Which protocol does the Albatross sync client use to talk to its server?",
        ["gRPC", "WebSocket", "MQTT", "AMQP"],
        "A",
    ),
    (
        "When are the Kingfisher audit logs rotated on a busy server?",
        ["every hour", "at midnight UTC", "weekly on Sunday", "when they reach 1 GB"],
        "D",
    ),
]
BAD_Q = "Which planet is the largest in the solar system of the Tern simulator?"
EXTRA_CTX = "The Finch indexer rebuilds its search index every night at two in the morning to keep queries fast."

# case id -> (reply, expected reason or None when kept)
CASES: dict[str, tuple[str, str | None]] = {}
for i, (q, c, a) in enumerate(GOOD_TEXT):
    CASES[f"good-text-{i}"] = (layout(q, c, a), None)
for i, (q, c, a) in enumerate(GOOD_JSON):
    CASES[f"good-json-{i}"] = (as_json(q, c, a), None)
CASES["good-fenced"] = (
    "```json\n"
    + as_json(
        "Which environment variable sets the Sparrow log level?",
        ["SPARROW_LOG", "LOG_LEVEL", "DEBUG_MODE", "SPW_VERBOSITY"],
        "A",
    )
    + "\n```",
    None,
)
CASES["empty"] = ("", "parse:empty_output")
CASES["broken-json"] = ('{"question": "Which port does Tern use?", "choices": ["1", "2",]}', "parse:invalid_json")
CASES["cut-off"] = ('{"question": "Which port does Tern use?", "choices": ["1", "2"', "parse:truncated")
CASES["echoed"] = (
    '{"question": "...", "choices": ["...", "...", "...", "..."], "answer": "A"}',
    "parse:echoed_template",
)
CASES["three-choices"] = (layout(BAD_Q, ["Mars", "Jupiter", "Venus"], "B"), "parse:too_few_choices")
CASES["five-choices"] = (layout(BAD_Q, ["Mars", "Jupiter", "Venus", "Earth", "Pluto"], "B"), "parse:too_many_choices")
CASES["duplicate"] = (layout(BAD_Q, ["Mars", "Jupiter", "mars", "Earth"], "B"), "parse:duplicate_choices")
CASES["no-answer"] = (
    layout(BAD_Q, ["Mars", "Jupiter", "Venus", "Earth"], "").replace("Correct Answer: \n", ""),
    "parse:no_answer",
)
CASES["two-answers"] = (layout(BAD_Q, ["Mars", "Jupiter", "Venus", "Earth"], "B and C"), "parse:multiple_answers")
CASES["unknown-answer"] = (
    layout(BAD_Q, ["Mars", "Jupiter", "Venus", "Earth"], "Saturn"),
    "parse:answer_not_among_choices",
)
CASES["short"] = (layout("Why?", ["Mars", "Jupiter", "Venus", "Earth"], "B"), "parse:question_too_short")
CASES["statement"] = (
    layout(
        "Planets are big and round and far away from the Tern simulator.", ["Mars", "Jupiter", "Venus", "Earth"], "B"
    ),
    "parse:not_a_question",
)
CASES["refusal"] = ("I am sorry, but I cannot write a question about this material.", "generation:refused")
CASES["passage"] = (
    layout(
        "According to the passage, which port does the Warbler proxy use for admin traffic?",
        ["8081", "8444", "9443", "6060"],
        "C",
    ),
    "self_containment:points_at_source",
)
CASES["intra"] = (
    layout(
        "How many times does the Gannet proxy retry a failed upstream request?",
        [
            "It retries three times before failing",
            "It retries three times before failing over",
            "It never retries",
            "It retries once",
        ],
        "A",
    ),
    "intra_candidate:cosine",
)
CASES["extra"] = (
    layout(
        "When does the Finch indexer rebuild its search index?",
        [
            "once per day",
            "every night at two in the morning to keep queries fast",
            "every hour",
            "whenever a document changes",
        ],
        "A",
    ),
    "extra_candidate:jaccard",
)
CASES["duplicate-question"] = (CASES["good-text-0"][0], "near_duplicate:exact")
CASES["server-error"] = ("", "generation:llm_error")


def make_chunks() -> list[Chunk]:
    chunks = []
    for i, case in enumerate(CASES):
        body = (
            EXTRA_CTX
            if case == "extra"
            else ("This chunk documents one component of a fictional platform in enough detail for a question. " * 3)
        )
        text = f"[case:{case}] {body}"
        chunks.append(
            Chunk(
                id=f"chunk-{i:02d}",
                doc_id=f"doc-{i:02d}",
                text=text,
                start=0,
                end=len(text),
                strategy="test",
                source=f"docs/{case}.md",
                metadata={"topic": case.split("-")[0]},
            )
        )
    return chunks


def responder(body: dict[str, Any]) -> str:
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    case = prompt.split("[case:", 1)[1].split("]", 1)[0]
    if case == "server-error":
        raise RuntimeError("scripted failure")
    return CASES[case][0]


CFG = ExamConfig(
    n=100,
    seed=3,
    min_chunk_chars=50,
    intra_candidate=FilterConfig(mode="fixed", cosine=0.9),
    extra_candidate=FilterConfig(mode="fixed", jaccard=0.2),
    near_duplicate=FilterConfig(mode="fixed", cosine=0.97),
)


@pytest.fixture(scope="module")
def llm_result(hash_embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from ragrade.llm import create_llm

    with OpenAIServer(responder=responder) as srv:
        llm = create_llm(
            "openai/test-model",
            base_url=srv.base_url,
            api_key="sk-test",
            cache=False,
            max_retries=1,
            backoff_s=0.01,
            concurrency=4,
        )
        result = generate_exam_full(make_chunks(), llm, CFG, embedder=hash_embedder)
        requests = srv.requests_total
    return result, requests


def test_funnel_counts_every_reason_exactly(llm_result: Any) -> None:
    result, _ = llm_result
    funnel = result.funnel
    expected: dict[str, int] = {}
    for _, why in CASES.values():
        if why is not None:
            expected[why] = expected.get(why, 0) + 1
    assert funnel["reasons"] == dict(sorted(expected.items()))
    n_good = sum(why is None for _, why in CASES.values())
    assert funnel["generated"] == len(CASES)
    assert funnel["kept"] == n_good == len(result.questions)
    assert funnel["generated"] == funnel["kept"] + sum(s["removed"] for s in funnel["stages"])
    by_stage = {s["stage"]: s for s in funnel["stages"]}
    assert by_stage["parse"]["reasons"] == {k.split(":")[1]: v for k, v in expected.items() if k.startswith("parse")}
    assert by_stage["generation"]["removed"] == 2  # the failed request and the refusal, each with its reason
    assert by_stage["intra_candidate"]["filter"]["thresholds"] == {"jaccard": None, "cosine": 0.9}
    assert by_stage["surplus"]["removed"] == 0
    assert funnel["shortfall"] == 100 - n_good
    assert sum(funnel["formats"].values()) == by_stage["parse"]["out"]
    assert funnel["formats"]["json"] == len(GOOD_JSON) + 1


def test_each_rejected_candidate_has_its_scripted_reason(llm_result: Any) -> None:
    result, _ = llm_result
    got = {r["source"].removeprefix("docs/").removesuffix(".md"): r["reason"] for r in result.rejected}
    expected = {case: why for case, (_, why) in CASES.items() if why is not None}
    # which of two identical questions is kept depends on the seeded order; exactly one of them is rejected
    dup = {"good-text-0", "duplicate-question"}
    assert len(dup & set(got)) == 1
    got_dup = (dup & set(got)).pop()
    got["duplicate-question"] = got.pop(got_dup)
    assert got == expected
    kept_sources = {q.source.removeprefix("docs/").removesuffix(".md") for q in result.questions}
    assert len(kept_sources) == len(result.questions)


def test_questions_carry_context_span_tags_and_stable_ids(llm_result: Any) -> None:
    result, _ = llm_result
    for q in result.questions:
        assert len(q.choices) == 4 and 0 <= q.answer < 4
        assert q.context.startswith("[case:") and q.span == (0, len(q.context))
        assert q.tags["qword"] in {"what", "which", "how", "when", "why", "where", "who", "other"}
        assert isinstance(q.tags["bloom"], list)
        assert q.generator["name"] == "llm" and q.generator["llm"] == "openai/test-model"
        assert q.id.startswith("q") and len(q.id) == 13
    by_q = {q.question: q for q in result.questions}
    q = by_q[GOOD_JSON[0][0]]
    assert q.choices[q.answer] == "lz4"
    assert q.generator["raw_answer"] == "C"


def test_generation_requests_ask_for_json_and_carry_the_chunk(llm_result: Any) -> None:
    chunks = make_chunks()

    class Dummy:
        name = "openai/x"

        def describe(self) -> dict[str, Any]:
            return {}

    req = LLMWriter(Dummy(), CFG).request(chunks[0])  # type: ignore[arg-type]
    assert req.json_schema is not None and req.json_schema["required"] == ["question", "choices", "answer"]
    assert req.passages == (chunks[0].text,) and req.task == "generate_question"
    assert req.messages is not None and chunks[0].text in req.messages[1].content
    assert "the passage" in req.messages[1].content  # the prompt forbids references to the source


def test_prompt_override_from_file(tmp_path: Path) -> None:
    from ragrade.errors import ConfigError

    good = tmp_path / "p.txt"
    good.write_text('Write a question about {title} from:\n{document}\nJSON please: {{"question": ...}}')
    bad = tmp_path / "bad.txt"
    bad.write_text("no placeholder here")

    class Dummy:
        name = "openai/x"

    w = LLMWriter(Dummy(), CFG.model_copy(update={"prompt_file": str(good)}))  # type: ignore[arg-type]
    content = w.request(make_chunks()[0]).messages[1].content  # type: ignore[index]
    assert content.startswith("Write a question about") and '{"question": ...}' in content
    with pytest.raises(ConfigError, match="document"):
        LLMWriter(Dummy(), CFG.model_copy(update={"prompt_file": str(bad)}))  # type: ignore[arg-type]


def test_written_exam_and_sidecars(llm_result: Any, tmp_path: Path) -> None:
    result, _ = llm_result
    out = tmp_path / "exam.jsonl"
    write_exam_result(out, result, CFG, input_path="chunks.jsonl")
    header, questions = read_exam(out)
    assert header is not None and header.meta["funnel"] == result.funnel
    assert [q.id for q in questions] == [q.id for q in result.questions]
    funnel_path, rejected_path = sidecar_paths(out)
    assert funnel_path.name == "exam.funnel.json" and rejected_path.name == "exam.rejected.jsonl"
    assert read_funnel(out) == result.funnel
    rejected = read_rejected(out)
    assert len(rejected) == result.funnel["removed"]
    assert all(r["reason"] for r in rejected)
