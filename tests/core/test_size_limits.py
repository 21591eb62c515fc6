"""Stated size limits (issue 52, item 5): a question, a choice or a model spec past its limit is one line naming
the limit, before anything is written, and an error never echoes a huge input in full."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from tests.cli.test_failed_requests import _exam
from tests.retrieval.retrieval_data import fact_chunks

from ragrade.cli.main import main
from ragrade.exam.files import read_exam, write_exam
from ragrade.schemas import MAX_CHOICE_CHARS, MAX_QUESTION_CHARS, MAX_SPEC_CHARS, cut_long_words, quoted

pytestmark = pytest.mark.usefixtures("isolated_llm_env")


def _take(exam: Path, out: Path, llm: str = "offline/student") -> list[str]:
    return ["exam", "take", str(exam), "--out", str(out), "--llm", llm, "--retrievers", "closed"]


def _grow(tmp_path: Path, *, question: int = 0, choice: int = 0) -> Path:
    """The test exam with its third question (line 4 of the file) or first choice that many characters long."""
    _, qs = read_exam(_exam(tmp_path, 5))
    q = qs[2]
    if question:
        q = replace(q, question=("word " * question)[:question])
    if choice:
        q = replace(q, choices=[("v" * choice), *q.choices[1:]])
    path = tmp_path / "big.jsonl"
    write_exam(path, [*qs[:2], q, *qs[3:]])
    return path


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ({"question": MAX_QUESTION_CHARS + 1}, "'question' has 20,001 characters, more than the limit of 20,000: "),
        ({"question": 1_000_189}, "'question' has 1,000,189 characters, more than the limit of 20,000: 'word word"),
        ({"choice": MAX_CHOICE_CHARS + 1}, "'choices[0]' has 5,001 characters, more than the limit of 5,000: 'vvv"),
    ],
)
def test_a_question_past_its_limit_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], size: dict[str, int], message: str
) -> None:
    exam, out = _grow(tmp_path, **size), tmp_path / "run"
    assert main(_take(exam, out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{exam}:4: bad question record: {message}" in err, err[:500]
    assert len(err) < 400 and not out.exists()


def test_a_question_at_the_limit_is_taken(tmp_path: Path) -> None:
    exam = _grow(tmp_path, question=MAX_QUESTION_CHARS, choice=MAX_CHOICE_CHARS)
    assert main(_take(exam, tmp_path / "run")) == 0


@pytest.mark.parametrize("spec", ["openai/", "hf/", "offline/", "llamacpp/", ""])
def test_a_huge_llm_spec_is_one_short_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str) -> None:
    spec += "x" * 100_000
    assert main(_take(_exam(tmp_path, 3), tmp_path / "run", spec)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400, err[:500]  # it was 200-300 KB, the spec echoed 2-3 times
    if spec.startswith(("openai/", "hf/", "offline/", "llamacpp/")):
        assert f"the LLM spec has {len(spec):,} characters, more than the limit of {MAX_SPEC_CHARS:,}" in err


def test_a_long_path_as_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_take(_exam(tmp_path, 3), tmp_path / "run", "hf/" + "x" * 300)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "File name too long" in err and len(err) < 300


def test_ask_refuses_a_question_past_the_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragrade.retrieval.index import IndexConfig, build_index

    index = tmp_path / "index"
    build_index(fact_chunks(), index, IndexConfig(dense=False))
    assert main(["ask", str(index), "why " * 6_000, "-r", "bm25"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the question has 23,999 characters, more than the limit of 20,000" in err


def test_quoting_cuts_to_a_readable_length() -> None:
    assert quoted("short") == "'short'"
    assert quoted("y" * 1_000) == f"'{'y' * 77}'... (1,000 characters)"
    line = cut_long_words(f"unknown llm '{'z' * 5_000}'; valid: a, b")
    assert line == f"unknown llm '{'z' * 79}...(5,003 characters) valid: a, b"
