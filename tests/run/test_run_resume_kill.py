"""Kill the CLI with SIGKILL at random points, rerun the same command, compare with an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from tests.run.fakes import make_exam, repo_env

from ragrade.run.store import Journal
from ragrade.run.summary import VOLATILE_COLUMNS, read_responses

RAGRADE = [sys.executable, "-m", "ragrade"]


def _cmd(exam: Path, out: Path) -> list[str]:
    return [
        *RAGRADE,
        "exam",
        "take",
        str(exam),
        "--out",
        str(out),
        "--llm",
        "py/tests.run.fakes:make_slow_llm",
        "--retrievers",
        "closed,oracle",
        "--icl",
        "0,1",
        "--shard-size",
        "3",
    ]


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 40)
    ref_dir, dir_ = tmp_path / "reference", tmp_path / "killed"
    t0 = time.perf_counter()
    done = subprocess.run(_cmd(exam, ref_dir), env=repo_env(), capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr
    rng = random.Random(6)
    progress = []
    for _ in range(4):
        proc = subprocess.Popen(_cmd(exam, dir_), env=repo_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.35, 0.7) * wall)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        if (dir_ / "journal.sqlite").exists():
            with Journal(dir_ / "journal.sqlite") as j:
                progress.append(j.count())
    assert progress and progress[0] < 4 * 35, "the first kill came too late to interrupt anything"
    assert progress == sorted(progress)  # finished rows are never lost
    final = subprocess.run(_cmd(exam, dir_), env=repo_env(), capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert f"({4 * 35 - progress[-1]} new rows)" in final.stdout  # nothing finished was redone
    vol = list(VOLATILE_COLUMNS)
    got, want = read_responses(dir_).drop(columns=vol), read_responses(ref_dir).drop(columns=vol)
    pd.testing.assert_frame_equal(got, want)
    assert (dir_ / "summary.csv").read_text() != "" and not list(dir_.glob(".*.tmp"))
    s_got = pd.read_csv(dir_ / "summary.csv").drop(columns=["mean_latency_s"])
    s_want = pd.read_csv(ref_dir / "summary.csv").drop(columns=["mean_latency_s"])
    pd.testing.assert_frame_equal(s_got, s_want)
