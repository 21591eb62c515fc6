"""A slow log-likelihood method is said once, with its measured cost and the flag that switches (issue 52, item 7).

The server here answers one request at a time, each after a fixed delay; the threshold of "slow" is lowered
to fit it (the rule, not the number, is under test). The run keeps its method: generation scores another
number, so only the user switches.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from tests.cli.test_failed_requests import _exam
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.llm import cost_watch

pytestmark = pytest.mark.usefixtures("isolated_llm_env")
N = 8


def _take(exam: Path, url: str, out: Path, method: str) -> list[str]:
    return ["exam", "take", str(exam), "--out", str(out), "--llm", "openai/test-model", "--retrievers", "closed",
            "--llm-base-url", url, "--method", method]  # fmt: skip


def test_a_slow_loglikelihood_method_is_said_once_and_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cost_watch, "SLOW_S", 0.1)
    exam = _exam(tmp_path, N)
    with OpenAIServer(slots=1, latency_s=0.15) as srv:
        assert main(_take(exam, srv.base_url, tmp_path / "ll", "loglikelihood")) == 0
    said = [r.getMessage() for r in caplog.records if "scoring by prompt log-probabilities" in r.getMessage()]
    assert len(said) == 1, caplog.text
    pattern = r"takes about [\d.]+ s per request on this server \(3 replies in [\d.]+ s; the \d+ requests"
    assert re.search(pattern, said[0]), said[0]
    assert "--method generate asks for one generated letter per question" in said[0]
    assert "a different number, so the run keeps its method" in said[0]
    df = pd.read_parquet(tmp_path / "ll" / "responses.parquet")
    assert set(df["method"]) == {"loglikelihood"}  # never switched behind the user's back
    # generation is not watched, and a fast server is not told anything
    with OpenAIServer(responder=lambda b: "B", slots=1, latency_s=0.15) as srv:
        assert main(_take(exam, srv.base_url, tmp_path / "gen", "generate")) == 0
    with OpenAIServer() as srv:
        monkeypatch.setattr(cost_watch, "SLOW_S", 30.0)
        assert main(_take(exam, srv.base_url, tmp_path / "fast", "loglikelihood")) == 0
    assert sum("scoring by prompt log-probabilities" in r.getMessage() for r in caplog.records) == 1


def test_the_probe_times_one_request_of_each_kind(capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer(latency_s=0.05) as srv:
        args = ["llm", "probe", "--llm", "openai/test-model", "--llm-base-url", srv.base_url, "--need", "loglikelihood"]
        assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["generate"]["latency_s"] >= 0.05 and report["loglikelihood"]["latency_s"] >= 0.05


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_the_measure_is_of_a_burst_of_work_not_of_the_pause_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(cost_watch, "time", clock)
    cost = cost_watch.LoglikCost("openai/m")
    for _ in range(2):  # a small run: two quick replies, then the process waits ten minutes
        cost.on_send()
        clock.now += 1
        assert cost.on_reply(True, "echo") is None
    clock.now += 600
    for _ in range(4):  # the next run: four requests in flight, answered 30 s apart (one slot)
        cost.on_send()
    notes = []
    for _ in range(4):
        clock.now += 30
        notes.append(cost.on_reply(True, "echo"))
    said = [n for n in notes if n]
    assert len(said) == 1 and notes[2] is not None  # decided at the third reply of the burst, once
    assert "takes about 30 s per request on this server (3 replies in 90 s; the 1 requests sent" in said[0]
