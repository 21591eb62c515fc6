"""Short cloze stems (a window of words around the blank, a chosen subject) and key-term extraction edge cases."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from ragrade.corpus.types import Chunk
from ragrade.errors import ConfigError
from ragrade.exam.config import ExamConfig
from ragrade.exam.generate import generate_exam_full
from ragrade.exam.offline import ClozeGenerator, extract_terms, stem_context


def _occurs(term: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(term)}(?![\w])", text, re.IGNORECASE) is not None


def _words(text: str) -> int:
    return len([w for w in text.split() if re.search(r"\w", w)])


def test_stem_context_hand_worked() -> None:
    before, after = "The quick brown fox jumps over the lazy ", " dog and then runs far away."
    assert stem_context(before, after, 3) == ("... over the lazy ", " dog and then ...")
    assert stem_context(before, after, 20) == (before, after)  # short enough: unchanged, no ellipsis
    # a dash is not a word: it is kept inside the window but not counted
    assert stem_context("x y b - c ", "", 2) == ("... b - c ", "")
    # a cut after a comma or semicolon drops it before the ellipsis
    assert stem_context("", " one, two; three four", 2) == ("", " one, two ...")
    assert stem_context("", " one two", 2) == ("", " one two")


def _exam(chunks: list[Chunk], embedder: Any, **options: Any) -> list[Any]:
    return generate_exam_full(chunks, None, ExamConfig(n=30, seed=3, **options), embedder=embedder).questions


def test_window_and_topic_subject(synth_chunks: list[Chunk], hash_embedder: Any) -> None:
    full = {q.chunk_id: q for q in _exam(synth_chunks, hash_embedder)}
    short = _exam(synth_chunks, hash_embedder, stem_window=4, stem_subject="topic")
    assert len(short) == 30
    shortened = 0
    for q in short:
        lead, stem = q.question.split("? ", 1)
        before, after = stem.split("____")
        assert lead.startswith(f"About {q.tags['topic']}, which ")
        assert _words(before) <= 4 and _words(after) <= 4, q.question
        assert q.generator["stem_window"] == 4 and q.generator["stem_subject"] == "topic"
        correct = q.choices[q.answer]
        assert _occurs(correct, q.context)
        for i, c in enumerate(q.choices):
            if i != q.answer:  # still exactly one candidate supported by the source
                assert not _occurs(c, q.context) and not _occurs(c, q.question)
        if q.chunk_id in full and full[q.chunk_id].choices[full[q.chunk_id].answer] == correct:
            long_stem = full[q.chunk_id].question.split("? ", 1)[1]
            core = stem.replace("... ", "").replace(" ...", "")
            assert core.strip(" .") in long_stem  # the short stem is a window of the full sentence
            shortened += core != long_stem
    assert shortened >= 5
    # defaults: the title as subject and the whole sentence, no stem parameters recorded
    q0 = next(iter(full.values()))
    assert q0.question.startswith("About ") and " guide, which " in q0.question and "..." not in q0.question
    assert "stem_window" not in q0.generator


def test_short_stems_are_deterministic(synth_chunks: list[Chunk], hash_embedder: Any) -> None:
    a = _exam(synth_chunks, hash_embedder, stem_window=5, stem_subject="none")
    b = _exam(synth_chunks, hash_embedder, stem_window=5, stem_subject="none")
    assert [(q.id, q.question, q.choices, q.answer) for q in a] == [(q.id, q.question, q.choices, q.answer) for q in b]
    assert all(q.question.startswith("Which ") for q in a)


def test_stem_options_are_validated(synth_chunks: list[Chunk], hash_embedder: Any) -> None:
    with pytest.raises(ValidationError):
        ExamConfig(stem_window=0)
    with pytest.raises(ValidationError):
        ExamConfig(stem_subject="heading")
    with pytest.raises(ConfigError, match="at least 1 word"):
        ClozeGenerator(synth_chunks[:4], hash_embedder, stem_window=0)
    with pytest.raises(ConfigError, match="stem_subject"):
        ClozeGenerator(synth_chunks[:4], hash_embedder, stem_subject="heading")


def test_key_terms_skip_rst_gaps_urls_and_possessives() -> None:
    text = (
        "Pass ``distributions()`` or ``Distribution.discover()`` to narrow the scope of the search. "
        "The protocol is specified in http://www.robotstxt.org/norobots-rfc.txt for all crawlers. "
        "The Message's payload is written by the Generator class in one pass."
    )
    got = [t.text for t in extract_terms(text)]
    assert "distributions()" in got and "Distribution.discover()" in got
    assert not any(t.strip() != t or t.strip() in {"or", ""} for t in got)  # never the text between literals
    assert not any("rfc" in t or "robotstxt" in t for t in got)  # nothing inside a URL is asked
    assert "Message's" not in got and "Generator" in got
