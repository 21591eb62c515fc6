from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.typed import dig

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks, write_documents
from ragrade.corpus.types import Chunk, Document
from ragrade.exam.files import read_exam, write_exam
from ragrade.exam.offline import OFFLINE_EXAM_NOTE


@pytest.fixture
def chunks_file(tmp_path: Path, synth_chunks: list[Chunk], hash_embedder: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    import ragrade.embedding.embed as embed

    monkeypatch.setattr(embed, "default_embedder", lambda: hash_embedder)
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, synth_chunks)
    return path


def test_generate_and_stats(chunks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "exam.jsonl"
    rc = main(
        [
            "exam",
            "generate",
            str(chunks_file),
            "--n",
            "24",
            "--llm",
            "offline",
            "--out",
            str(out),
            "--seed",
            "5",
            "--topic-field",
            "topic",
        ]
    )
    assert rc == 0
    captured = capsys.readouterr()
    text = captured.out
    assert "wrote 24 questions" in text and "funnel: generated" in text and "longest-answer baseline" in text
    assert captured.err.count(f"note: {OFFLINE_EXAM_NOTE}") == 1 and OFFLINE_EXAM_NOTE not in text
    header, questions = read_exam(out)
    assert len(questions) == 24 and header is not None
    assert dig(header.meta, "config", "topic_field") == "topic"
    topics = [q.tags["topic"] for q in questions]
    assert max(topics.count(t) for t in set(topics)) - min(topics.count(t) for t in set(topics)) <= 3  # stratified
    assert (tmp_path / "exam.funnel.json").exists() and (tmp_path / "exam.rejected.jsonl").exists()

    assert main(["exam", "stats", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["analytics"]["questions"] == 24
    assert data["funnel"]["kept"] == 24 and data["funnel"]["kind"] == "exam_funnel"
    assert sum(data["analytics"]["answer_letters"]["counts"].values()) == 24

    assert main(["exam", "stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert "answer letters: A 6 (25.0%)" in text and "near_duplicate" in text


def test_generate_json_output_and_filter_options(
    chunks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "e.jsonl"
    rc = main(
        [
            "exam",
            "generate",
            str(chunks_file),
            "-n",
            "10",
            "--out",
            str(out),
            "--json",
            "--filter-share",
            "0.1",
            "--dup-cosine",
            "0.99",
            "--shuffle",
            "random",
        ]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    stages = {s["stage"]: s for s in data["funnel"]["stages"]}
    assert stages["intra_candidate"]["filter"]["share"] == 0.1
    assert stages["near_duplicate"]["filter"]["thresholds"] == {"cosine": 0.99}


def test_stats_reads_header_funnel_without_sidecar(
    chunks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "e.jsonl"
    assert main(["exam", "generate", str(chunks_file), "-n", "8", "--out", str(out)]) == 0
    (tmp_path / "e.funnel.json").unlink()
    capsys.readouterr()
    assert main(["exam", "stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["funnel"]["kept"] == 8


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--llm", "offline/student"], "cannot write questions"),
        (["--shuffle", "sideways"], "shuffle"),
        (["--n", "0"], "n"),
        (["--prompt", "/nonexistent/prompt.txt", "--llm", "openai/x", "--base-url", "http://127.0.0.1:9"], "prompt"),
    ],
)
def test_generate_bad_options_exit_2(
    chunks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc = main(["exam", "generate", str(chunks_file), "--out", str(tmp_path / "x.jsonl"), *args])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ragrade: error:") and "\n" not in err and message in err
    assert "Traceback" not in err


def test_generate_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs.jsonl"
    write_documents(docs, [Document(id="d1", text="x" * 300, source="a.md")])
    for path, message in ((tmp_path / "missing.jsonl", "no such"), (docs, "not chunks")):
        rc = main(["exam", "generate", str(path), "--out", str(tmp_path / "x.jsonl")])
        assert rc == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("ragrade: error:") and message in err and "\n" not in err


def test_stats_bad_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1", "question": "x?"}\n')
    for path in (tmp_path / "missing.jsonl", bad):
        assert main(["exam", "stats", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("ragrade: error:") and "\n" not in err


def test_take_of_offline_exam_prints_the_note(
    chunks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exam.jsonl"
    assert main(["exam", "generate", str(chunks_file), "--n", "6", "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["analytics"]["questions"] == 6  # stdout stays JSON; the note is on stderr
    assert OFFLINE_EXAM_NOTE in captured.err
    argv = ["--retrievers", "closed", "--llm", "offline/student", "--icl", "0"]
    assert main(["exam", "take", str(out), *argv, "--out", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert captured.err.count(f"note: {OFFLINE_EXAM_NOTE}") == 1 and "offline/student" in captured.out
    # an exam whose header names another generator: no note
    header, questions = read_exam(out)
    assert header is not None
    other = tmp_path / "llm_exam.jsonl"
    write_exam(other, questions, meta={**header.meta, "generator": {"name": "openai/some-model"}})
    assert main(["exam", "take", str(other), *argv, "--out", str(tmp_path / "run2")]) == 0
    assert OFFLINE_EXAM_NOTE not in capsys.readouterr().err
