"""An interrupted `exam take` leaves its results for what finished, marked partial; the rerun completes them.

The CLI runs as a subprocess against the local OpenAI-compatible server, slowed down so that Ctrl-C lands
mid-run (the helpers of test_run_interrupt.py).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from tests.run.fakes import make_exam, repo_env
from tests.run.test_run_interrupt import N_QUESTIONS, _start_and_wait, _stop, _take
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("isolated_llm_env")


def _journal_keys(out: Path) -> set[tuple[str, str]]:
    """(pipeline, question id) of every row the journal holds."""
    with sqlite3.connect(f"file:{out / 'journal.sqlite'}?mode=ro", uri=True) as db:
        return {(str(p), str(q)) for p, q in db.execute("SELECT pipeline, item FROM results")}


@pytest.mark.slow
def test_interrupted_take_writes_partial_results_and_the_rerun_completes_them(tmp_path: Path) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, N_QUESTIONS)
    with OpenAIServer(responder=lambda body: "B", latency_s=0.15) as srv:
        proc = _start_and_wait(_take(exam, out, srv.base_url), out, rows=8)
        _, err, _ = _stop(proc, signal.SIGINT)
        assert proc.returncode == 130 and "Traceback" not in err, err
        kept = _journal_keys(out)
        assert 8 <= len(kept) < N_QUESTIONS

        df = pd.read_parquet(out / "responses.parquet")
        assert set(zip(df["pipeline"], df["question_id"], strict=True)) == kept and len(df) == len(kept)
        assert (df["chosen"] == 1).all() and df["error"].isna().all()
        summary = pd.read_csv(out / "summary.csv")
        assert len(summary) == 1 and summary["partial"].tolist() == [True]
        assert int(summary["n"].iloc[0]) == len(kept)
        by_tag = pd.read_csv(out / "summary_by_tag.csv")
        assert by_tag[by_tag["tag"] == "qword"]["n"].sum() == len(kept)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == (
            f"partial: interrupted after {len(kept)} of {N_QUESTIONS} rows; rerun the same command to finish"
        )
        assert manifest["partial"]["rows"] == len(kept) and manifest["partial"]["of"] == N_QUESTIONS
        assert manifest["finished"] is None and manifest["counts"]["n_rows"] == len(kept)

        rerun = subprocess.run(_take(exam, out, srv.base_url), env=repo_env(), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    df = pd.read_parquet(out / "responses.parquet")
    assert len(df) == N_QUESTIONS and (df["chosen"] == 1).all()
    summary = pd.read_csv(out / "summary.csv")
    assert summary["partial"].tolist() == [False] and int(summary["n"].iloc[0]) == N_QUESTIONS
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and "partial" not in manifest and manifest["finished"]
    assert manifest["resumed"]  # the rerun resumed the interrupted run
