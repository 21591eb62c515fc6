"""Placeholder text (lorem ipsum) is never an exam or QA item: not a stem, not a reference, not a distractor."""

from __future__ import annotations

from typing import Any

import pytest

from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig
from ragrade.exam.generate import generate_exam_full
from ragrade.exam.offline import ClozeGenerator
from ragrade.exam.placeholder import is_placeholder
from ragrade.io import JSONValue
from ragrade.qa.generate import QAGenConfig, extractive_question, generate_qa

_FILLER = (
    "Lorem ipsum dolor sit amet, ({n}) consectetur adipiscing elit, sed do eiusmod tempor incididunt.",
    "Nam quis purus {n} varius luctus, sed pretium tellus tempor vitae lacinia.",
    "Curabitur {n} nunc eget tellus tempor, Pellentesque habitant morbi tristique senectus.",
)
_FACTS = (
    "The Osprey scheduler was written by Margaret Hamilton in March 2011 and runs {n} jobs per host.",
    "Version {n}.2 of Osprey moved the job store from SQLite to Postgres for every cluster.",
)


def _chunks() -> list[Chunk]:
    out = []
    for i in range(12):
        lines = [f.format(n=i + 200) for f in _FILLER] + [f.format(n=10 * i + 7) for f in _FACTS]
        text = " ".join(lines)
        out.append(Chunk(id=f"c{i}", doc_id=f"d{i}", text=text, start=0, end=len(text), strategy="test"))
    return out


@pytest.mark.parametrize(
    ("sentence", "filler"),
    [
        ("Lorem ipsum dolor sit amet, (5) consectetur adipiscing elit.", True),
        ("Nam what purus non varius luctus?", True),
        ("Aenean 3 tellus, vitae pretium augue sagittis sed.", True),
        ("The worker pool handles 16 tasks per node.", False),
        ("Set the integer value of magna via the data field in 2024.", False),
        ("Per the status quo, the ad hoc fix stays.", False),
    ],
)
def test_is_placeholder(sentence: str, filler: bool) -> None:
    assert is_placeholder(sentence) is filler


def test_offline_exam_never_quotes_filler(hash_embedder: Any) -> None:
    chunks = _chunks()
    res = generate_exam_full(chunks, None, ExamConfig(n=50, seed=3, min_chunk_chars=0), embedder=hash_embedder)
    assert len(res.questions) >= 6
    for q in res.questions:
        stem = q.question.split("? ", 1)[1]
        assert not is_placeholder(stem.replace("____", q.choices[q.answer])), stem
        assert "ipsum" not in stem and "purus" not in stem and "tellus" not in stem
    assert res.funnel["stem_rules"].get("placeholder", 0) >= 12  # set aside, and said so


def test_filler_numbers_are_no_distractors(hash_embedder: Any) -> None:
    gen = ClozeGenerator(_chunks(), hash_embedder)
    filler_numbers = {str(i + 200) for i in range(12)}
    assert not filler_numbers & {e.text for e in gen.pool.get("number", [])}


def test_offline_qa_never_asks_about_filler() -> None:
    for seed in range(20):
        for chunk in _chunks():
            got = extractive_question(chunk, seed)
            assert got is not None
            assert not is_placeholder(got[0]), got[0]
    items, _ = generate_qa(_chunks(), None, QAGenConfig(n=8, seed=1, min_chunk_chars=0))
    assert items and all(not is_placeholder(i.question) and not is_placeholder(i.reference) for i in items)


def _section_chunks() -> list[Chunk]:
    out = []
    for i in range(12):
        text = (
            f"## Version {i}.0\n\nThe release of Osprey moved {10 * i + 7} queues from SQLite to Postgres in March "
            f"{2000 + i}.\n\n## Version {i}.1\n\nThe patch release of Osprey fixed {20 * i + 9} crashes reported "
            f"by Margaret Hamilton in May {2000 + i}."
        )
        meta: dict[str, JSONValue] = {"title": "Changelog", "heading_path": ["Changelog", f"Version {i}.0"]}
        out.append(Chunk(id=f"s{i}", doc_id="changes", text=text, start=0, end=len(text), strategy="t", metadata=meta))
    return out


def test_stems_name_the_section_and_the_page(hash_embedder: Any) -> None:
    chunks = _section_chunks()
    res = generate_exam_full(chunks, None, ExamConfig(n=50, seed=2, min_chunk_chars=0), embedder=hash_embedder)
    assert len(res.questions) >= 6
    by_id = {c.id: c for c in chunks}
    for q in res.questions:
        lead, stem = q.question.split("? ", 1)
        section = "1" if "patch release" in stem else "0"
        i = by_id[q.chunk_id].id[1:]
        assert lead.startswith(f"About Version {i}.{section} (Changelog), which "), q.question


def test_qa_never_samples_a_chunk_of_filler() -> None:
    from ragrade.qa.generate import Funnel, sample_chunks

    filler = " ".join(f.format(n=300) for f in _FILLER)
    chunks = [*_chunks(), Chunk(id="lorem", doc_id="theme", text=filler, start=0, end=len(filler), strategy="t")]
    funnel = Funnel(requested=5)
    picked = sample_chunks(chunks, QAGenConfig(n=5, min_chunk_chars=0), funnel)
    assert "lorem" not in {c.id for c in picked} and funnel.placeholder_chunks == 1
    assert funnel.chunks_eligible == 12  # the chunks mixing filler and facts stay (their facts can be asked)
    funnel.accepted = 0
    assert "(1 placeholder text)" in str(funnel.shortfall())


def test_exam_never_asks_a_chunk_of_filler(hash_embedder: Any) -> None:
    from ragrade.exam.funnel import shortfall_line

    filler = " ".join(f.format(n=300) for f in _FILLER)
    chunks = [*_chunks(), Chunk(id="lorem", doc_id="theme", text=filler, start=0, end=len(filler), strategy="t")]
    res = generate_exam_full(chunks, None, ExamConfig(n=50, seed=3, min_chunk_chars=0), embedder=hash_embedder)
    assert "lorem" not in {q.chunk_id for q in res.questions}
    assert res.funnel["chunks"]["placeholder"] == 1 and res.funnel["chunks"]["eligible"] == 12
    assert "1 chunks of placeholder text (lorem ipsum)" in str(shortfall_line(res.funnel))
