"""`ragrade report RUN --adaptive DIR --add DIR`: run folders kept outside the run directory reach the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ragrade.cli.main import main
from ragrade.io import write_json
from ragrade.report.render import render_report

PID = "llm=offline/student|retriever=bm25|k=3|icl=0|chunker=rec"


def _sweep(root: Path) -> Path:
    root.mkdir(parents=True)
    row = {
        "pipeline": PID,
        "llm": "offline/student",
        "retriever": "bm25",
        "icl": 0,
        "n": 10,
        "n_correct": 6,
        "accuracy": 0.6,
        "ci_low": 0.3,
        "ci_high": 0.8,
        "n_errors": 0,
        "n_parse_failures": 0,
    }
    pd.DataFrame([row]).to_csv(root / "summary.csv", index=False)
    pd.DataFrame([{"pipeline": PID, "question_id": "q1", "correct": 1}]).to_parquet(root / "responses.parquet")
    return root


def _adaptive(root: Path) -> Path:
    root.mkdir(parents=True)
    row = {
        "pipeline": PID,
        "status": "measured",
        "n_asked": 4,
        "accuracy": 0.5,
        "accuracy_estimate": 0.55,
        "accuracy_estimate_low": 0.3,
        "accuracy_estimate_high": 0.8,
    }
    pd.DataFrame([row]).to_csv(root / "summary.csv", index=False)
    cost = {"requests": 4, "full_grid_requests": 10, "share": 0.4, "rounds": 2, "status_counts": {"measured": 1}}
    write_json(root / "manifest.json", {"version": 1, "adaptive": {"cost": cost, "calibration": {"mode": "cold"}}})
    return root


def _robust(root: Path) -> Path:
    root.mkdir(parents=True)
    acc = {"value": 0.7, "low": 0.5, "high": 0.84, "k": 21, "n": 30}
    write_json(
        root / "metrics.json",
        {
            "ragrade": {"kind": "robust_metrics", "version": 1},
            "testbed": "noise",
            "model": "offline/extractive",
            "n": 30,
            "failed": 0,
            "accuracy": acc,
            "by_noise_ratio": [{"noise_ratio": 0.0, "accuracy": acc}],
        },
    )
    return root


def test_adaptive_and_robust_folders_outside_the_run_are_reported(tmp_path: Path) -> None:
    sweep, adaptive, noise = _sweep(tmp_path / "sweep"), _adaptive(tmp_path / "adaptive"), _robust(tmp_path / "rb")
    alone = render_report(sweep, inline_js=False)
    assert "not in this run: adaptive/summary.csv" in alone and "--adaptive DIR" in alone
    page = render_report(sweep, inline_js=False, adaptive=adaptive, extra=[noise])
    assert "not in this run: adaptive/summary.csv" not in page
    assert "The adaptive run asked 4 of the full grid&#x27;s 10 questions" in page
    assert "robust/noise/metrics.json" in page and "adaptive/ = " in page
    out = tmp_path / "r.html"
    assert main(["report", str(sweep), "--adaptive", str(adaptive), "--add", str(noise), "--out", str(out)]) == 0
    assert "The adaptive run asked 4" in out.read_text(encoding="utf-8")


def test_a_folder_the_report_cannot_read_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = _sweep(tmp_path / "sweep")
    (tmp_path / "empty").mkdir()
    assert main(["report", str(sweep), "--add", str(tmp_path / "empty")]) == 2
    assert main(["report", str(sweep), "--adaptive", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "not a run folder the report reads" in err and "not an adaptive run" in err and "Traceback" not in err


def test_a_second_exam_run_is_merged_not_shown_in_place_of_the_first(tmp_path: Path) -> None:
    # issue 36.8: `report RUN --add OTHER` replaced the leaderboard with OTHER's while the other sections
    # still described RUN, and the order of the folders decided which one was shown
    first, second = _sweep(tmp_path / "first"), _sweep(tmp_path / "second")
    out = tmp_path / "r.html"
    assert main(["report", str(first), "--add", str(second), "--out", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    # neither run records what its pipeline is, so the one id is shown once per run
    assert f"{PID}|run=first" in page and f"{PID}|run=second" in page and "does not record its components" in page
    assert main(["report", str(first), "--add", str(first), "--out", str(out)]) == 0  # itself
    assert "|run=" not in out.read_text(encoding="utf-8")
