"""Ctrl-C and SIGTERM stop a real `ragrade` process cleanly; a second Ctrl-C stops it at once; reruns resume.

The CLI runs as a subprocess against the local OpenAI-compatible server (tests/support/openai_server.py),
slowed down so that the signal lands mid-run. The server counts requests, so a rerun can be shown not to
ask again what the interrupted run already received.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from tests.run.fakes import make_exam, repo_env
from tests.support.openai_server import OpenAIServer, always

from ragrade.run.store import Journal

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

N_QUESTIONS = 48
LINE = re.compile(r"^ragrade: interrupted: (\d+) of (\d+) done \((.+)\); rerun the same command to resume$")


def _take(exam: Path, out: Path, url: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ragrade", "exam", "take", str(exam), "--out", str(out), "--llm", "openai/test-model",
        "--llm-base-url", url, "--retrievers", "closed", "--method", "generate", "--shard-size", "4",
        "--concurrency", "2", "--max-retries", "0", "--timeout", "20", *extra,
    ]  # fmt: skip


def _journaled(out: Path) -> int:
    path = out / "journal.sqlite"
    if not path.exists():
        return 0
    try:
        with Journal(path) as j:
            return j.count()
    except Exception:  # created but not initialised yet
        return 0


def _start_and_wait(cmd: list[str], out: Path, rows: int) -> subprocess.Popen[str]:
    """Start ``cmd`` and return once ``rows`` rows are journaled (the run is well under way)."""
    proc = subprocess.Popen(cmd, env=repo_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _journaled(out) < rows:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen[str], *signals: signal.Signals, gap_s: float = 0.0) -> tuple[str, str, float]:
    t0 = time.monotonic()
    for sig in signals:
        proc.send_signal(sig)
        time.sleep(gap_s)
    out, err = proc.communicate(timeout=60)
    return out, err, time.monotonic() - t0


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_stops_writes_and_the_rerun_resumes_without_asking_again(
    tmp_path: Path, sig: signal.Signals
) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, N_QUESTIONS)
    with OpenAIServer(responder=lambda body: "B", latency_s=0.15) as srv:
        proc = _start_and_wait(_take(exam, out, srv.base_url), out, rows=8)
        _, err, took = _stop(proc, sig)
        assert proc.returncode == 130, err
        assert took < 15, f"stopping took {took:.1f}s"
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        m = LINE.match(lines[0])
        assert m, lines[0]
        done, total = int(m.group(1)), int(m.group(2))
        assert m.group(3) == "rows" and total == N_QUESTIONS
        kept = _journaled(out)
        assert 8 <= done == kept < N_QUESTIONS  # the message counts exactly what the journal holds
        asked_first = srv.requests_total
        srv.reset_counters()

        rerun = subprocess.run(_take(exam, out, srv.base_url), env=repo_env(), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        asked_again = srv.requests_total
    # journaled rows are never asked again; answers that arrived after the last journaled shard come from the
    # response cache (flushed on the stop): only requests the stop cut off in flight are sent twice
    assert asked_again <= N_QUESTIONS - kept
    assert asked_first + asked_again <= N_QUESTIONS + 2  # --concurrency 2: at most 2 were cut off
    assert f"({N_QUESTIONS - kept} new rows)" in rerun.stdout
    df = pd.read_parquet(out / "responses.parquet")
    assert len(df) == N_QUESTIONS and df["error"].isna().all() and (df["chosen"] == 1).all()


@pytest.mark.slow
def test_ctrl_c_cancels_requests_that_hang(tmp_path: Path) -> None:
    """A server that never answers: the first Ctrl-C ends the run at once, not after the 20 s timeout."""
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 8)
    with OpenAIServer(faults=always("hang", hang_s=60)) as srv:
        proc = subprocess.Popen(_take(exam, out, srv.base_url), env=repo_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while srv.requests_by_path["/v1/chat/completions"] < 2:  # both slots hang on the server
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        _, err, took = _stop(proc, signal.SIGINT)
    assert proc.returncode == 130 and took < 10, (took, err)
    assert err.strip() == "ragrade: interrupted: 0 of 8 done (rows); rerun the same command to resume"


@pytest.mark.slow
def test_second_ctrl_c_exits_at_once_and_leaves_a_usable_journal(tmp_path: Path) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, N_QUESTIONS)
    with OpenAIServer(responder=lambda body: "B", latency_s=0.15) as srv:
        proc = _start_and_wait(_take(exam, out, srv.base_url), out, rows=4)
        # a person's second Ctrl-C (the same signal within 0.1 s is one signal delivered twice, as `timeout` does)
        _, err, took = _stop(proc, signal.SIGINT, signal.SIGINT, gap_s=0.3)
        assert proc.returncode == 130 and took < 10, (took, err)
        assert "Traceback" not in err and "interrupted" in err
        conn = sqlite3.connect(out / "journal.sqlite")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        kept = _journaled(out)
        rerun = subprocess.run(_take(exam, out, srv.base_url), env=repo_env(), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert f"({N_QUESTIONS - kept} new rows)" in rerun.stdout
    # samples.jsonl: one line per row, in the rows' order, even though the first run stopped at once
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["ragrade"]["kind"] == "exam_samples"
    samples = [json.loads(x) for x in lines[1:]]
    df = pd.read_parquet(out / "responses.parquet")
    assert [(s["pipeline"], s["item_id"]) for s in samples] == list(zip(df["pipeline"], df["question_id"], strict=True))
    assert all(s["response"]["text"] == "B" for s in samples)


@pytest.mark.slow
def test_second_ctrl_c_ends_a_run_whose_first_stop_waits_for_a_busy_model(tmp_path: Path) -> None:
    """The model holds the event loop for 2 s per batch (an in-process model computing): the first Ctrl-C
    waits for the call to end, the second ends the process at once; the rerun finishes the exam."""
    exam, out, mark = tmp_path / "exam.jsonl", tmp_path / "run", tmp_path / "calls"
    make_exam(exam, 16)
    cmd = [
        sys.executable, "-m", "ragrade", "exam", "take", str(exam), "--out", str(out), "--retrievers", "closed",
        "--llm", "py/tests.run.fakes:make_blocking_llm", "--shard-size", "4",
    ]  # fmt: skip
    env = {**repo_env(), "RAGRADE_TEST_BLOCK_MARK": str(mark)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not mark.exists() or len(mark.read_text().splitlines()) < 2:  # the second call has begun
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    assert proc.poll() is None  # the first stop waits for the model's call (1.5 s more)
    _, err, took = _stop(proc, signal.SIGINT)
    assert proc.returncode == 130 and took < 0.9, (took, err)
    assert "Traceback" not in err
    assert re.fullmatch(
        r"ragrade: interrupted again, stopped at once: \d+ of 16 done \(rows\); rerun the same command to resume\n",
        err,
    ), err
    kept = _journaled(out)
    rerun = subprocess.run(cmd, env=repo_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"({16 - kept} new rows)" in rerun.stdout and len(pd.read_parquet(out / "responses.parquet")) == 16


@pytest.mark.slow
def test_judge_stops_on_ctrl_c_and_the_rerun_judges_only_the_rest(tmp_path: Path) -> None:
    answers, out = tmp_path / "answers.jsonl", tmp_path / "judged"
    answers.write_text(
        "".join(
            json.dumps({"id": f"a{i}", "query": f"q {i}?", "answer": f"ans {i}", "reference": f"ref {i}",
                        "contexts": ["ctx"], "config": "p1"}) + "\n"
            for i in range(20)
        )
    )  # fmt: skip
    cmd = [
        sys.executable, "-m", "ragrade", "judge", str(answers), "--metrics", "correctness", "--llm",
        "openai/test-model", "--out", str(out), "--batch-size", "2", "--concurrency", "1", "--max-retries", "0",
    ]  # fmt: skip
    reply = json.dumps({"score": 4, "reason": "close to the reference"})
    with OpenAIServer(responder=lambda body: reply, latency_s=0.2) as srv:
        cmd += ["--llm-base-url", srv.base_url]
        proc = subprocess.Popen(cmd, env=repo_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while srv.requests_by_path["/v1/chat/completions"] < 5:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        _, err, _ = _stop(proc, signal.SIGINT)
        m = re.fullmatch(
            r"ragrade: interrupted: (\d+) of 20 done \(correctness scores\); rerun the same command to resume\n", err
        )
        assert proc.returncode == 130 and m, err
        with Journal(out / "journal.sqlite") as j:  # scores.jsonl is written by the finished run
            scored = j.rows("scores")
        assert len(scored) == int(m.group(1)) >= 4  # the message counts what the journal holds
        srv.reset_counters()
        rerun = subprocess.run(cmd, env=repo_env(), capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        sent_again = [json.dumps(body) for body in srv.log]
    for rec in scored:  # a judged answer is never sent again
        query = f"q {rec['id'][1:]}?"
        assert not [b for b in sent_again if query in b], rec["id"]
    assert len((out / "scores.jsonl").read_text().splitlines()) == 21
    runs = json.loads((out / "summary.json").read_text())["runs"]["correctness"]
    assert runs["reused"] == len(scored) and runs["scored"] == 20 - len(scored)
