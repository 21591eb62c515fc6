"""A run that stops moving says what it waits on instead of a growing ETA; phases show counts (issue 36.7).

Times are given to the display (``now``), never waited for: each line is checked at a known instant.
"""

from __future__ import annotations

import io
import re
import time

from ragrade.progress import STALL_S, Progress, note_requests
from ragrade.progress_phases import Phase, current_phase, phase


def _display() -> Progress:
    return Progress("exam take", aggregate=True, mode="plain", stream=io.StringIO(), interval=0)


def test_waiting_requests_replace_the_rate_and_eta_once_nothing_moves() -> None:
    with _display() as shown:
        shown.advance("p1", 0, 100)
        shown.advance("p1", 40, 100)
        note_requests(asked=16)
        t0 = time.monotonic()
        moving = shown.status_line(t0 + 5)
        assert moving is not None and re.search(r"exam take: 40/100 \(40%\) [\d.]+/s ETA \S+ failed=0", moving)
        stalled = shown.status_line(t0 + 130)
        assert stalled is not None and "ETA" not in stalled and "/s " not in stalled.split(";")[0]
        assert re.fullmatch(
            r"exam take: 40/100 \(40%\) failed=0; waiting on 16 requests for 02:(09|10) \(none answered yet\)", stalled
        ), stalled
        note_requests(answered=4)  # an answer: moving again, with the requests' own count
        t1 = time.monotonic()
        again = shown.status_line(t1 + 1)
        assert again is not None and "waiting on" not in again and "12 waiting" in again
        later = shown.status_line(t1 + STALL_S + 1)
        assert later is not None and "waiting on 12 requests for 00:3" in later and "(4 answered before)" in later
        note_requests(answered=12)


def test_items_left_and_nothing_waiting_says_nothing_finished() -> None:
    with _display() as shown:
        shown.advance("p1", 3, 10)
        t0 = time.monotonic()
        line = shown.status_line(t0 + 65)
        assert line is not None and re.fullmatch(
            r"exam take: 3/10 \(30%\) failed=0; nothing finished for 01:0[45]", line
        )
        shown.advance("p1", 7, 10)  # all done: nothing is stalled
        assert "nothing finished" not in str(shown.status_line(time.monotonic() + 65))


def test_a_phase_replaces_the_setup_status_with_counts_and_an_eta() -> None:
    with _display() as shown:
        shown.status("loading models, indexes and data ...")
        t0 = time.monotonic()
        assert str(shown.status_line(t0)).startswith("exam take: loading models, indexes and data ... (00:0")
        with phase("retrieving passages for 3,000 questions x 18 retrieval settings", 54_000) as counted:
            assert current_phase() is counted
            start = counted.started
            assert counted.line(start + 1) == (
                "retrieving passages for 3,000 questions x 18 retrieval settings: 0/54,000 (0%) 0.0/s ETA --:--"
            )
            counted.advance(1_200)
            line = shown.status_line(start + 30)  # 1,200 in 30 s: 40/s, 52,800 left: 22:00
            assert line == (
                "exam take: retrieving passages for 3,000 questions x 18 retrieval settings: "
                "1,200/54,000 (2%) 40.0/s ETA 22:00"
            ), line
            with phase("loading hf/Qwen2.5-7B") as inner:  # nested and not countable: its time
                assert shown.status_line(inner.started + 65) == "exam take: loading hf/Qwen2.5-7B (01:05)"
            assert current_phase() is counted
        assert current_phase() is None
        done = shown.status_line(time.monotonic() + 2)
        assert done is not None and re.fullmatch(r"exam take: the first items are running \(00:0[12]\)", done)


def test_a_phase_that_stops_moving_says_so_instead_of_an_eta() -> None:
    ph = Phase("embedding 3,000 texts with minilm", total=3000, started=100.0)
    ph.moved = 100.0
    assert ph.line(110.0) == "embedding 3,000 texts with minilm: 0/3,000 (0%) 0.0/s ETA --:--"
    ph.done, ph.moved = 512, 120.0
    assert ph.line(130.0) == "embedding 3,000 texts with minilm: 512/3,000 (17%) 17.1/s ETA 02:26"
    assert (
        ph.line(120.0 + STALL_S + 10)
        == "embedding 3,000 texts with minilm: 512/3,000 (17%); nothing finished for 00:40"
    )


def test_the_terminal_bar_shows_a_phase_counts_first() -> None:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=80, force_terminal=True)
    with Progress("exam take", aggregate=True, mode="tty", console=console, status="loading ...") as shown:
        with phase("retrieving passages for 3,000 questions x 18 retrieval settings", 54_000) as counted:
            counted.advance(1_200)
            shown.status("loading ...")  # redraws the overall bar
            bar = shown.render()
        assert "1,200/54,000 (2%)" in bar and "ETA" in bar and "retriev" in bar, bar
        assert all(len(row) <= 80 for row in bar.splitlines())
