"""An exam knows its corpus: `exam generate` records the fingerprint of the chunks it was written from, and a
grid run (`exam take`, `--adaptive`, `qa answer`) against an index of other documents says so in one line with
the share of the source passages the index holds; an oracle that would hand passages the index lacks is refused
before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.exam.exam_helpers import HashEmbedder, synthetic_chunks
from tests.run.fakes import make_exam

from ragrade.cli.main import main
from ragrade.corpus.types import Chunk
from ragrade.exam.config import ExamConfig
from ragrade.exam.corpus import CORPUS_KEY, corpus_fingerprint, held_share
from ragrade.exam.files import Question, read_exam, write_exam
from ragrade.exam.generate import generate_exam_full, write_exam_result
from ragrade.qa.files import QAItem, write_qa
from ragrade.run.manifest import read_manifest

LL = "py/tests.run.fakes:make_llm"
N = 24


def _chunks_of(questions: list[Question]) -> list[Chunk]:
    """Corpus A: the exam's own source passages, one chunk each."""
    return [
        Chunk(id=q.chunk_id, doc_id=q.doc_id, text=q.context, start=0, end=len(q.context), strategy="whole")
        for q in questions
    ]


def _other_corpus(keep: list[Chunk]) -> list[Chunk]:
    """Corpus B: other documents, plus the chunks ``keep`` of corpus A (whole documents)."""
    other = [
        Chunk(id=f"b{i}", doc_id=f"docb{i}", text=f"Unrelated page {i} about ferries and tide tables.", start=0,
              end=48, strategy="whole")
        for i in range(30)
    ]  # fmt: skip
    return [*other, *keep]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from ragrade.retrieval.index import IndexConfig, build_index

    root = tmp_path_factory.mktemp("corpus")
    old = root / "old.jsonl"
    questions = make_exam(old, N)  # no fingerprint: an exam written before ragrade recorded one
    chunks_a = _chunks_of(questions)
    exam = root / "exam.jsonl"
    write_exam(exam, questions, meta={CORPUS_KEY: corpus_fingerprint(chunks_a)})
    build_index(chunks_a, root / "a", IndexConfig(dense=False))
    d0 = [c for c in chunks_a if c.doc_id == "d0"]  # one whole document of A: 4 of the 24 passages
    build_index(_other_corpus(d0), root / "b", IndexConfig(dense=False))
    return {"exam": exam, "old": old, "a": root / "a", "b": root / "b"}


def _take(exam: Path, index: Path, out: Path, retrievers: str, *extra: str) -> list[str]:
    return [
        "exam", "take", str(exam), "--out", str(out), "--index", f"idx={index}", "--llm", LL,
        "--retrievers", retrievers, "--k", "1", *extra,
    ]  # fmt: skip


def test_exam_generate_records_the_fingerprint_of_its_chunks(tmp_path: Path) -> None:
    chunks = synthetic_chunks(12)
    result = generate_exam_full(chunks, None, ExamConfig(n=4, seed=1), embedder=HashEmbedder())
    assert result.corpus == corpus_fingerprint(chunks)
    assert result.corpus["version"] == 1 and result.corpus["chunks"] == len(chunks) == 24
    assert result.corpus["documents"] == 12
    path = tmp_path / "exam.jsonl"
    write_exam_result(path, result, ExamConfig(n=4, seed=1))
    header, _ = read_exam(path)
    assert header is not None and header.meta[CORPUS_KEY] == result.corpus


def test_fingerprint_is_by_content_not_order() -> None:
    chunks = synthetic_chunks(5)
    fp = corpus_fingerprint(chunks)
    assert corpus_fingerprint(list(reversed(chunks))) == fp
    edited = [chunks[0].__class__(**{**chunks[0].__dict__, "text": chunks[0].text + "!"}), *chunks[1:]]
    assert corpus_fingerprint(edited)["digest"] != fp["digest"]


def test_held_share_counts_passages_by_id_and_text_and_by_document() -> None:
    a = [Chunk(id=f"c{i}", doc_id=f"d{i}", text=f"text {i}", start=0, end=6, strategy="whole") for i in range(4)]

    class Q:
        def __init__(self, cid: str, did: str, ctx: str) -> None:
            self.chunk_id, self.doc_id, self.context = cid, did, ctx

    same = [Q(c.id, c.doc_id, c.text) for c in a]
    assert held_share(same, a).complete
    rechunked = [Chunk(id=f"x{i}", doc_id=f"d{i}", text="other cut", start=0, end=9, strategy="s") for i in range(4)]
    assert held_share(same, rechunked).complete  # chunked otherwise: the same documents
    collide = [Chunk(id=c.id, doc_id=c.doc_id, text="another corpus's text", start=0, end=5, strategy="w") for c in a]
    share = held_share(same, collide)  # the same ids, other texts: not the passages
    assert (share.held, share.of, share.missing_questions, share.percent()) == (0, 4, 4, "0%")
    assert held_share([Q("", "", "a hand-written passage")], a).of == 0  # names no source: nothing to look for
    twice = [*same, Q("c0", "d0", "text 0")]  # one passage serving two questions is counted once
    share = held_share(twice, a[:1])
    assert (share.held, share.of, share.missing_questions, share.percent()) == (1, 4, 3, "25%")


def test_exam_from_corpus_a_against_index_of_b_says_so_with_the_share(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_take(corpora["exam"], corpora["b"], out, "closed,bm25")) == 0
    err = capsys.readouterr().err
    digest = str(corpus_fingerprint(_chunks_of(read_exam(corpora["exam"])[1]))["digest"])
    lines = [x for x in err.splitlines() if "source passages" in x]
    assert len(lines) == 1, err
    assert lines[0] == (
        f"ragrade: warning: exam exam.jsonl was written from corpus {digest[:8]}… ({N} chunks); index idx holds "
        f"16% of its {N} source passages: retrieval scores are not about this exam's documents"
    )
    entry = read_manifest(out)["input_corpus"]
    assert entry["indexes"]["idx"]["held"] == 4 and entry["indexes"]["idx"]["of"] == N
    assert entry["fingerprint"]["digest"] == digest


def test_an_old_exam_is_checked_by_its_ids(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_take(corpora["old"], corpora["b"], tmp_path / "run", "bm25")) == 0
    err = capsys.readouterr().err
    assert f"exam old.jsonl records no corpus fingerprint (written before ragrade recorded one); index idx holds 16% " \
        f"of its {N} source passages" in err  # fmt: skip
    assert main(_take(corpora["old"], corpora["a"], tmp_path / "same", "bm25")) == 0
    assert "source passages" not in capsys.readouterr().err  # every passage held: nothing more is said


def test_the_same_corpus_says_nothing(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_take(corpora["exam"], corpora["a"], out, "closed,bm25,oracle")) == 0
    assert "source passages" not in capsys.readouterr().err
    entry = read_manifest(out)["input_corpus"]
    assert entry["indexes"]["idx"]["held"] == N and "warning" not in entry


def test_an_oracle_that_cannot_hand_the_gold_passage_is_refused_before_anything_is_written(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_take(corpora["exam"], corpora["b"], out, "bm25,oracle")) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"would hand {N - 4} of {N} questions a gold passage that index idx does not hold" in err
    assert "--retrievers" in err
    assert not out.exists()
    assert main(_take(corpora["exam"], corpora["b"], out, "bm25,oracle", "--adaptive", "--budget", "40")) == 2
    assert not out.exists()


def test_adaptive_run_says_so_too(corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(_take(corpora["exam"], corpora["b"], out, "closed,bm25", "--adaptive", "--budget", "40")) == 0
    err = capsys.readouterr().err
    assert sum("holds 16% of its 24 source passages" in x for x in err.splitlines()) == 1, err
    assert read_manifest(out)["input_corpus"]["indexes"]["idx"]["held"] == 4


def test_qa_answer_checks_its_gold_passages(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = read_exam(corpora["exam"])
    items = [
        QAItem(id=q.id, question=q.question, reference=q.choices[q.answer], reference_context=q.context,
               chunk_id=q.chunk_id, doc_id=q.doc_id)
        for q in questions
    ]  # fmt: skip
    qa = tmp_path / "qa.jsonl"
    write_qa(qa, items, meta={CORPUS_KEY: corpus_fingerprint(_chunks_of(questions))})
    args = ["qa", "answer", str(qa), "--index", f"idx={corpora['b']}", "--llm", "offline/extractive", "--k", "1"]
    assert main([*args, "--retrievers", "bm25", "--out", str(tmp_path / "r"), "--json"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # the JSON on stdout stays clean; the line is on stderr
    assert "QA file qa.jsonl was written from corpus" in captured.err and "holds 16% of its 24" in captured.err
    assert main([*args, "--retrievers", "bm25,oracle", "--out", str(tmp_path / "o")]) == 2
    assert "would hand 20 of 24 questions" in capsys.readouterr().err and not (tmp_path / "o").exists()
