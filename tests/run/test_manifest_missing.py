"""A run's manifest says how many answers are missing (failed requests): "complete" only when none are."""

from __future__ import annotations

from pathlib import Path

from ragrade.io import write_json
from ragrade.job.layout import RunLayout
from ragrade.job.runner import missing_answers
from ragrade.report.html import render_page
from ragrade.report.sections_more import run_info
from ragrade.report.sources import RunFiles
from ragrade.run.manifest import build_manifest, finish_manifest


def test_failed_requests_make_a_finished_run_incomplete() -> None:
    m = finish_manifest(build_manifest("exam-sweep", {}), n_rows=10, n_errors=3)
    assert m["missing"] == 3 and m["status"] == "incomplete: 3 failed requests missing, rerun to retry"
    assert m["counts"] == {"n_rows": 10, "n_errors": 3}  # the counts are kept as before
    one = finish_manifest(build_manifest("judge", {}), n_failed=1, n_unparsed=4)  # unparsed verdicts are no failure
    assert (one["missing"], one["status"]) == (1, "incomplete: 1 failed request missing, rerun to retry")
    ok = finish_manifest(build_manifest("exam-sweep", {}), n_errors=0)
    assert (ok["status"], ok["missing"]) == ("complete", 0)
    assert "missing" not in finish_manifest(build_manifest("report", {}))  # runs without requests: as before
    assert finish_manifest(build_manifest("x", {}), missing=2, status="aborted")["status"] == "aborted"


def test_job_manifest_sums_missing_answers_and_the_report_shows_them(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    write_json(tmp_path / "sweep" / "manifest.json", {"kind": "exam-sweep", "missing": 2})
    write_json(tmp_path / "judge" / "scores" / "manifest.json", {"kind": "judge", "missing": 1})
    write_json(tmp_path / "judge" / "answers" / "manifest.json", {"kind": "qa-answer", "missing": 0})
    write_json(tmp_path / "robust" / "noise" / "m" / "metrics.json", {"failures": [{"error": "x"}] * 4})
    by = missing_answers(layout)
    assert by == {"sweep": 2, "judge/scores": 1, "robust/noise/m": 4}
    job = finish_manifest(build_manifest("job", {}), missing=sum(by.values()))
    job["missing_by"] = by
    write_json(tmp_path / "manifest.json", job)
    page = render_page("t", [run_info(RunFiles.for_dir(tmp_path))], {}, inline_js=False)
    assert "incomplete: 7 failed requests missing, rerun to retry" in page
    assert "7 (judge/scores: 1, sweep: 2, robust/noise/m: 4); rerun to ask them again" in page
