"""Every phase that sends LLM requests shows its counts while they run, in plain lines (no terminal).

Each verb runs in this process against the local OpenAI-compatible server slowed down
(``latency_s``), with ``RAGRADE_PROGRESS=plain`` and a small ``RAGRADE_PROGRESS_INTERVAL``. Every
line written to stderr is recorded with the number of chat requests the server had received by then,
so a test can tell a line written while the phase still had requests to send from one written at its end.
"""

from __future__ import annotations

import io
import itertools
import json
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_failed_requests_verbs import _chunks as _valve_chunks
from tests.cli.test_failed_requests_verbs import _which
from tests.run.fakes import make_exam
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

CHAT = "/v1/chat/completions"
INTERVAL = 0.1
LATENCY = 0.25
COUNTS = re.compile(r": (\d+)/(\d+) \(\d+%\) [\d.]+/s ETA (?:(?:\d+:)?\d\d:\d\d|--:--) failed=\d+")
REQUESTS = re.compile(r"requests: (\d+) answered \([\d.]+/s\)(?:, (\d+) waiting)?")
WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "jasper", "kelp"]


def _chunks(tmp_path: Path, n: int = 6) -> Path:
    return _valve_chunks(tmp_path, WORDS[:n])


def _question_writer(body: dict[str, Any]) -> str:
    """A question per chunk; chunks 1 and 3 are refused (too few survive the first round)."""
    i = _which(body)
    if i in (1, 3):
        return "I'm sorry, but I can't help with writing that question."
    w = WORDS[i]
    return json.dumps(
        {
            "question": f"At what pressure does the {w} valve of the Tern pump open?",
            "choices": [f"{10 + i} bar", f"{40 + i} bar", f"{70 + i} bar", f"{95 + i} bar"],
            "answer": "A",
        }
    )


def _qa_writer(body: dict[str, Any]) -> str:
    i = _which(body)
    return json.dumps({"question": f"When is the {WORDS[i]} seal replaced?", "answer": f"every {3 + i} months"})


@dataclass
class Line:
    text: str
    at: float  # monotonic time it was written
    asked: int  # chat requests the server had received when it was written


class Recorder(io.TextIOBase):
    """stderr that keeps every line with its time and the server's count of chat requests at that time."""

    def __init__(self, server: OpenAIServer) -> None:
        self.server, self.lines, self._part = server, list[Line](), ""
        self._lock = threading.Lock()  # the display's heartbeat thread writes too

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._part += text
            *whole, self._part = self._part.split("\n")
            asked = self.server.requests_by_path[CHAT]
            self.lines += [Line(t, time.monotonic(), asked) for t in whole if t]
        return len(text)

    def during(self, prefix: str, sent: int) -> list[Line]:
        """The lines of ``prefix`` written before the server had received ``sent`` chat requests."""
        return [line for line in self.lines if line.text.startswith(prefix) and line.asked < sent]


def _run(monkeypatch: pytest.MonkeyPatch, server: OpenAIServer, args: list[str]) -> tuple[int, Recorder]:
    monkeypatch.setenv("RAGRADE_PROGRESS", "plain")
    monkeypatch.setenv("RAGRADE_PROGRESS_INTERVAL", str(INTERVAL))
    rec = Recorder(server)
    monkeypatch.setattr(sys, "stderr", rec)
    code = main(args)
    monkeypatch.undo()
    return code, rec


def _live_counts(lines: list[Line], total: int) -> list[int]:
    """The done counts of the lines that show ``done/total`` with some done and some left."""
    found = [(int(m.group(1)), int(m.group(2))) for line in lines if (m := COUNTS.search(line.text))]
    return [done for done, of in found if of == total and 0 < done < total]


def _regular(lines: list[Line], bound_s: float = 2.0) -> None:
    """Lines came at least every ``bound_s`` seconds (the interval is 0.1 s; the bound allows a busy machine)."""
    gaps = [b.at - a.at for a, b in itertools.pairwise(lines)]
    assert lines and max(gaps, default=0.0) < bound_s, gaps


@pytest.mark.slow  # about 6 s: the filters' embedding requests wait too
def test_exam_generate_counts_each_round_while_its_requests_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 1 asks about 6 chunks (2 refused, so too few survive); the top-up round asks about the rest: both
    show their candidates moving, the second with its new target, not ``6/6 done`` and a clock."""
    chunks = _chunks(tmp_path, len(WORDS))
    with OpenAIServer(responder=_question_writer, latency_s=LATENCY) as srv:
        code, rec = _run(monkeypatch, srv, [
            "exam", "generate", str(chunks), "--llm", "openai/test-model", "--llm-base-url", srv.base_url,
            "--out", str(tmp_path / "exam.jsonl"), "--n", "6", "--oversample", "1", "--max-retries", "0",
            "--concurrency", "1", "--embedder", f"openai:test-model@{srv.base_url}",
        ])  # fmt: skip
        sent = srv.requests_by_path[CHAT]
    assert code == 0, [line.text for line in rec.lines]
    assert sent > 6  # a top-up round ran
    during = rec.during("exam generate candidates:", sent)
    first = _live_counts(during, 6)
    top_up = [
        (done, of)
        for line in during
        if (m := COUNTS.search(line.text)) and (done := int(m.group(1))) > 6 and (of := int(m.group(2))) > done
    ]
    assert first and top_up, [line.text for line in rec.lines]
    assert all(REQUESTS.search(line.text) for line in during)
    _regular(during)


def test_qa_generate_counts_its_requests_while_they_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = _chunks(tmp_path)
    with OpenAIServer(responder=_qa_writer, latency_s=LATENCY) as srv:
        code, rec = _run(monkeypatch, srv, [
            "qa", "generate", str(chunks), "--n", "6", "--llm", "openai/test-model", "--llm-base-url",
            srv.base_url, "--out", str(tmp_path / "qa.jsonl"), "--max-retries", "0", "--min-chars", "50",
            "--concurrency", "1",
        ])  # fmt: skip
        sent = srv.requests_by_path[CHAT]
    assert code == 0, [line.text for line in rec.lines]
    during = rec.during("qa generate requests:", sent)
    assert _live_counts(during, 6), [line.text for line in rec.lines]
    _regular(during)
    assert any(line.text.startswith("qa generate triplets: 6/6 (100%)") for line in rec.lines)  # the last line


def test_judge_counts_scores_while_a_batch_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answers = tmp_path / "answers.jsonl"
    rows = [
        {"id": f"a{i}", "query": f"When is the {w} seal replaced?", "answer": f"every {3 + i} months",
         "reference": f"every {3 + i} months", "config": "mine"}
        for i, w in enumerate(WORDS[:6])
    ]  # fmt: skip
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with OpenAIServer(responder=lambda b: '{"score": 4, "reason": "close"}', latency_s=LATENCY) as srv:
        code, rec = _run(monkeypatch, srv, [
            "judge", str(answers), "--metrics", "correctness", "--llm", "openai/test-model", "--llm-base-url",
            srv.base_url, "--max-retries", "0", "--concurrency", "1", "--out", str(tmp_path / "judge"),
        ])  # fmt: skip
        sent = srv.requests_by_path[CHAT]
    assert code == 0 and sent == 6, [line.text for line in rec.lines]
    during = rec.during("judge correctness:", sent)
    assert _live_counts(during, 6), [line.text for line in rec.lines]  # one batch of 6: counted as they arrive
    _regular(during)


def test_robust_run_counts_answers_while_a_batch_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = Path(__file__).resolve().parents[1] / "robust" / "data" / "en_base.jsonl"
    with OpenAIServer(responder=lambda b: "I do not know.", latency_s=LATENCY) as srv:
        code, rec = _run(monkeypatch, srv, [
            "robust", "run", str(data), "--testbed", "noise", "--noise-ratios", "0", "--limit", "4",
            "--llm", "openai/test-model", "--llm-base-url", srv.base_url, "--out", str(tmp_path / "robust"),
            "--max-retries", "0", "--concurrency", "1",
        ])  # fmt: skip
        sent = srv.requests_by_path[CHAT]
    assert code == 0 and sent == 4, [line.text for line in rec.lines]
    during = rec.during("robust noise generate:", sent)
    assert _live_counts(during, 4), [line.text for line in rec.lines]
    _regular(during)


def test_exam_take_shows_requests_running_before_the_first_shard_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One shard of 8 questions: no row is done until all 8 requests are answered, yet the lines say how many
    are answered and waiting instead of "loading ..."."""
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 8)
    with OpenAIServer(responder=lambda body: "B", latency_s=LATENCY) as srv:
        code, rec = _run(monkeypatch, srv, [
            "exam", "take", str(exam), "--out", str(tmp_path / "run"), "--llm", "openai/test-model",
            "--llm-base-url", srv.base_url, "--retrievers", "closed", "--method", "generate", "--shard-size", "8",
            "--concurrency", "1", "--max-retries", "0",
        ])  # fmt: skip
        sent = srv.requests_by_path[CHAT]
    assert code == 0 and sent == 8, [line.text for line in rec.lines]
    during = rec.during("exam take:", sent)
    answered = [(line, int(m.group(1))) for line in during if (m := REQUESTS.search(line.text))]
    running = [line for line, n in answered if 0 < n < 8]
    assert running, [line.text for line in rec.lines]
    assert all(COUNTS.search(line.text) and ": 0/8 (0%)" in line.text for line in running)  # no row done yet
    after = [line.text for line in during if line.at >= running[0].at]
    assert not [text for text in after if "loading" in text]  # requests answered: not "loading ..." any more
    _regular(during)
