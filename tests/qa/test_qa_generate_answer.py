from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer
from tests.support.typed import some

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks
from ragrade.corpus.types import Chunk
from ragrade.io import read_jsonl
from ragrade.qa.files import read_qa
from ragrade.qa.generate import QAGenConfig, extractive_question, generate_qa, parse_generation

TEXTS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It was designed by the engineering "
    "company of Gustave Eiffel and was at first criticised by leading artists of the time.",
    "The Danube flows through ten countries before it reaches the Black Sea. Its delta is a large wetland that "
    "hosts more than 300 species of birds during the year.",
    "Marie Curie received the Nobel Prize in Chemistry in 1911 for her work on radium and polonium. She remains "
    "the only person honoured with Nobel Prizes in two different sciences.",
    "x = [1, 2, 3]\nprint(sum(x))  # code, not prose, so no question comes from here at all",
]


def _chunks() -> list[Chunk]:
    return [
        Chunk(
            id=f"c{i}",
            doc_id=f"d{i}",
            text=t,
            start=0,
            end=len(t),
            strategy="test",
            source=f"doc{i}.txt",
            metadata={"topic": f"t{i}"},
        )
        for i, t in enumerate(TEXTS)
    ]


def test_offline_extractive_question_is_grounded() -> None:
    c = _chunks()[0]
    question, answer, (s, e) = some(extractive_question(c, seed=0))
    assert c.text[s:e] == answer
    assert question.endswith("?") and answer not in question
    assert extractive_question(_chunks()[3], seed=0) is None  # code is not prose


def test_generate_offline_seeded_deduplicated_with_ids() -> None:
    items, funnel = generate_qa(_chunks(), None, QAGenConfig(n=3, seed=7, min_chunk_chars=50))
    again, _ = generate_qa(_chunks(), None, QAGenConfig(n=3, seed=7, min_chunk_chars=50))
    assert [i.to_record() for i in items] == [i.to_record() for i in again]
    assert len(items) == 3 and len({i.question for i in items}) == 3
    for it in items:
        assert it.generator["baseline"] is True
        assert it.answer_span is not None
        assert it.reference_context[it.answer_span[0] : it.answer_span[1]] == it.reference
        assert it.to_record()["relevant_chunk_ids"] == [it.chunk_id]
    assert funnel.accepted == 3 and funnel.chunks_eligible == 4


def test_parse_generation_shapes() -> None:
    assert parse_generation('{"question": "When?", "answer": "1889"}') == ("When?", "1889")
    assert parse_generation('```json\n{"question": "Q?", "answer": 5}\n```') == ("Q?", "5")
    assert parse_generation("Question: Where is it?\nAnswer: Paris") == ("Where is it?", "Paris")
    assert parse_generation("no idea") is None


def test_generate_with_llm_counts_funnel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))

    def responder(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "Eiffel" in prompt:
            return '{"question": "When was the Eiffel Tower completed?", "answer": "1889"}'
        if "Danube" in prompt:
            return '{"question": "...", "answer": "..."}'  # the prompt's example: unparsed, not a short question
        if "Curie" in prompt:
            return '{"question": "Which river is longest in Asia?", "answer": "Yangtze"}'  # not in the passage
        return '{"question": "When was the  Eiffel Tower completed", "answer": "code"}'  # same question again

    from ragrade.llm import create_llm

    chunks = _chunks()
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, chunks)
    with OpenAIServer(responder=responder) as server:
        llm = create_llm("openai/test-model", base_url=server.base_url, api_key="sk-x")
        items, funnel = generate_qa(chunks, llm, QAGenConfig(n=5, seed=0, min_chunk_chars=50))
    assert [i.reference for i in items] == ["1889"]
    assert funnel.unparsed == 1 and funnel.rejected == {"answer not found in passage": 1}
    assert funnel.duplicates == 1  # the code chunk produced the same question again
    assert items[0].generator["llm"] == "openai/test-model" and items[0].answer_span is not None


def test_cli_generate_answer_then_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    chunks = tmp_path / "chunks.jsonl"
    write_chunks(chunks, _chunks())
    qa = tmp_path / "qa.jsonl"
    assert (
        main(
            [
                "qa",
                "generate",
                str(chunks),
                "--n",
                "3",
                "--llm",
                "offline",
                "--out",
                str(qa),
                "--qrels",
                str(tmp_path / "qrels.jsonl"),
                "--min-chars",
                "50",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["written"] == 3
    _, items = read_qa(qa)
    _, qrels = read_jsonl(tmp_path / "qrels.jsonl", kind="qrels")
    assert [q["relevant_chunk_ids"] for q in qrels] == [[it.chunk_id] for it in items]

    run = tmp_path / "run"
    args = [
        "qa",
        "answer",
        str(qa),
        "--retrievers",
        "closed,oracle",
        "--llm",
        "offline/extractive",
        "--out",
        str(run),
        "--json",
    ]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["new_rows"] == 6
    by = {r["retriever"]: r for r in first["summary"]}
    assert by["oracle"]["hit_rate"] == 1.0 and by["closed"]["hit_rate"] is None
    assert by["oracle"]["token_f1"] > by["closed"]["token_f1"]
    assert main(args) == 0  # resume: nothing recomputed
    assert json.loads(capsys.readouterr().out)["new_rows"] == 0
    _, answers = read_jsonl(run / "answers.jsonl", kind="qa_answers")
    assert len(answers) == 6 and {a["pipeline"] for a in answers} == {r["pipeline"] for r in first["summary"]}

    assert main(["judge", str(run), "--metrics", "exact", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["totals"]["exact"]["ok"] == 6
    assert set(summary["configs"]) == {r["pipeline"] for r in first["summary"]}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["qa", "generate", "/no/such.jsonl", "--llm", "offline", "--out", "x.jsonl"], "no such chunks file"),
        (["qa", "generate", "CHUNKS", "--llm", "offline", "--out", "x.jsonl", "--n", "0"], "--n must be"),
        (
            ["qa", "generate", "CHUNKS", "--llm", "offline", "--out", "x.jsonl", "--min-chars", "100000"],
            "no chunk has at least",
        ),
        (["qa", "answer", "/no/qa.jsonl", "--out", "r"], "QA file not found"),
    ],
)
def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    chunks = tmp_path / "chunks.jsonl"
    write_chunks(chunks, _chunks())
    args = [str(chunks) if a == "CHUNKS" else a for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_offline_references_are_sentences_an_extractive_reader_can_match(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 28 (6): one-word references made exact match 0 for every pipeline, the oracle included."""
    from ragrade.judge.lexical import exact_match, token_f1
    from ragrade.llm.base import GenerationRequest
    from ragrade.llm.offline import OfflineExtractive

    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    items, _ = generate_qa(_chunks(), None, QAGenConfig(n=3, seed=7, min_chunk_chars=50))
    reader = OfflineExtractive("extractive", cache=False, semantic=False)  # lexical: no model to load
    for it in items:
        assert len(it.reference.split()) >= 6 and it.reference.endswith(".")
        term = str(it.metadata["answer_term"])
        assert term in it.reference and term not in it.question
        oracle = reader.answer(GenerationRequest(question=it.question, passages=(it.reference_context,)))
        closed = reader.answer(GenerationRequest(question=it.question))
        assert exact_match(oracle, it.reference) == 1, (it.question, oracle)
        assert token_f1(closed, it.reference) < 0.3
