"""Without a terminal, a long stage prints a progress line at least every interval."""

from __future__ import annotations

import io
import time

from ragrade.job.progress import Display


def test_plain_display_prints_heartbeat_lines() -> None:
    stream = io.StringIO()
    with Display(stream=stream, interval=0.05) as shown:
        shown.stage_start(2, 5, "sweep")
        shown.sub_progress("answers", 40, 100)
        time.sleep(0.3)
        shown.stage_done(2, 5, "sweep", 0.3, {})
        after = stream.getvalue()
        time.sleep(0.15)
    lines = after.splitlines()
    beats = [line for line in lines if "running for" in line]
    assert len(beats) >= 2, lines
    assert beats[-1].startswith("[ 3/5] sweep") and "answers 40/100 (40%)" in beats[-1] and "/s" in beats[-1]
    assert "ETA" in beats[-1] and "failed=0" in beats[-1]
    assert lines[-1].startswith("[ 3/5] sweep") and "done in" in lines[-1]
    assert stream.getvalue() == after  # no line once the stage is done


def test_status_line_rate_and_time_left() -> None:
    shown = Display(stream=io.StringIO(), interval=0)
    shown.stage_start(0, 1, "index")
    started = shown._stage[3]  # type: ignore[index]
    shown.sub_progress("embed", 0, 90)
    shown._first = ("embed", 0, started)  # the first report came at the start
    shown.sub_progress("embed", 30, 90)
    line = shown.status_line(now=started + 60.0)
    assert line is not None
    assert "running for 1m00s: embed 30/90 (33%) 0.5/s ETA 02:00 failed=0" in line


def test_status_line_names_the_phase_a_stage_is_in_before_its_items_count() -> None:
    from ragrade.progress_phases import phase

    shown = Display(stream=io.StringIO(), interval=0)
    shown.stage_start(3, 10, "exam")
    started = shown._stage[3]  # type: ignore[index]
    assert shown.status_line(now=started + 5.0) == "[ 4/10] exam                         running for 5s"
    with phase("loading hf/MODEL (1 of 2)", total=2):
        line = shown.status_line(now=started + 65.0)
    assert line is not None and line.startswith("[ 4/10] exam")
    assert "running for 1m05s: loading hf/MODEL (1 of 2): 0/2 (0%)" in line
