"""Offline cloze stems on documentation pages stand on their own; a too-easy exam is named after `exam take`."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.exam.doc_pages import ADMONITION, FOOTER, doc_chunks

from ragrade.cli.sweep import _offline_exam_note, easy_exam_warning
from ragrade.corpus.types import Chunk
from ragrade.exam.analytics import exam_analytics, format_analytics
from ragrade.exam.config import ExamConfig
from ragrade.exam.files import write_exam
from ragrade.exam.generate import generate_exam_full
from ragrade.exam.offline import BLANK, STEM_RULES, ClozeGenerator, boilerplate_sentences, extract_terms
from ragrade.exam.writers import GENERATION_REASONS

_REFERS = re.compile(r"the following|this example|as shown below|below:", re.IGNORECASE)


def _chunk(cid: str, doc: str, text: str) -> Chunk:
    return Chunk(id=cid, doc_id=doc, text=text, start=0, end=len(text), strategy="test")


def test_the_pages_hold_every_trap(hash_embedder: Any) -> None:
    """Each rule has usable blanks to set aside on the fixture (so the exam test below tests something)."""
    chunks = doc_chunks()
    gen = ClozeGenerator(chunks, hash_embedder)
    found: Counter[str] = Counter()
    for c in chunks:
        for t in extract_terms(c.text):
            found[gen.stem_rule(c.text, t) or "ok"] += 1
    assert all(found[r] >= 6 for r in STEM_RULES), found  # one per page at least
    assert found["ok"] >= 30


def test_doc_exam_stems_stand_on_their_own(hash_embedder: Any) -> None:
    chunks = doc_chunks()
    questions = 0
    for seed in range(3):
        cfg = ExamConfig(n=100, seed=seed, min_chunk_chars=0)
        res = generate_exam_full(chunks, None, cfg, embedder=hash_embedder)
        assert len(res.questions) >= 8
        for q in res.questions:
            stem = q.question.split("? ", 1)[1]
            answer = q.choices[q.answer]
            assert not stem.rstrip().endswith(":"), stem
            assert not _REFERS.search(stem), stem
            assert not re.search(rf"#{re.escape(BLANK)}|#\d", stem.replace(BLANK, answer)), stem  # no #1234 asked
            assert f"#{answer}" not in q.context and not re.fullmatch(r"#?\d{4}", answer), answer
            assert "/" not in answer and not answer.endswith((".md", ".org")), answer
            assert "Docs Team" not in stem and "Support for Python" not in stem, stem
            assert FOOTER not in stem.replace(BLANK, answer) and ADMONITION not in stem.replace(BLANK, answer)
        funnel = res.funnel
        rules = funnel["stem_rules"]
        assert set(rules) == set(STEM_RULES) and all(n > 0 for n in rules.values()), rules
        # the funnel still adds up; chunks whose every blank broke a rule fail with that rule as the reason
        assert funnel["generated"] == funnel["kept"] + funnel["removed"]
        gen_reasons = {k.partition(":")[2] for k in funnel["reasons"] if k.startswith("generation:")}
        assert gen_reasons and gen_reasons <= set(GENERATION_REASONS)
        assert gen_reasons & set(STEM_RULES)
        for rec in res.rejected:
            if str(rec["reason"]).partition(":")[2] in STEM_RULES:
                assert str(rec["detail"]).startswith("every candidate blank was set aside (")
        text = format_analytics(exam_analytics(res.questions), funnel)
        assert "offline stem rules set aside these candidate blanks" in text and "ends_with_colon" in text
        questions += len(res.questions)
    assert questions >= 30


def test_sentence_rules_hand_worked(hash_embedder: Any) -> None:
    cases = {
        "To configure `worker_pool` for the Kestrel scheduler, set the following:": "ends_with_colon",
        "The `worker_pool` option of the Kestrel scheduler is set like this::": "ends_with_colon",
        "The default of `worker_pool` is shown in this example for every Kestrel node.": "refers_to_example",
        "Set `worker_pool` as shown below before the Kestrel scheduler starts.": "refers_to_example",
        "Set the following options before `worker_pool` starts the Kestrel scheduler.": "refers_to_example",
        # the referent is in the sentence: a list after the colon
        "Kestrel reads the following brokers from `worker_pool`: Redis, RabbitMQ and SQS.": None,
        "The Kestrel scheduler reads `worker_pool` once at startup and never again.": None,
    }
    gen = ClozeGenerator([], hash_embedder)
    for sentence, want in cases.items():
        terms = [t for t in extract_terms(sentence) if t.text == "worker_pool"]
        assert terms, sentence
        assert gen.stem_rule(sentence, terms[0]) == want, sentence


def test_answer_rules_hand_worked(hash_embedder: Any) -> None:
    cases = [
        ("The retry bug was fixed in pydantic/pydantic#4821 by the core team.", "4821", "issue_reference"),
        ("See #1234 for the long discussion of the retry policy in Kestrel.", "1234", "issue_reference"),
        ("The crash on empty input was fixed in the Kestrel parser (5170).", "5170", "issue_reference"),
        ("The scheduler design follows earlier work [12] by Leslie Lamport.", "12", "issue_reference"),
        ("The regression was tracked as issue 6043 and fixed by Grace Hopper.", "6043", "issue_reference"),
        ("Read `notes/pool.md` before changing how the Kestrel scheduler runs.", "notes/pool.md", "link_or_path"),
        ("Kestrel release notes are published on kestrel.example.org monthly.", "kestrel.example.org", "link_or_path"),
        ("The source of Kestrel lives at github.com/kestrel/Kestrel for everyone.", "github.com", "link_or_path"),
        # facts, not references
        ("The Kestrel scheduler handles 1234 tasks per node on Redis by default.", "1234", None),
        ("Kestrel 2.4 fixed 3 crashes and closed 12 idle connections on Redis.", "12", None),
    ]  # fmt: skip
    gen = ClozeGenerator([], hash_embedder)
    for sentence, term, want in cases:
        terms = [t for t in extract_terms(sentence) if t.text == term]
        assert terms, (sentence, [t.text for t in extract_terms(sentence)])
        assert gen.stem_rule(sentence, terms[0]) == want, sentence


def test_boilerplate_needs_three_documents(hash_embedder: Any) -> None:
    footer = "This page is maintained by the Kestrel Docs Team since March 2024."
    variant = "this page is *maintained* by the Kestrel Docs Team since March 2024"  # case, markup, punctuation
    three = [
        _chunk(f"c{i}", f"d{i}", f"Page {i} body text here.\n\n{t}") for i, t in enumerate([footer] * 2 + [variant])
    ]
    assert len(boilerplate_sentences(three)) == 1
    assert boilerplate_sentences(three[:2]) == frozenset()  # two pages: not yet a template
    same_doc = [_chunk(f"c{i}", "d0", f"Part {i}.\n\n{footer}") for i in range(5)]  # one page's chunks
    assert boilerplate_sentences(same_doc) == frozenset()
    gen = ClozeGenerator(three, hash_embedder)
    t = next(t for t in extract_terms(three[0].text) if t.text == "March 2024")
    assert gen.stem_rule(three[0].text, t) == "boilerplate"


def test_a_chunk_with_only_set_aside_blanks_fails_with_the_rule(hash_embedder: Any) -> None:
    text = "To configure `worker_pool` and `queue_depth` on Kestrel nodes, set the following:\n\n```toml\nx = 1\n```"
    target = _chunk("t", "t", text)
    filler = [
        _chunk(f"f{i}", f"f{i}", f"The `option_{i}` setting of Ada Lovelace limits port {8000 + i} in May {2000 + i}.")
        for i in range(8)
    ]
    gen = ClozeGenerator([target, *filler], hash_embedder)
    raw = gen.generate(target)
    assert (
        raw["failure"] == "ends_with_colon" and "ends_with_colon 3" in raw["detail"]
    )  # worker_pool, queue_depth, Kestrel
    assert gen.set_aside_counts() == {"ends_with_colon": 3}


def _summary(rows: list[tuple[str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"pipeline": f"retriever={r}|k={k}", "retriever": r, "accuracy": a} for r, k, a in rows])


def test_easy_exam_warning() -> None:
    easy = _summary([("closed", "0", 0.3), ("bm25", "3", 0.995), ("dense", "3", 0.8), ("oracle", "1", 0.97)])
    line = easy_exam_warning(easy, offline=True)
    assert line is not None and "\n" not in line
    assert "too easy to rank retrievers" in line and "retriever=bm25|k=3 answers 99.5%" in line
    assert "oracle 97.0%" in line and "copy their source sentence" in line
    assert "--llm" in line and "stem_window" in line
    other = easy_exam_warning(easy, offline=False)
    assert other is not None and "too easy to rank retrievers" in other and "stem_window" not in other
    # below the oracle, below 95%, or only the oracle / closed book high: no warning
    assert easy_exam_warning(_summary([("bm25", "3", 0.96), ("oracle", "1", 0.99)]), offline=True) is None
    assert easy_exam_warning(_summary([("bm25", "3", 0.94), ("oracle", "1", 0.9)]), offline=True) is None
    assert easy_exam_warning(_summary([("closed", "0", 0.99), ("oracle", "1", 1.0)]), offline=True) is None
    assert easy_exam_warning(_summary([("bm25", "3", 0.95), ("oracle", "1", 0.95)]), offline=True) is not None
    # no oracle in the grid: the threshold alone; a pipeline that answered nothing is no evidence
    assert easy_exam_warning(_summary([("hybrid", "5", 0.97)]), offline=True) is not None
    assert easy_exam_warning(_summary([("hybrid", "5", float("nan"))]), offline=True) is None
    assert easy_exam_warning(pd.DataFrame(), offline=True) is None


def test_take_note_and_warning_on_stderr(
    tmp_path: Path, synth_chunks: list[Chunk], hash_embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    res = generate_exam_full(synth_chunks, None, ExamConfig(n=4), embedder=hash_embedder)
    exam = tmp_path / "exam.jsonl"
    write_exam(exam, res.questions, meta={"generator": res.generator})
    _offline_exam_note(exam, _summary([("bm25", "3", 0.995), ("oracle", "1", 0.99)]))
    err = capsys.readouterr().err
    assert err.count("note: ") == 1 and err.count("ragrade: warning: the exam is too easy") == 1
    _offline_exam_note(exam, _summary([("bm25", "3", 0.7), ("oracle", "1", 0.99)]))
    assert "warning" not in capsys.readouterr().err
