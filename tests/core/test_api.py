"""The Python API (:mod:`ragrade.api`): lazy export from ``import ragrade`` and the cheap verbs."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import ragrade
from ragrade.corpus.files import read_documents
from ragrade.errors import ConfigError, DataError, RagradeError
from ragrade.io import JSONObject

HEAVY = ("torch", "pandas", "numpy", "pyarrow", "pydantic", "typer", "onnxruntime", "ragrade.api")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nprint(__import__('json').dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


def test_import_ragrade_loads_no_heavy_module() -> None:
    assert _loaded_after("import ragrade") == []


def test_api_names_load_the_api_module_but_no_stage() -> None:
    loaded = _loaded_after("import ragrade\nragrade.take_exam\nragrade.open_run\nragrade.RunData")
    assert loaded == ["ragrade.api"]  # the stages (pandas, torch, ...) load when a function runs


def test_api_names_are_listed_and_unknown_names_fail() -> None:
    names = set(ragrade.__all__)
    assert {"load_corpus", "chunk", "build_index", "generate_exam", "take_exam", "fit_irt", "open_run"} <= names
    assert names <= set(dir(ragrade))
    assert ragrade.render_report is ragrade.api.render_report
    # a submodule named like an API function would replace it on the package once imported (ragrade.judge)
    submodules = {m.name for m in pkgutil.iter_modules(ragrade.__path__)}
    assert "judge" in submodules and not names & submodules
    api_modules = {m.name for m in pkgutil.iter_modules(ragrade.api.__path__)}
    assert "judge" in api_modules and not set(ragrade.api.__all__) & api_modules  # the same inside the API
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        ragrade.nonsense  # noqa: B018


def test_load_corpus_and_chunk_write_the_cli_files(tmp_path: Path) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.txt").write_text("Alpha beta gamma. " * 80, encoding="utf-8")
    (src / "b.md").write_text("# Title\n\nDelta epsilon zeta.\n", encoding="utf-8")
    (src / "c.bin").write_bytes(b"\x00\x01\x02" * 50)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        docs = ragrade.load_corpus(src, out=tmp_path / "docs.jsonl", min_chars=5)
    assert len(docs) == 2
    assert any("skipped 1 file" in str(w.message) and "c.bin" in str(w.message) for w in seen)
    assert [d.id for d in read_documents(tmp_path / "docs.jsonl")] == [d.id for d in docs]
    chunks = ragrade.chunk(tmp_path / "docs.jsonl", strategy="token", size=40, overlap=0, out=tmp_path / "c.jsonl")
    assert len(chunks) > 3 and all(c.doc_id in {d.id for d in docs} for c in chunks)
    header = json.loads((tmp_path / "c.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert "token" in json.dumps(header)


def test_bad_input_raises_ragrade_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not both"):
        ragrade.load_corpus(tmp_path, demo=True)
    with pytest.raises(ConfigError, match="invalid corpus settings"):
        ragrade.load_corpus(tmp_path, min_chars="many")
    with pytest.raises(DataError, match="no usable document"):
        ragrade.load_corpus(tmp_path)
    with pytest.raises(DataError, match="no such run directory"):
        ragrade.open_run(tmp_path / "missing")
    with pytest.raises(ConfigError, match="exam file not found"):
        ragrade.take_exam(tmp_path / "missing.jsonl", tmp_path / "run")
    with pytest.raises(ConfigError, match="nonsense: unknown key"):
        ragrade.run_job({"nonsense": 1}, tmp_path / "job")
    with pytest.raises(ConfigError, match="invalid sweep config"):
        ragrade.take_exam(Path(__file__), tmp_path / "run", retrievers="closed", k="three")
    with pytest.raises(ConfigError, match="out= is required"):
        ragrade.judge_answers(tmp_path / "answers.jsonl")


def test_judge_then_open_its_folder_as_dataframes(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    rows = [("1", "Paris", "Paris"), ("2", "five", "4"), ("3", "blue", "Blue")]
    answers.write_text(
        "".join(json.dumps({"id": i, "query": f"q{i}?", "answer": a, "reference": r}) + "\n" for i, a, r in rows),
        encoding="utf-8",
    )
    summary = ragrade.judge_answers(answers, tmp_path / "judged", metrics=["exact"])
    em = summary["configs"]["all"]["exact"]["statistics"][0]
    assert (em["statistic"], em["value"], em["n_used"]) == ("em", pytest.approx(2 / 3), 3)  # "Blue" = "blue"
    run = ragrade.open_run(tmp_path / "judged")
    assert run.tables() == ["judge_scores", "judge_summary"] and run.responses is None
    scores = run.judge_scores
    assert scores is not None and sorted(scores["id"]) == ["1", "2", "3"] and set(scores["metric"]) == {"exact"}
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match="not a run folder"):
        ragrade.open_run(tmp_path / "other")


def test_answer_qa_grid_then_judge_and_open_the_run(tmp_path: Path) -> None:
    from ragrade.qa.files import QAItem, write_qa

    facts = [("q1", "Who wrote Hamlet?", "Shakespeare"), ("q2", "What is 2+2?", "4"), ("q3", "Sky colour?", "blue")]
    items = [QAItem(i, q, a, f"{a}.", f"c{i}", f"d{i}") for i, q, a in facts]
    write_qa(tmp_path / "qa.jsonl", items)
    result = ragrade.answer_qa(
        tmp_path / "qa.jsonl", tmp_path / "run", llms="offline/extractive", retrievers="closed", max_tokens=[32, 64]
    )
    assert len(result.pipelines) == 2 and all("max_tokens=" in p for p in result.pipelines)  # a factor of the grid
    assert len(result.rows) == 6 and [s["n"] for s in result.summary] == [3, 3]
    ragrade.judge_answers(tmp_path / "run", metrics=["exact"])  # into run/judge
    run = ragrade.open_run(tmp_path / "run")
    assert run.tables() == ["answers", "judge_scores", "judge_summary"]
    assert run.answers is not None and run.judge_scores is not None
    assert len(run.answers) == 6 and len(run.judge_scores) == 6


def test_an_exam_with_no_survivor_writes_only_the_sidecars_and_says_why(tmp_path: Path) -> None:
    from ragrade.exam.config import ExamConfig
    from ragrade.exam.generate import ExamResult, write_exam_checked

    funnel = {"generated": 3, "kept": 0, "removed": 3, "reasons": {"generation:refused": 1, "parse:no_json": 1}}
    rejected: list[JSONObject] = [
        {"reason": "generation:refused"},
        {"reason": "parse:no_json"},
        {"reason": "filter:intra"},
    ]
    result = ExamResult([], funnel, rejected, {"kind": "test"})
    out = tmp_path / "exam.jsonl"
    with pytest.raises(DataError, match=r"3 candidates asked: 1 refused, 1 unparseable.*exam\.rejected\.jsonl"):
        write_exam_checked(out, result, ExamConfig(n=3))
    assert not out.exists() and (tmp_path / "exam.funnel.json").is_file()
    assert len((tmp_path / "exam.rejected.jsonl").read_text(encoding="utf-8").splitlines()) >= 3


def test_qa_answer_resumes_after_a_throughput_change_and_refuses_an_answer_change(tmp_path: Path) -> None:
    # issue 37.1: exam take resumed when only the concurrency changed, qa answer refused with a journal mismatch
    from ragrade.qa.files import QAItem, write_qa

    items = [QAItem(f"q{i}", f"Question {i}?", "blue", "It is blue.", f"c{i}", f"d{i}") for i in range(3)]
    write_qa(tmp_path / "qa.jsonl", items)
    qa, run = tmp_path / "qa.jsonl", tmp_path / "run"
    first = ragrade.answer_qa(qa, run, llms="offline/extractive", retrievers="closed", llm_options={"concurrency": 2})
    faster = {"concurrency": 3, "timeout": 7, "max_retries": 1}
    again = ragrade.answer_qa(qa, run, llms="offline/extractive", retrievers="closed", llm_options=faster)
    assert len(again.rows) == len(first.rows) == 3
    with pytest.raises(RagradeError, match="other inputs or settings"):  # a change that changes answers
        ragrade.answer_qa(qa, run, llms="offline/extractive", retrievers="closed", max_tokens=64)


def test_an_offline_exam_carries_its_note_through_generate_and_take(tmp_path: Path) -> None:
    # issue 37: the note was read from the exam's header by the command line; the API's results carry it now
    from tests.exam.exam_helpers import synthetic_chunks

    from ragrade.exam.files import read_exam, write_exam
    from ragrade.exam.offline import OFFLINE_EXAM_NOTE

    exam = ragrade.generate_exam(synthetic_chunks(60), tmp_path / "exam.jsonl", n=6, embedder=None, seed=1)
    assert exam.notes == [OFFLINE_EXAM_NOTE]
    taken = ragrade.take_exam(tmp_path / "exam.jsonl", tmp_path / "run", llms="offline/student", retrievers="closed")
    assert taken.notes == [OFFLINE_EXAM_NOTE] and taken.warnings == [] and len(taken.summary) == 1
    header, questions = read_exam(tmp_path / "exam.jsonl")
    assert header is not None
    write_exam(tmp_path / "llm.jsonl", questions, meta={**header.meta, "generator": {"name": "openai/some-model"}})
    other = ragrade.take_exam(tmp_path / "llm.jsonl", tmp_path / "run2", llms="offline/student", retrievers="closed")
    assert other.notes == []
