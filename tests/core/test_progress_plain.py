"""The progress display: plain lines without a terminal (while the work runs), 80-column bars on one."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from tests.run.fakes import make_exam, repo_env
from tests.support.openai_server import Faults, OpenAIServer

from ragrade.errors import ConfigError
from ragrade.progress import (
    Progress,
    Snapshot,
    counting_requests,
    interval_s,
    listen_requests,
    note_failed,
    note_requests,
    resolve_mode,
    short_label,
)

LONG_ID = (
    "llm=openai/meta-llama/Llama-3.1-8B-Instruct|retriever=hybrid|k=3|icl=2|chunker=recursive-200|prompt=default"
    "|method=auto|query=multi-query|post=rerank+compress"
)
LINE = re.compile(
    r"^exam take: (\d+)/(\d+) \((\d+)%\) ([\d.]+)/s ETA (\d\d:\d\d|--:--) failed=(\d+)"
    r"(?:; requests: (\d+) answered \([\d.]+/s\)(?:, \d+ waiting(?: \(~\d\d:\d\d\))?)?)?$"
)


def test_the_line_says_done_total_rate_eta_and_failures() -> None:
    assert Snapshot("exam take", 30, 120, 0.5, 2).line() == "exam take: 30/120 (25%) 0.5/s ETA 03:00 failed=2"
    assert Snapshot("judge claims", 7, 0, 0.0, 0).line() == "judge claims: 7 0.0/s ETA --:-- failed=0"
    assert Snapshot("index embed", 90, 90, 3.0, 0).line() == "index embed: 90/90 (100%) 3.0/s ETA 00:00 failed=0"
    assert Snapshot("x", 0, 7200, 1.0, 0).line().endswith("ETA 2:00:00 failed=0")


def test_plain_mode_prints_a_line_every_interval_and_one_at_the_end() -> None:
    stream = io.StringIO()
    with Progress("exam take", aggregate=True, mode="plain", stream=stream, interval=0.05, status="loading") as p:
        time.sleep(0.12)
        assert re.search(r"^exam take: loading \(00:00\)$", stream.getvalue(), re.M), stream.getvalue()
        p.advance("a", 10, 40)  # a resumed pipeline: 10 rows already done, not counted in the rate
        p.advance("b", 0, 40)
        p.advance("a", 5, 40)
        note_failed(3)
        time.sleep(0.12)
        during = stream.getvalue()
    lines = stream.getvalue().splitlines()
    beats = [m for m in map(LINE.match, during.splitlines()) if m]
    assert beats and beats[-1].group(1, 2, 3, 6) == ("15", "80", "19", "3")
    last = LINE.match(lines[-1])
    assert last is not None and last.group(1, 2, 6) == ("15", "80", "3")
    assert 0 < float(last.group(4)) < 5 / 0.1  # 5 fresh rows in more than 0.1 s
    assert len(lines) <= len(during.splitlines()) + 1
    time.sleep(0.1)
    assert stream.getvalue().splitlines() == lines  # the heartbeat stopped with the block


def test_the_key_reported_last_and_a_restarted_step() -> None:
    p = Progress("robust noise", mode="plain", stream=io.StringIO(), interval=10)
    p.update("generate", 0, 10)
    p.update("generate", 10, 10)
    p.update("judge", 4, 10)
    snap = p.snapshot()
    assert (snap.label, snap.done, snap.total) == ("robust noise judge", 4, 10)
    p.update("judge", 10, 10)
    assert str(p.status_line(now=p._mark + 5.0)).startswith("robust noise judge: 10/10 (100%)")
    quiet_for = p.status_line(now=p._mark + 12.0)  # the interval (10 s) passed with no report: say what runs
    assert quiet_for == "robust noise judge done (10/10 (100%)); the next step has run for 00:12"
    p.update("generate", 2, 10)  # the next model: the step starts again
    assert p.snapshot().done == 2 and p._tasks["generate"].start_done == 0
    assert p.snapshot().rate > 0  # reported after its first batch only: counted from the previous report


def test_a_step_reported_at_zero_after_loading_counts_its_rate_from_then() -> None:
    p = Progress("robust noise", mode="plain", stream=io.StringIO(), interval=10)
    for model in range(2):  # the first step, then the step again for the next model
        p.update("judge" if model else "generate", 5, 5)
        p._mark -= 60.0  # a model that took a minute to load since the previous report
        p.update("generate", 0, 100)  # the step's first report: nothing done yet
        start = p._tasks["generate"].started
        assert start > p._mark - 1.0  # its clock starts at this report, not at the previous one
        p.update("generate", 20, 100)
        snap = p.snapshot(now=start + 10.0)
        assert snap.label == "robust noise generate" and snap.rate == pytest.approx(2.0)  # 20 in 10 s
        assert snap.eta() == pytest.approx(40.0)  # the loading minute is not in the ETA


def test_quiet_and_an_error_print_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    with Progress("judge", quiet=True, stream=stream, interval=0.01) as p:
        p.update("exact", 3, 3)
    assert p.mode == "quiet" and stream.getvalue() == ""
    monkeypatch.setenv("RAGRADE_PROGRESS", "off")
    assert resolve_mode(stream=io.StringIO()) == "quiet"
    monkeypatch.setenv("RAGRADE_PROGRESS", "plain")
    assert resolve_mode() == "plain"
    with pytest.raises(RuntimeError), Progress("judge", mode="plain", stream=stream, interval=0) as p:
        p.update("exact", 1, 3)
        raise RuntimeError("boom")
    assert stream.getvalue() == ""  # the error is the last line, not a progress line


def test_interval_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGRADE_PROGRESS_INTERVAL", raising=False)
    assert interval_s() == 10.0
    monkeypatch.setenv("RAGRADE_PROGRESS_INTERVAL", "0.25")
    assert interval_s() == 0.25
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("RAGRADE_PROGRESS_INTERVAL", bad)
        with pytest.raises(ConfigError, match="RAGRADE_PROGRESS_INTERVAL"):
            interval_s()


def test_short_labels() -> None:
    assert short_label(LONG_ID) == "hybrid k3 icl2 recursiv\u2026"
    assert short_label("llm=offline/student|retriever=bm25|k=3|icl=0") == "bm25 k3 icl0 student"
    assert short_label("judge answers: a very long configuration name") == "judge answers: \u2026ion name"
    assert len(short_label("x" * 200)) == 24 and short_label("short") == "short"


def test_terminal_bars_fit_80_columns_and_name_the_pipeline_once() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=True)
    with Progress("exam take", aggregate=True, mode="tty", console=console, status="loading models ...") as p:
        assert "loading models ..." in p.render() and "0/0" not in p.render()
        for k in range(3):
            p.advance(LONG_ID.replace("k=3", f"k={k}"), 0, 123456)
        p.advance(LONG_ID, 0, 123456)
        p.advance(LONG_ID, 100000, 123456)
        p.advance(LONG_ID.replace("k=3", "k=0"), 99999, 123456)
        note_failed(12345)
        p.advance(LONG_ID, 1, 123456)
        shown = p.render()
    lines = [line for line in shown.splitlines() if line.strip()]
    assert len(lines) == 3, shown  # the overall bar and the two pipelines running
    assert all(cell_len(line) <= 80 for line in lines), [cell_len(line) for line in lines]
    assert "200000/493824 (41%)" in lines[0] and "failed=12345" in lines[0]
    assert out.getvalue().count(f"exam take: {LONG_ID}") == 1  # the full name, once, above the bars


@pytest.mark.slow
@pytest.mark.usefixtures("isolated_llm_env")
def test_exam_take_without_a_terminal_prints_progress_while_it_runs(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 24)
    env = {**repo_env(), "RAGRADE_PROGRESS_INTERVAL": "0.2", "RAGRADE_PROGRESS": "auto"}
    faults = Faults(rate=0.25, kinds=["500"], seed=3, paths=["/v1/chat/completions"])
    with OpenAIServer(responder=lambda body: "B", latency_s=0.08, faults=faults) as srv:
        cmd = [
            sys.executable, "-m", "ragrade", "exam", "take", str(exam), "--out", str(tmp_path / "run"),
            "--llm", "openai/test-model", "--llm-base-url", srv.base_url, "--retrievers", "closed",
            "--method", "generate", "--shard-size", "2", "--concurrency", "1", "--max-retries", "0",
        ]  # fmt: skip
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None and proc.stdout is not None
        stderr = proc.stderr
        seen: list[tuple[str, bool]] = []  # (line, the process was still running when it arrived)

        def read() -> None:
            for line in iter(stderr.readline, ""):
                seen.append((line.rstrip("\n"), proc.poll() is None))

        reader = threading.Thread(target=read)
        reader.start()
        proc.wait(timeout=120)
        reader.join(timeout=10)
        proc.stdout.close()
        stderr.close()
    err = "\n".join(line for line, _ in seen)
    assert proc.returncode == 3, err  # more than 5% of the requests failed: results kept, exit 3
    live = [m for line, running in seen if running and (m := LINE.match(line))]
    assert live, err  # at least one progress line while the work was running
    assert all(m.group(2) == "24" for m in live)
    counts = [int(m.group(1)) for m in live]
    assert counts == sorted(counts) and 0 < max(counts) <= 24
    final = [m for line, _ in seen if (m := LINE.match(line))][-1]
    assert final.group(1, 2, 3) == ("24", "24", "100") and int(final.group(6)) > 0, err
    assert int(final.group(6)) == srv.faults_injected["500"], (final.group(0), srv.faults_injected)
    assert final.group(7) == "24", final.group(0)  # every request answered (a failure too) is counted once


def test_the_job_display_fits_80_columns() -> None:
    from ragrade.job.progress import RichDisplay

    console = Console(file=io.StringIO(), width=80, force_terminal=True)
    shown = RichDisplay(console=console)
    with shown:
        shown.stage_start(6, 14, "judge")
        shown._last = 0.0  # the work bar updates at most ten times a second
        shown.sub_progress(f"judge answers: {LONG_ID}", 123456, 999999)
        out = io.StringIO()
        Console(file=out, width=80, force_terminal=True, color_system=None).print(shown.progress.get_renderable())
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) == 2 and all(cell_len(line) <= 80 for line in lines), lines
    assert "123456/999999" in lines[1] and "\u2026" in lines[1]


def test_requests_are_shown_as_they_are_answered_and_replace_the_setup_status() -> None:
    stream = io.StringIO()
    with Progress("exam take", aggregate=True, mode="plain", stream=stream, interval=10, status="loading") as p:
        assert p.status_line() == "exam take: loading (00:00)"
        note_requests(asked=16)
        line = str(p.status_line())
        assert line.startswith("exam take: loading (") and line.endswith("; requests: 0 answered (0.0/s), 16 waiting")
        p.advance("a", 0, 40)
        note_requests(answered=3)  # no row done yet, but requests are: the counts replace "loading"
        line = str(p.status_line())
        assert line.startswith("exam take: 0/40 (0%) 0.0/s ETA --:-- failed=0; requests: 3 answered (")
        assert re.search(r"/s\), 13 waiting \(~\d\d:\d\d\)$", line) and "loading" not in line
        note_requests(asked=-13)  # dropped by a stop: not waiting any more
        assert str(p.status_line()).endswith("/s)")
    note_requests(asked=5, answered=5)  # after the block: not this display's
    assert p._requests.asked == 3 and p._requests.answered == 3
    quiet = Progress("judge", mode="plain", stream=io.StringIO(), interval=10)
    quiet.update("exact", 1, 3)
    assert "requests" not in quiet.snapshot().line()  # a display that saw no request says nothing of them


def test_the_requests_waiting_come_with_the_time_they_take_at_the_rate_so_far() -> None:
    from ragrade.progress import RequestCounts

    counts = RequestCounts(asked=16, answered=4, first=100.0)
    assert counts.text(108.0) == "requests: 4 answered (0.5/s), 12 waiting (~00:24)"  # 12 / 0.5 per second
    assert RequestCounts(asked=16, answered=0, first=100.0).text(108.0) == "requests: 0 answered (0.0/s), 16 waiting"
    assert RequestCounts(asked=4, answered=4, first=100.0).text(108.0) == "requests: 4 answered (0.5/s)"


def test_counting_requests_reports_running_totals_up_to_the_cap_and_only_inside_the_block() -> None:
    seen: list[int] = []
    with counting_requests(seen.append, cap=4):
        note_requests(asked=5)  # asked, not answered: nothing to report
        for _ in range(3):
            note_requests(answered=1)
        note_requests(answered=2)
    note_requests(answered=1)
    assert seen == [1, 2, 3, 4]
    with counting_requests(None):  # nothing counted, nothing fails
        note_requests(answered=1)

    def broken(asked: int, answered: int) -> None:
        raise RuntimeError("a display bug")

    stop = listen_requests(broken)
    try:
        note_requests(answered=1)  # a failing listener never reaches the LLM layer
    finally:
        stop()


@pytest.mark.usefixtures("isolated_llm_env")
def test_the_llm_layer_counts_each_request_sent_once_and_no_cached_reply() -> None:
    from ragrade.llm import GenerationRequest, Message, create_llm, generate

    events: list[tuple[int, int]] = []
    stop = listen_requests(lambda asked, answered: events.append((asked, answered)))
    try:
        with OpenAIServer(responder=lambda body: "B", faults=Faults(script=["ok", "500"])) as srv:
            llm = create_llm("openai/test-model", base_url=srv.base_url, max_retries=0, concurrency=1)
            reqs = [GenerationRequest(messages=(Message("user", f"q{i}"),)) for i in range(3)]
            first = generate(llm, [reqs[0], reqs[0], reqs[1]])  # the same request twice is sent once
            asked_first = sum(a for a, _ in events)
            answered_first = sum(n for _, n in events)
            events.clear()
            generate(llm, reqs)  # q0 from the cache; q1 failed before: asked again; q2 new
    finally:
        stop()
    assert [c.ok for c in first] == [True, True, False]
    assert (asked_first, answered_first) == (2, 2)  # a failed request is answered too (missing, not waiting)
    assert (sum(a for a, _ in events), sum(n for _, n in events)) == (2, 2)
