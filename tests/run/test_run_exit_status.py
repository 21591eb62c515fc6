"""The manifest's status is true at every exit, and one signal reads as one interruption.

``exam take`` runs as a subprocess against the local OpenAI-compatible server (tests/support/openai_server.py)
or a fake in-process model; each test stops it one way and reads ``manifest.json``: interrupted after some rows
(``partial: ...``), before the first row finished (``interrupted: ...``), ended at once by a second signal,
or failed by an error after the manifest was written (``failed: ...``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import FakeLLM, make_exam, repo_env
from tests.support.openai_server import OpenAIServer, always

from ragrade import interrupt
from ragrade.cli.main import main
from ragrade.errors import DataError
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.run.manifest import read_manifest
from ragrade.run.store import Journal

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

LINE = re.compile(r"^ragrade: interrupted: (\d+) of (\d+) done \(rows\); rerun the same command to resume$")


class FailingLLM(FakeLLM):
    """Answers its first ``ok`` batches, then raises a DataError (an error that stops the run)."""

    def __init__(self, ok: int) -> None:
        super().__init__(True)
        self.ok = ok
        self.batches = 0

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        self.batches += 1
        if self.batches > self.ok:
            raise DataError("the model's weights file is damaged")
        return await super().aloglikelihood(requests)

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        self.batches += 1
        if self.batches > self.ok:
            raise DataError("the model's weights file is damaged")
        return [Completion(text="samples of amber", usage=Usage(10, 3)) for _ in requests]  # free-text answers


def make_failing_llm() -> FakeLLM:
    return FailingLLM(ok=2)


def _take(exam: Path, out: Path, *extra: str) -> list[str]:
    return ["exam", "take", str(exam), "--out", str(out), "--retrievers", "closed", "--shard-size", "4", *extra]


def _server_take(exam: Path, out: Path, url: str) -> list[str]:
    return [
        sys.executable, "-m", "ragrade", *_take(exam, out), "--llm", "openai/test-model", "--llm-base-url", url,
        "--method", "generate", "--concurrency", "2", "--max-retries", "0", "--timeout", "30",
    ]  # fmt: skip


def _journaled(out: Path) -> int:
    if not (out / "journal.sqlite").exists():
        return 0
    try:
        with Journal(out / "journal.sqlite") as j:
            return j.count()
    except Exception:  # created but not initialised yet
        return 0


def _status(out: Path) -> str:
    return str(json.loads((out / "manifest.json").read_text())["status"])


def test_an_error_after_the_manifest_was_written_says_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 24)
    assert main([*_take(exam, out, "--llm", "py/tests.run.test_run_exit_status:make_failing_llm")]) == 2
    assert "the model's weights file is damaged" in capsys.readouterr().err
    manifest = read_manifest(out)
    assert manifest["status"] == "failed: DataError: the model's weights file is damaged"
    assert manifest["finished"] is None and manifest["failed"]
    # a command refused before it writes (another model on a finished run) leaves the folder's manifest alone
    done = tmp_path / "done"
    assert main([*_take(exam, done, "--llm", "py/tests.run.fakes:make_llm")]) == 0
    before = (done / "manifest.json").read_bytes()
    assert main([*_take(exam, done, "--llm", "py/tests.run.fakes:make_slow_llm")]) == 2
    assert (done / "manifest.json").read_bytes() == before and _status(done) == "complete"


def test_adaptive_and_qa_runs_say_failed_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragrade.qa.files import QAItem, write_qa

    exam, llm = tmp_path / "exam.jsonl", "py/tests.run.test_run_exit_status:make_failing_llm"
    questions = make_exam(exam, 24)
    out = tmp_path / "adaptive"
    assert main([*_take(exam, out, "--llm", llm, "--adaptive", "--budget", "40")]) == 2
    assert _status(out) == "failed: DataError: the model's weights file is damaged"
    qa = tmp_path / "qa.jsonl"
    write_qa(qa, [
        QAItem(id=q.id, question=q.question, reference=q.choices[q.answer], reference_context=q.context,
               chunk_id=q.chunk_id, doc_id=q.doc_id)
        for q in questions
    ])  # fmt: skip
    out = tmp_path / "qa"
    assert (
        main(["qa", "answer", str(qa), "--out", str(out), "--retrievers", "closed", "--llm", llm, "--shard-size", "4"])
        == 2
    )
    assert _status(out) == "failed: DataError: the model's weights file is damaged"
    capsys.readouterr()


def test_the_same_signal_twice_within_a_moment_is_one_interruption(monkeypatch: pytest.MonkeyPatch) -> None:
    """The handler itself: a repeat within DUPLICATE_S is ignored, a later one ends the process at once."""

    def exit_now(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", exit_now)
    monkeypatch.setattr(os, "write", lambda fd, data: len(data))
    wrote: list[str] = []
    interrupt.reset()
    try:
        with interrupt.on_forced_exit(lambda: wrote.append("status")):
            with pytest.raises(interrupt.Interrupted):
                interrupt._on_signal(signal.SIGINT, None)  # no event loop runs: raised at once
            interrupt._on_signal(signal.SIGINT, None)  # the same signal delivered again at once: nothing more
            assert wrote == []
            interrupt._first["at"] -= interrupt.DUPLICATE_S  # a person's second Ctrl-C, a moment later
            with pytest.raises(SystemExit) as ended:
                interrupt._on_signal(signal.SIGINT, None)
            assert ended.value.code == 130 and wrote == ["status"]
    finally:
        interrupt.reset()


@pytest.mark.slow
def test_one_sigint_from_timeout_is_one_interruption_and_the_manifest_says_partial(tmp_path: Path) -> None:
    """`timeout -s INT` signals the command, then its process group: the command receives the signal twice."""
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 48)
    with OpenAIServer(responder=lambda body: "B", latency_s=0.15) as srv:
        proc = subprocess.Popen(_server_take(exam, out, srv.base_url), env=repo_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while _journaled(out) < 8:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)  # what timeout does: the command ...
        time.sleep(0.005)
        os.killpg(proc.pid, signal.SIGINT)  # ... then its process group
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "again" not in err and "Traceback" not in err
    lines = [x for x in err.splitlines() if "interrupted" in x]
    assert len(lines) == 1 and LINE.match(lines[0]), err
    done = int(LINE.match(lines[0]).group(1))  # type: ignore[union-attr]
    assert _status(out) == f"partial: interrupted after {done} of 48 rows; rerun the same command to finish"


@pytest.mark.slow
def test_interrupted_before_the_first_row_finished(tmp_path: Path) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 8)
    with OpenAIServer(faults=always("hang", hang_s=60)) as srv:
        proc = subprocess.Popen(_server_take(exam, out, srv.base_url), env=repo_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 60
        while srv.requests_by_path["/v1/chat/completions"] < 2:  # the requests hang on the server
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    manifest: dict[str, Any] = read_manifest(out)
    assert manifest["status"] == "interrupted: stopped before the first of 8 rows finished; rerun the same command"
    assert manifest["partial"]["rows"] == 0 and manifest["finished"] is None


@pytest.mark.slow
def test_a_second_signal_ends_at_once_and_the_manifest_says_so(tmp_path: Path) -> None:
    exam, out, mark = tmp_path / "exam.jsonl", tmp_path / "run", tmp_path / "calls"
    make_exam(exam, 16)
    cmd = [sys.executable, "-m", "ragrade", *_take(exam, out, "--llm", "py/tests.run.fakes:make_blocking_llm")]
    proc = subprocess.Popen(cmd, env={**repo_env(), "RAGRADE_TEST_BLOCK_MARK": str(mark)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not mark.exists() or len(mark.read_text().splitlines()) < 2:  # the second call has begun
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.4)  # the first stop waits for the model's call; a person presses Ctrl-C again
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted again, stopped at once" in err, err
    assert re.fullmatch(
        r"partial: stopped at once by a second signal \(\d+ of 16 done \(rows\)\); rerun the same command to finish",
        _status(out),
    ), _status(out)
