"""The offline cloze generator on (a subset of) the demo corpus: 200 questions, balanced letters, determinism."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragrade.corpus.types import Chunk
from ragrade.exam.analytics import exam_analytics
from ragrade.exam.config import ExamConfig
from ragrade.exam.files import Question
from ragrade.exam.generate import ExamResult, generate_exam_full, write_exam_result


@pytest.fixture(scope="session")
def demo_chunks() -> list[Chunk]:
    from ragrade.corpus.chunk import chunk_documents, create_chunker
    from ragrade.corpus.demo import build_demo_corpus

    return chunk_documents(build_demo_corpus(limit=300), create_chunker("recursive"))


@pytest.fixture(scope="session")
def demo_exams(
    demo_chunks: list[Chunk], hash_embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[ExamResult, Path]]:
    out: dict[str, tuple[ExamResult, Path]] = {}
    root = tmp_path_factory.mktemp("demo-exams")
    for name, seed in (("a", 7), ("a2", 7), ("b", 8)):
        cfg = ExamConfig(n=200, seed=seed)
        res = generate_exam_full(demo_chunks, None, cfg, embedder=hash_embedder)
        path = root / f"{name}.jsonl"
        write_exam_result(path, res, cfg, input_path="demo")
        out[name] = (res, path)
    return out


def _occurs(term: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text, re.IGNORECASE) is not None


def test_two_hundred_questions_with_balanced_letters(demo_exams: dict[str, Any]) -> None:
    res, _ = demo_exams["a"]
    assert len(res.questions) == 200
    stats = exam_analytics(res.questions)
    for letter, share in stats["answer_letters"]["shares"].items():
        assert 0.18 <= share <= 0.32, (letter, share)
    assert stats["baselines"]["fixed_letter"]["accuracy"] <= 0.32
    assert stats["baselines"]["longest_answer"]["accuracy"] <= 0.35  # similar-length distractors
    f = res.funnel
    assert f["generated"] == f["kept"] + sum(s["removed"] for s in f["stages"]) and f["kept"] == 200


def test_same_seed_is_byte_identical_and_another_seed_differs(demo_exams: dict[str, Any]) -> None:
    a, a2, b = (demo_exams[k][1] for k in ("a", "a2", "b"))
    assert a.read_bytes() == a2.read_bytes()
    assert a.with_name("a.funnel.json").read_bytes() == a2.with_name("a2.funnel.json").read_bytes()
    assert a.read_bytes() != b.read_bytes()
    ids_a = {q.id for q in demo_exams["a"][0].questions}
    ids_b = {q.id for q in demo_exams["b"][0].questions}
    assert ids_a != ids_b


def test_cloze_questions_are_well_formed(demo_exams: dict[str, Any]) -> None:
    res, _ = demo_exams["a"]
    for q in res.questions:
        assert q.question.count("____") == 1, q.question
        assert "passage" not in q.question.lower()
        correct = q.choices[q.answer]
        assert _occurs(correct, q.context), (correct, q.chunk_id)
        for i, c in enumerate(q.choices):
            if i != q.answer:
                assert not _occurs(c, q.context), (c, q.question)  # exactly one candidate is in the source
                assert not _occurs(c, q.question)
        assert len({c.casefold() for c in q.choices}) == 4
        assert q.generator["name"] == "offline/cloze" and q.generator["kind"] in {"date", "number", "name", "code"}
        assert q.tags["qword"] == "which"
        assert q.span is not None and q.span[1] - q.span[0] == len(q.context)
        assert q.chunk_id not in q.generator["distractor_chunks"]


def _student_accuracy(questions: list[Question], oracle: bool) -> float:
    from ragrade.llm import create_llm

    student = create_llm("offline/student", cache=False, semantic=False)
    right = 0
    for q in questions:
        scores = student.choice_scores(q.question, [q.context] if oracle else [], q.choices)  # type: ignore[attr-defined]
        right += int(np.argmax(scores)) == q.answer
    return right / len(questions)


def test_offline_student_closed_book_near_chance_and_oracle_well_above(demo_exams: dict[str, Any]) -> None:
    res, _ = demo_exams["a"]
    closed = _student_accuracy(res.questions, oracle=False)
    oracle = _student_accuracy(res.questions, oracle=True)
    assert 0.15 <= closed <= 0.35, closed
    assert oracle >= 0.6, oracle


def test_absurd_exam_uses_unrelated_distractors(demo_chunks: list[Chunk], hash_embedder: Any) -> None:
    cfg = ExamConfig(n=40, seed=7, absurd=True)
    res = generate_exam_full(demo_chunks[:400], None, cfg, embedder=hash_embedder)
    assert res.funnel["absurd"] is True and len(res.questions) == 40
    swapped = [q for q in res.questions if q.generator.get("absurd")]
    assert len(swapped) >= 36
    normal = generate_exam_full(
        demo_chunks[:400], None, cfg.model_copy(update={"absurd": False}), embedder=hash_embedder
    )
    by_id = {q.id: q for q in normal.questions}
    for q in swapped:
        assert q.id in by_id and q.choices[q.answer] == by_id[q.id].choices[by_id[q.id].answer]
        assert set(q.choices) != set(by_id[q.id].choices)
        for i, c in enumerate(q.choices):
            if i != q.answer:
                assert not _occurs(c, q.context)
