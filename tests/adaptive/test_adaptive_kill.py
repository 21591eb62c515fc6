"""kill -9 an adaptive run at random points (mid-round included), rerun, compare with an uninterrupted run."""

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


def _cmd(exam: Path, out: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "ragrade", "exam", "take", str(exam), "--out", str(out)),
        *("--llm", "py/tests.run.fakes:make_slow_llm", "--retrievers", "closed,oracle", "--icl", "0,1,2"),
        *("--shard-size", "3", "--adaptive", "--target-se", "0.3"),
    ]


@pytest.mark.slow
def test_sigkill_then_resume_gives_the_same_result(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 60)
    ref_dir, dir_ = tmp_path / "reference", tmp_path / "killed"
    t0 = time.perf_counter()
    done = subprocess.run(_cmd(exam, ref_dir), env=repo_env(), capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr
    rng = random.Random(3)
    for _ in range(3):
        proc = subprocess.Popen(_cmd(exam, dir_), env=repo_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 0.7) * wall)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    final = subprocess.run(_cmd(exam, dir_), env=repo_env(), capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr
    vol = ["mean_latency_s"]
    got = pd.read_csv(dir_ / "summary.csv").drop(columns=vol)
    want = pd.read_csv(ref_dir / "summary.csv").drop(columns=vol)
    pd.testing.assert_frame_equal(got, want)
    assert (dir_ / "adaptive_rounds.jsonl").read_text() == (ref_dir / "adaptive_rounds.jsonl").read_text()
