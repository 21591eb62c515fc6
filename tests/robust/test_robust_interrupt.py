"""Ctrl-C stops `ragrade robust run` cleanly, its committed batches kept; a torn results.jsonl does no harm."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.run.fakes import repo_env
from tests.support.kill import committed
from tests.support.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

DATA = Path(__file__).resolve().parent / "data" / "en_base.jsonl"
TOTAL = 4 * 5  # 4 questions x 5 noise ratios


def _cmd(url: str, out: Path, config: Path) -> list[str]:
    return [
        sys.executable, "-m", "ragrade", "robust", "run", str(DATA), "--testbed", "noise", "--llm",
        "openai/test-model", "--llm-base-url", url, "--out", str(out), "--max-retries", "0", "--config", str(config),
    ]  # fmt: skip


def _records(out: Path) -> int:
    return committed(out / "journal.sqlite")


@pytest.mark.slow
def test_robust_run_stops_on_ctrl_c_and_resumes_past_a_torn_line(tmp_path: Path) -> None:
    out, config = tmp_path / "noise", tmp_path / "robust.toml"
    config.write_text("[robust]\nbatch_size = 2\nconcurrency = 1\n")
    results = out / "results.jsonl"
    with OpenAIServer(responder=lambda body: "I do not know.", latency_s=0.2) as srv:
        proc = subprocess.Popen(_cmd(srv.base_url, out, config), env=repo_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while _records(out) < 4:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "Traceback" not in err, err
        err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("ragrade: warning:"))
        m = re.fullmatch(
            r"ragrade: interrupted: (\d+) of (\d+) done \(answers of openai/test-model\); "
            r"rerun the same command to resume\n",
            err,
        )
        assert m and int(m.group(2)) == TOTAL, err
        kept = _records(out)
        assert int(m.group(1)) == kept < TOTAL
        asked_first = srv.requests_total
        with results.open("a", encoding="utf-8") as fh:  # a torn file (an older ragrade's second Ctrl-C)
            fh.write('{"key": "torn", "response": "I do not kn')
        srv.reset_counters()
        rerun = subprocess.run(_cmd(srv.base_url, out, config), env=repo_env(), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        asked_again = srv.requests_total
    assert asked_again <= TOTAL - kept and asked_first + asked_again <= TOTAL + 1  # one request cut off at most
    lines = results.read_text().splitlines()
    assert len(lines) == 1 + TOTAL and all(json.loads(x) for x in lines)
    assert json.loads((out / "metrics.json").read_text())["n"] == TOTAL
