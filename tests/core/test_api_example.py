"""examples/notebook_api.py runs end to end (in process) and leaves the tables and the report it promises."""

from __future__ import annotations

import runpy
import warnings
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "notebook_api.py"


@pytest.mark.slow
def test_notebook_example_runs_and_its_run_opens_as_dataframes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGRADE_EXAMPLE_OUT", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the demo notes standard-library modules this platform cannot import
        ns = runpy.run_path(str(EXAMPLE), run_name="__main__")
    n_questions = len(ns["questions"])
    assert 10 <= n_questions <= 30 and (tmp_path / "exam.jsonl").is_file()
    summary = ns["result"].summary
    assert len(summary) == 3 and {"pipeline", "n", "accuracy", "ci_low", "ci_high"} <= set(summary.columns)
    assert summary["n"].sum() == 3 * n_questions
    run = ns["run"]
    assert {"responses", "summary", "irt_items", "irt_abilities"} <= set(run.tables())
    assert run.responses.shape[0] == 3 * n_questions and {"pipeline", "question_id", "correct"} <= set(
        run.responses.columns
    )
    assert run.summary["pipeline"].tolist() == summary["pipeline"].tolist()
    assert len(run.irt_abilities) == 3 and len(run.irt_items) == n_questions
    assert run.irt_effects is None and run.judge_scores is None
    assert list(run.robust) == ["noise"] and len(run.robust["noise"]) == 1  # one row per model
    assert ns["noise"][0].metrics["n"] == 24  # 12 questions x 2 noise ratios, none failed
    assert {"base", "integration", "counterfactual"} <= set(ns["testbeds"])
    closed = summary.loc[summary["pipeline"].str.contains("retriever=closed"), "accuracy"].item()
    assert summary["accuracy"].max() > closed  # retrieval helps the offline student on its own corpus
    report = ns["report"]
    assert report == tmp_path / "run" / "report.html"
    html = report.read_text(encoding="utf-8")
    assert "<html" in html[:500].lower() and "noise" in html
