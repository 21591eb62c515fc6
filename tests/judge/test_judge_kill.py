"""kill -9 `ragrade judge` after its first committed batch, rerun: the files of an uninterrupted run."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import repo_env
from tests.support.kill import kill_after
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

N = 16  # answers, each judged once (correctness)


def _answers(path: Path) -> Path:
    rows = [
        {"id": f"q{i:02d}", "config": "AB"[i % 2], "query": f"When was thing {i} built?",
         "answer": f"It was built in {1900 + i}.", "contexts": [f"Thing {i} was built in {1900 + i}."],
         "reference": f"{1900 + i + i % 3}"}
        for i in range(N)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _reply(body: dict[str, Any]) -> str:
    """A score that depends on the prompt (so a record carrying another answer's score would show)."""
    digest = hashlib.sha256(body["messages"][-1]["content"].encode()).digest()
    return json.dumps({"score": 1 + digest[0] % 5, "reason": f"r{digest[1]}"})


def _cmd(answers: Path, url: str, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "ragrade", "judge", str(answers), "--metrics", "correctness,exact", "--llm",
        "openai/test-model", "--llm-base-url", url, "--out", str(out), "--max-retries", "0", "--no-cache",
        "--concurrency", "1", "--batch-size", "2", "--seed", "3",
    ]  # fmt: skip


def _summary(out: Path) -> dict[str, Any]:
    s: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    s.pop("runs")  # what this call scored and what it reused
    return s


@pytest.mark.slow
def test_kill_9_after_the_first_batch_then_rerun_gives_the_uninterrupted_files(tmp_path: Path) -> None:
    answers = _answers(tmp_path / "answers.jsonl")
    ref, out = tmp_path / "reference", tmp_path / "killed"
    with OpenAIServer(responder=_reply, latency_s=0.05) as srv:
        done = subprocess.run(_cmd(answers, srv.base_url, ref), env=repo_env(), capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert srv.requests_total == N
        srv.reset_counters()
        # exact match commits all N first; then the judge's first batch of 2
        kept = kill_after(_cmd(answers, srv.base_url, out), repo_env(), out / "journal.sqlite", rows=N + 2) - N
        assert 2 <= kept < N and not (out / "scores.jsonl").exists()
        srv.reset_counters()
        rerun = subprocess.run(_cmd(answers, srv.base_url, out), env=repo_env(), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        assert srv.requests_total == N - kept  # nothing committed is judged again
    scores = (out / "scores.jsonl").read_bytes()
    assert scores == (ref / "scores.jsonl").read_bytes() and len(scores.splitlines()) == 1 + 2 * N  # byte for byte
    assert _summary(out) == _summary(ref)
    assert json.loads((out / "summary.json").read_text())["runs"]["correctness"] == {
        "reused": kept, "skipped": 0, "scored": N - kept}  # fmt: skip
    for name in ("summary.csv", "agreement.json"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
