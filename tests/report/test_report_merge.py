"""`ragrade report RUN --add OTHER` merges exam runs of the same exam into one leaderboard (issue 36.8)."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from report_fixtures import make_run

from ragrade.cli.main import main
from ragrade.errors import DataError
from ragrade.io import write_json
from ragrade.report.merge import pipeline_spec
from ragrade.report.render import render_report, run_files
from ragrade.run.summary import read_responses, summarise, write_csv

OTHER_LLM = "other/model"


def _components(llm: str) -> dict[str, Any]:
    return {
        "prompt:default": {"digest": "abc"},
        f"llm:{llm}": {"name": llm, "provider": "x"},
        "retriever:rec:bm25": {"retriever": "bm25", "index": "/nowhere/index/rec", "bm25": {"k1": 1.5}},
        "retriever:sent:bm25": {"retriever": "bm25", "index": "/elsewhere/index/sent", "bm25": {"k1": 1.5}},
    }


def _manifest(exam: Path, llm: str, temperature: float = 0.0) -> dict[str, Any]:
    sha = hashlib.sha256(exam.read_bytes()).hexdigest()
    return {
        "version": 1,
        "exam": {"path": str(exam), "sha256": sha},
        "components": _components(llm),
        "llm_labels": {llm: llm},
        "config": {"answer": {"score": "auto", "temperature": temperature}},
    }


def _other(tmp_path: Path, job: Path, name: str, *, llm: str = OTHER_LLM, keep: str = "bm25", **kw: Any) -> Path:
    """An `exam take` run of ``job``'s exam: its bm25 pipelines answered by ``llm``, every answer right."""
    df = read_responses(job / "sweep")
    df = df[df["retriever"] == keep].copy()
    df["pipeline"] = df["pipeline"].str.replace("llm=offline/student", f"llm={llm}", regex=False)
    df["llm"] = llm
    df["correct"] = 1
    df["chosen"] = df["answer"]
    folder = tmp_path / name
    folder.mkdir()
    df.to_parquet(folder / "responses.parquet", index=False)
    write_csv(folder / "summary.csv", summarise(df))
    exam = job / "exam" / "exam.jsonl"
    write_json(folder / "manifest.json", _manifest(exam, llm, **kw))
    return folder


def _job(tmp_path: Path) -> Path:
    job: Path = make_run(tmp_path / "job", n_questions=24, with_robust=False)
    write_json(job / "sweep" / "manifest.json", _manifest(job / "exam" / "exam.jsonl", "offline/student"))
    return job


def _leaderboard(page: str) -> set[str]:
    """The pipeline ids in the leaderboard table of a rendered page."""
    table = page.split('id="leaderboard"', 1)[1].split("</table>", 1)[0]
    return set(re.findall(r"<td>(llm=[^<]+)</td>", table))


def test_two_runs_of_one_exam_make_one_leaderboard_whatever_the_order(tmp_path: Path) -> None:
    job = _job(tmp_path)
    other = _other(tmp_path, job, "other")
    own = set(read_responses(job / "sweep")["pipeline"])
    added = set(read_responses(other)["pipeline"])
    assert own.isdisjoint(added) and len(added) == 4
    page = render_report(job, inline_js=False, extra=[other])
    assert _leaderboard(page) == own | added  # both runs' pipelines, each once
    assert "Merged from 2 runs of the same exam" in page and f"{len(added)} from other" in page
    # the IRT section says which run it describes
    assert (
        "This fit describes the run job only" in page
        and "the 4 pipelines of the leaderboard found only in other are not in it" in page
    )
    # the verdicts are recomputed over both runs: an added pipeline can be among the compared ones
    files = run_files(job, [other])
    comps = files.json("sweep/comparisons.json")
    assert comps is not None and set(comps["pipelines"]) & added
    summary = files.csv("sweep/summary.csv")
    assert summary is not None and len(summary) == len(own | added)
    assert dict(zip(summary["pipeline"], summary["run"], strict=True))[sorted(added)[0]] == "other"
    # the other order shows the same leaderboard with the same numbers
    flipped = run_files(other, [job]).csv("sweep/summary.csv")
    assert flipped is not None
    a = summary.set_index("pipeline")["accuracy"].sort_index()
    b = flipped.set_index("pipeline")["accuracy"].sort_index()
    pd.testing.assert_series_equal(a, b)
    # the CLI writes it
    out = tmp_path / "r.html"
    assert main(["report", str(job), "--add", str(other), "--out", str(out)]) == 0
    assert _leaderboard(out.read_text(encoding="utf-8")) == own | added


def test_a_job_directory_can_be_added_too(tmp_path: Path) -> None:
    job = _job(tmp_path)
    other = _other(tmp_path, job, "other")
    # an `exam take` run as RUN, a job's run directory added: the job's IRT fit is shown, and named
    page = render_report(other, inline_js=False, extra=[job])
    assert _leaderboard(page) == set(read_responses(job / "sweep")["pipeline"]) | set(read_responses(other)["pipeline"])
    assert "This fit describes the run job only" in page and "found only in other are not in it" in page


def test_a_pipeline_in_both_runs_is_one_row_when_its_specification_is_the_same(tmp_path: Path) -> None:
    job = _job(tmp_path)
    twin = _other(tmp_path, job, "twin", llm="offline/student")  # the same ids, components and answer settings
    files = run_files(job, [twin])
    summary = files.csv("sweep/summary.csv")
    n_own = read_responses(job / "sweep")["pipeline"].nunique()
    assert summary is not None and len(summary) == n_own and set(summary["run"]) == {"job"}
    pid = "llm=offline/student|retriever=bm25|k=3|icl=0|chunker=rec"
    row = summary.set_index("pipeline").loc[pid]
    own = pd.read_csv(job / "sweep" / "summary.csv").set_index("pipeline").loc[pid]
    assert row["n_correct"] == own["n_correct"]  # the answers of the run given first, said in a note
    assert files.merged is not None
    alike = int(str(own["n_correct"]))  # the twin answered every question right
    assert any(n.startswith(pid) and f"answers agree on {alike} of 24 questions" in n for n in files.merged.notes)


def test_a_pipeline_in_both_runs_with_another_specification_is_shown_per_run(tmp_path: Path) -> None:
    job = _job(tmp_path)
    changed = _other(tmp_path, job, "changed", llm="offline/student", temperature=0.7)
    files = run_files(job, [changed])
    summary = files.csv("sweep/summary.csv")
    assert summary is not None
    pid = "llm=offline/student|retriever=bm25|k=3|icl=0|chunker=rec"
    rows = summary[summary["pipeline"].str.startswith(pid + "|run=")]
    assert sorted(rows["pipeline"]) == [f"{pid}|run=changed", f"{pid}|run=job"]
    accuracies = rows.set_index("run")["accuracy"]
    assert accuracies["changed"] == 1.0 > accuracies["job"]  # both runs' answers, each under its own row
    assert files.merged is not None
    assert any("their specifications differ in answer" in n for n in files.merged.notes)
    page = render_report(job, inline_js=False, extra=[changed])
    assert "run=changed" in page


def test_a_run_without_recorded_components_is_not_matched(tmp_path: Path) -> None:
    job = _job(tmp_path)
    bare = _other(tmp_path, job, "bare", llm="offline/student")
    manifest = _manifest(job / "exam" / "exam.jsonl", "offline/student")
    del manifest["components"]
    write_json(bare / "manifest.json", manifest)
    assert pipeline_spec("llm=offline/student|retriever=bm25|k=3|icl=0|chunker=rec", manifest) is None
    files = run_files(job, [bare])
    assert files.merged is not None and any("does not record its components" in n for n in files.merged.notes)


def test_index_paths_do_not_make_two_specifications_differ() -> None:
    pid = "llm=a|retriever=bm25|k=3|icl=0|chunker=rec"
    one = {"components": {"retriever:rec:bm25": {"index": "/run1/index/rec"}, "llm:a": {"m": 1}}}
    two = {"components": {"retriever:rec:bm25": {"index": "/run2/index/rec"}, "llm:a": {"m": 1}}}
    three = {"components": {"retriever:rec:bm25": {"index": "/run2/index/rec"}, "llm:a": {"m": 2}}}
    assert pipeline_spec(pid, one) == pipeline_spec(pid, two) != pipeline_spec(pid, three)


def test_runs_of_different_exams_are_refused_naming_the_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job(tmp_path)
    other = _other(tmp_path, job, "other")
    # another exam file: one question more
    exam2 = tmp_path / "exam2.jsonl"
    lines = (job / "exam" / "exam.jsonl").read_text(encoding="utf-8").splitlines()
    exam2.write_text("\n".join([*lines, lines[-1].replace('"q023"', '"q999"')]) + "\n", encoding="utf-8")
    write_json(other / "manifest.json", _manifest(exam2, OTHER_LLM))
    out = tmp_path / "r.html"
    assert main(["report", str(job), "--add", str(other), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragrade: error:") and "took different exams" in err and "1 only in other (q999)" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and not out.exists()
    # the same question ids in a changed file: the fingerprints differ
    exam3 = tmp_path / "exam3.jsonl"
    exam3.write_text((job / "exam" / "exam.jsonl").read_text(encoding="utf-8").replace("context 1", "context one"))
    write_json(other / "manifest.json", _manifest(exam3, OTHER_LLM))
    with pytest.raises(DataError, match=r"different exam files.*with the same question ids"):
        run_files(job, [other])


def test_runs_that_asked_different_questions_are_refused(tmp_path: Path) -> None:
    job = _job(tmp_path)
    other = _other(tmp_path, job, "other")
    df = read_responses(other)
    df[df["question_id"] != "q005"].to_parquet(other / "responses.parquet", index=False)
    with pytest.raises(DataError, match=r"asked different questions.*1 only in job \(q005\)"):
        run_files(job, [other])


def test_adding_the_run_itself_or_a_copy_twice_merges_nothing_twice(tmp_path: Path) -> None:
    job = _job(tmp_path)
    other = _other(tmp_path, job, "other")
    assert run_files(job, [job / "sweep"]).merged is None
    files = run_files(job, [other, other])
    assert files.merged is not None and len(files.merged.runs) == 2
    copy = tmp_path / "copy" / "other"
    shutil.copytree(other, copy)  # same folder name elsewhere: labelled by parent
    files = run_files(job, [other, copy])
    assert files.merged is not None
    assert [r.label for r in files.merged.runs] == [f"{tmp_path.name}/job", f"{tmp_path.name}/other", "copy/other"]


def test_the_irt_note_counts_only_pipelines_the_fit_does_not_hold(tmp_path: Path) -> None:
    job = _job(tmp_path)
    twin = _other(tmp_path, job, "twin", llm="offline/student")  # 4 pipelines the job's fit holds too
    page = render_report(twin, inline_js=False, extra=[job])  # the twin first: its answers shown, job's fit
    assert "This fit describes the run job only" in page and "the 0 pipelines of the leaderboard" in page
