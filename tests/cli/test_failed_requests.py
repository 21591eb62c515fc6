"""Broken LLM servers against every LLM-using verb: failures are missing, counted, re-asked; exit codes say what.

The server is the real local OpenAI-compatible one (tests/support/openai_server.py) with fault injection:
down (nothing listens), HTTP 500 / 401 for everything, garbage replies, hangs, and recovery after N requests.
Exit codes: 0 done; 2 unusable backend or bad input (one line); 3 too many failed requests (rerun resumes).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.support.openai_server import Faults, OpenAIServer, always, dead_base_url, recovers_after

from ragrade.cli.main import main
from ragrade.exam.files import Question, write_exam
from ragrade.llm.failures import FailureTally

N = 6
FAST = ["--max-retries", "0", "--concurrency", "2"]
CHAT = "/v1/chat/completions"


pytestmark = pytest.mark.usefixtures("isolated_llm_env")


def _exam(tmp_path: Path, n: int = N) -> Path:
    qs = [
        Question(
            id=f"q{i}",
            question=f"Which value does setting {i} take?",
            choices=[f"v{i}a", f"v{i}b", f"v{i}c", f"v{i}d"],
            answer=1,
            doc_id=f"d{i}",
            chunk_id=f"d{i}#0",
            source="s",
            tags={"topic": "t"},
            context=f"setting {i} takes v{i}b",
        )
        for i in range(n)
    ]
    path = tmp_path / "exam.jsonl"
    write_exam(path, qs)
    return path


def _answer_b(body: dict[str, Any]) -> str:
    return "B"


def _take(exam: Path, srv_url: str, out: Path, *extra: str) -> list[str]:
    return [
        "exam", "take", str(exam), "--out", str(out), "--llm", "openai/test-model", "--retrievers", "closed",
        "--method", "generate", "--llm-base-url", srv_url, *FAST, "--timeout", "2", *extra,
    ]  # fmt: skip


def test_exam_take_failures_are_missing_exit_3_and_the_rerun_asks_exactly_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exam, out = _exam(tmp_path), tmp_path / "run"
    with OpenAIServer(responder=_answer_b, faults=recovers_after(2)) as srv:
        assert main(_take(exam, srv.base_url, out)) == 3
        err = capsys.readouterr().err
        assert "2 of 6 LLM requests failed" in err and "rerun the same command" in err and err[-1] == "\n"
        df = pd.read_parquet(out / "responses.parquet")
        failed = df[df["error"].notna()]
        assert len(failed) == 2 and failed["correct"].isna().all()  # missing, never wrong
        summary = pd.read_csv(out / "summary.csv").iloc[0]
        assert (summary["n"], summary["n_errors"], summary["accuracy"]) == (4, 2, 1.0)
        from ragrade.irt.io import load_responses

        assert load_responses(out).counts["n_missing_correct"] == 2  # IRT masks them
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["missing"] == 2 and manifest["status"].startswith("incomplete: 2 failed requests missing")
        srv.reset_counters()
        assert main(_take(exam, srv.base_url, out)) == 0  # the server recovered
        assert srv.requests_by_path[CHAT] == 2  # exactly the failed items were asked again
        assert "(2 new rows)" in capsys.readouterr().out
        df = pd.read_parquet(out / "responses.parquet")
        assert df["error"].isna().all() and (df["correct"] == 1).all()
        manifest = json.loads((out / "manifest.json").read_text())
        assert (manifest["status"], manifest["missing"]) == ("complete", 0)
        srv.reset_counters()
        assert main(_take(exam, srv.base_url, out)) == 0
        assert srv.requests_total == 0  # nothing left to ask


def test_exam_take_401_stops_at_once_with_the_key_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exam = _exam(tmp_path)
    with OpenAIServer(faults=always("401")) as srv:
        args = _take(exam, srv.base_url, tmp_path / "run")
        assert main([*args, "--concurrency", "1"]) == 2
        assert srv.requests_total == 1  # no request after the rejection
    err = capsys.readouterr().err
    assert "the server rejected the API key" in err and "sk-test-key" not in err
    df = pd.read_parquet(tmp_path / "run" / "responses.parquet")
    assert df["correct"].isna().all() and df["error"].str.contains("rejected the API key").all()


@pytest.mark.parametrize("fault", ["500", "malformed"])
def test_exam_take_dead_500_or_garbage_server_is_unreachable_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str
) -> None:
    exam = _exam(tmp_path, 12)
    with OpenAIServer(faults=always(fault)) as srv:
        assert main([*_take(exam, srv.base_url, tmp_path / "run"), "--concurrency", "1"]) == 2
        assert srv.requests_total == 5  # declared unreachable after its first 5 requests failed; the rest not sent
    assert "server unreachable" in capsys.readouterr().err


def test_exam_take_nothing_listening_and_hang_stop_early(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exam = _exam(tmp_path, 10)
    assert main(_take(exam, dead_base_url(), tmp_path / "down")) == 2
    assert "server unreachable" in capsys.readouterr().err
    with OpenAIServer(faults=always("hang", hang_s=5)) as srv:
        t0 = time.monotonic()
        code = main([*_take(exam, srv.base_url, tmp_path / "hang"), "--timeout", "0.5", "--concurrency", "1"])
        elapsed = time.monotonic() - t0
        assert code == 2 and srv.requests_total == 2  # two requests sent alone got no reply in time: stopped
    assert elapsed < 10.0  # 2 requests of 0.5 s, then stopped (plus slack); not 10 requests x 60 s
    err = capsys.readouterr().err
    assert "server unreachable or too slow: no reply within 0.5s (--timeout) to 2 requests sent one at a time" in err
    assert "rerun with --timeout 2 --concurrency 1" in err and err.count("\n") == 1


def test_a_failed_validation_writes_nothing_and_never_blocks_the_corrected_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exam, out = _exam(tmp_path), tmp_path / "run"
    bad = ["exam", "take", str(exam), "--out", str(out), "--llm", "offline/student", "--retrievers", "bm25"]
    assert main([*bad, "--index", f"r={tmp_path / 'nowhere'}"]) == 2
    assert "ragrade: error:" in capsys.readouterr().err
    assert not out.exists()  # validated before the run directory was created
    assert main(["exam", "take", str(exam), "--out", str(out), "--llm", "nosuch/model"]) == 2
    assert not out.exists()
    assert main(["exam", "take", str(exam), "--out", str(out), "--llm", "offline/student", "--concurrency", "0"]) == 2
    assert main(["exam", "take", str(exam), "--out", str(out), "--llm", "offline/student", "--external", "x=nope"]) == 2
    assert not out.exists()
    assert (
        main(["exam", "take", str(exam), "--out", str(out), "--llm", "offline/student", "--retrievers", "closed"]) == 0
    )


def test_a_run_dir_holding_only_failures_accepts_other_settings(tmp_path: Path) -> None:
    exam, out = _exam(tmp_path), tmp_path / "run"
    assert main([*_take(exam, dead_base_url(), out)]) == 2  # every request failed: nothing finished
    with OpenAIServer(responder=_answer_b) as srv:
        assert main([*_take(exam, srv.base_url, out), "--prompt", str(_prompt(tmp_path))]) == 0


def _prompt(tmp_path: Path) -> Path:
    p = tmp_path / "p.txt"
    p.write_text("Question: {question}\n{choices}\nAnswer with the letter.", encoding="utf-8")
    return p


def test_max_failed_threshold_is_configurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exam = _exam(tmp_path)
    with OpenAIServer(responder=_answer_b, faults=recovers_after(1)) as srv:
        assert main([*_take(exam, srv.base_url, tmp_path / "a"), "--max-failed", "0.5"]) == 0  # 1 of 6 allowed
    monkeypatch.setenv("RAGRADE_MAX_FAILED", "0")
    with OpenAIServer(responder=_answer_b, faults=recovers_after(1)) as srv:
        assert main(_take(exam, srv.base_url, tmp_path / "b")) == 3


def test_failure_tally_rules() -> None:
    t = FailureTally()
    for i in range(40):
        t.add("p1", "m1", "HTTP 500" if i < 2 else None)  # 5% exactly: allowed
        t.add("p2", "m2", None)
    t.check("rerun", 0.05)
    t.add("p2", "m2", "HTTP 500")  # p2: 1 of 41
    t.check("rerun", 0.05)
    dead = FailureTally()
    dead.add("p", "m", "HTTP 500")
    with pytest.raises(Exception, match="every request of m failed"):
        dead.check("rerun", 1.0)


def test_llm_probe_against_a_dead_server_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["llm", "probe", "--llm", "openai/test-model", "--llm-base-url", dead_base_url(), "--max-retries", "0"])
    assert code == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["generate"]["ok"] is False and "generate: the request failed" in captured.err
    with OpenAIServer() as srv:
        assert main(["llm", "probe", "--llm", "openai/test-model", "--llm-base-url", srv.base_url]) == 0


def test_credentials_in_the_base_url_reach_no_written_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exam, out = _exam(tmp_path), tmp_path / "run"
    with OpenAIServer(responder=_answer_b) as srv:
        url = srv.base_url.replace("http://", "http://user:PASSWORD1@") + "?api_key=SECRET2"
        assert main(_take(exam, url, out)) == 0
        assert main([*_take(exam, url, tmp_path / "run2"), "--index", "r=/nowhere", "--retrievers", "bm25"]) == 2
    shown = capsys.readouterr()
    for path in [p for p in out.rglob("*") if p.is_file()]:
        data = path.read_bytes()
        assert b"PASSWORD1" not in data and b"SECRET2" not in data, path
    assert "PASSWORD1" not in shown.out + shown.err and "SECRET2" not in shown.out + shown.err


def test_qa_answer_failures_missing_and_retried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qa = tmp_path / "qa.jsonl"
    from ragrade.qa.files import QAItem, write_qa

    items = [QAItem(id=f"a{i}", question=f"What is item {i}?", reference=f"thing {i}",
                    reference_context=f"item {i} is thing {i}", chunk_id=f"c{i}", doc_id=f"d{i}", source="s")
             for i in range(N)]  # fmt: skip
    write_qa(qa, items)
    out = tmp_path / "ans"
    args = ["qa", "answer", str(qa), "--out", str(out), "--llm", "openai/test-model", "--retrievers", "closed"]
    with OpenAIServer(responder=lambda b: "thing", faults=recovers_after(3)) as srv:
        assert main([*args, "--llm-base-url", srv.base_url, *FAST]) == 3
        summary = pd.read_csv(out / "summary.csv").iloc[0]
        assert (summary["n_errors"], summary["n_answered"]) == (3, 3)
        srv.reset_counters()
        assert main([*args, "--llm-base-url", srv.base_url, *FAST]) == 0
        assert srv.requests_by_path[CHAT] == 3
    capsys.readouterr()


def test_fault_injecting_server_shapes() -> None:
    with OpenAIServer(faults=Faults(script=["401", "ok"])) as srv:
        import urllib.error
        import urllib.request

        req = urllib.request.Request(f"{srv.base_url}/chat/completions", data=b'{"messages": []}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=5)
        assert info.value.code == 401
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200
