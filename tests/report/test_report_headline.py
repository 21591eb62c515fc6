"""The leaderboard's headline names the best real pipeline; bounds and baselines are labelled (issue 28, 6 and 8)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ragrade.exam.files import write_exam
from ragrade.report.sections_core import leaderboard, pipeline_role, short_pipeline
from ragrade.report.sources import RunFiles


def _summary(root: Path, llms: dict[str, str]) -> None:
    rows = []
    for acc, (ret, llm) in zip((0.95, 0.9, 0.7, 0.5, 0.3), llms.items(), strict=False):
        k = {"oracle": 1, "closed": 0}.get(ret, 3)
        rows.append(
            {
                "pipeline": f"llm={llm}|retriever={ret}|k={k}|icl=0|chunker=none",
                "llm": llm,
                "retriever": ret,
                "icl": 0,
                "n": 100,
                "n_correct": int(acc * 100),
                "accuracy": acc,
                "ci_low": acc - 0.05,
                "ci_high": acc + 0.04,
                "n_errors": 0,
                "n_parse_failures": 0,
            }
        )
    (root / "sweep").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(root / "sweep" / "summary.csv", index=False)


def _text(root: Path) -> str:
    sec = leaderboard(RunFiles(root), 5)
    return "\n".join(sec.parts)


def test_headline_names_the_best_real_pipeline(tmp_path: Path) -> None:
    # ranked: oracle (real LLM) 0.95, offline bm25 0.9, real dense 0.7, real closed 0.5
    _summary(tmp_path, {"oracle": "openai/m", "bm25": "offline/student", "dense": "openai/m", "closed": "openai/m"})
    text = _text(tmp_path)
    assert "Best: openai/m · dense · k=3 · icl=0 with accuracy 0.700" in text
    assert "Upper bound (oracle, given the gold passage): openai/m · oracle · icl=0, accuracy 0.950" in text
    assert "<td>upper bound</td>" in text and "<td>offline baseline</td>" in text
    assert "Note on offline exams" not in text  # no exam file: nothing to say about it


def test_all_offline_run_says_so_and_notes_the_offline_exam(tmp_path: Path) -> None:
    _summary(tmp_path, {"oracle": "offline/student", "bm25": "offline/student", "dense": "offline/student"})
    write_exam(tmp_path / "exam" / "exam.jsonl", [], meta={"generator": {"name": "offline/cloze"}})
    text = _text(tmp_path)
    assert "No pipeline uses a real LLM" in text and "Best of them: offline/student · bm25" in text
    assert "Note on offline exams" in text and "favours lexical retrieval" in text and "--llm openai/" in text
    assert pipeline_role("llm=offline/student|retriever=oracle") == "upper bound, offline baseline"
    assert short_pipeline("llm=x|retriever=oracle|k=1|icl=0").endswith("(upper bound)")
    assert pipeline_role("llm=replay/offline/student|retriever=bm25") == "offline baseline"


def test_offline_student_icl_levels_are_said_to_be_identical(tmp_path: Path) -> None:
    _summary(tmp_path, {"bm25": "offline/student", "dense": "offline/student"})
    df = pd.read_csv(tmp_path / "sweep" / "summary.csv")
    df.loc[1, "icl"] = 1
    df.to_csv(tmp_path / "sweep" / "summary.csv", index=False)
    assert "ICL 0, 1 answer identically" in _text(tmp_path)


def test_terminal_notes_after_an_offline_run(tmp_path: Path) -> None:
    from ragrade.report.sections_core import baseline_notes

    _summary(tmp_path, {"bm25": "offline/student", "dense": "offline/student"})
    assert baseline_notes(RunFiles(tmp_path)) == [
        "every pipeline is an offline baseline: give a real LLM in [sweep] llms to compare models"
    ]
    write_exam(tmp_path / "exam" / "exam.jsonl", [], meta={"generator": {"name": "offline/cloze"}})
    assert "favours lexical retrieval (BM25)" in baseline_notes(RunFiles(tmp_path))[0]
