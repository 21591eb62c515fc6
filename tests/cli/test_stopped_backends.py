"""`exam take` against a server that fails everything, and against a slow one (issue 35, items 8 and 1).

A backend whose requests all fail the same way is stopped once and the rest of the run is left missing for
the rerun (exit 2, one line); a slow server is asked one request at a time and every request finishes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
from tests.cli.test_failed_requests import _exam
from tests.support.openai_server import OpenAIServer, always, throttled

from ragrade.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated_llm_env")


def _take(exam: Path, url: str, out: Path, *extra: str) -> list[str]:
    return ["exam", "take", str(exam), "--out", str(out), "--llm", "openai/test-model", "--retrievers", "closed",
            "--llm-base-url", url, *extra]  # fmt: skip


@pytest.mark.parametrize("method", ["loglikelihood", "generate"])
def test_eighty_requests_to_a_server_failing_everything_exit_2_within_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    # default retries (5, with backoff) and up to 16 in flight: before, 80 log-likelihood requests showed
    # 8/80 for more than 10 minutes, each request probing and retrying on its own
    exam, out = _exam(tmp_path, 80), tmp_path / "run"
    with OpenAIServer(faults=always("500")) as srv:
        t0 = time.monotonic()
        code = main(_take(exam, srv.base_url, out, "--method", method, "--timeout", "5"))
        elapsed = time.monotonic() - t0
        assert srv.requests_total <= 8  # a handful of requests, then nothing more was sent
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 30, (code, elapsed)
    assert err.count("\n") == 1 and err.startswith("ragrade: error: openai/test-model: server unreachable (its last ")
    assert "all failed the same way (last: HTTP 500: injected server error)" in err
    assert "80 of 80 requests failed or were not sent" in err and "rerun the same command" in err
    df = pd.read_parquet(out / "responses.parquet")
    assert len(df) == 80 and df["correct"].isna().all()  # missing, never wrong
    assert json.loads((out / "manifest.json").read_text())["missing"] == 80


def test_a_slow_server_with_a_tight_timeout_stops_with_the_settings_that_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exam = _exam(tmp_path, 10)
    with throttled(latency_s=(1.0, 1.5)) as srv:
        t0 = time.monotonic()
        code = main(_take(exam, srv.base_url, tmp_path / "run", "--method", "generate", "--timeout", "0.4"))
        elapsed = time.monotonic() - t0
        assert srv.requests_total == 2  # one at a time: two sent, none left queued at the server
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 10
    assert "no reply within 0.4s (--timeout) to 2 requests sent one at a time" in err
    assert "rerun with --timeout 1.6 --concurrency 1" in err and err.count("\n") == 1
    _no_setting_marks_in_the_result_files(tmp_path / "run", "rerun with timeout set to 1.6 and concurrency to 1")
    with throttled(latency_s=(0.05, 0.15)) as srv:  # the advice taken (scaled down): every item answered
        code = main(_take(exam, srv.base_url, tmp_path / "run", "--method", "generate", "--timeout", "1.6"))
        assert code == 0 and srv.dropped == 0 and srv.abandoned == 0
    df = pd.read_parquet(tmp_path / "run" / "responses.parquet")
    assert df["error"].isna().all() and len(df) == 10


def _no_setting_marks_in_the_result_files(run: Path, advice: str) -> None:
    """Each request's error as result files keep it (for pandas): the settings named in words, never ``$name``."""
    df = pd.read_parquet(run / "responses.parquet")
    errors = [str(e) for e in df["error"].dropna()]
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines() if line.strip()]
    errors += [str(s["response"]["error"]) for s in samples[1:] if s["response"].get("error")]
    assert len(errors) == 10 + 10  # every item, in the parquet file and in samples.jsonl
    assert not [e for e in errors if "$" in e]
    assert any(advice in e for e in errors) and any("(the timeout given)" in e for e in errors)


def test_a_server_without_log_likelihoods_leaves_words_in_the_files_and_flags_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exam, run = _exam(tmp_path, 6), tmp_path / "run"
    with OpenAIServer(prompt_logprobs=False, logit_bias=False) as srv:
        code = main(_take(exam, srv.base_url, run, "--method", "loglikelihood", "--max-retries", "0"))
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert code == 3 and line.startswith("ragrade: error: 6 of 6 LLM requests failed") and "$" not in err
    assert "cannot score log-likelihoods" in line and "set --method to generate" in line  # the flag, spelled
    df = pd.read_parquet(run / "responses.parquet")
    errors = [str(e) for e in df["error"].dropna()]
    assert len(errors) == 6 and df["correct"].isna().all()  # missing, never wrong
    assert all("set methods to generate" in e and "$" not in e for e in errors)  # words, for pandas
