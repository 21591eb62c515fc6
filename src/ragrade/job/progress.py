"""One progress display for a whole job: rich bars on a terminal, one line per stage otherwise.

Built on :mod:`ragrade.progress` (the display every command uses): the same interval
(``$RAGRADE_PROGRESS_INTERVAL``), line format, 80-column bars and failure count.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

from ragrade.progress import BAR_WIDTH, LABEL_WIDTH, clock, failed_so_far, interval_s, resolve_mode, short_label
from ragrade.progress_phases import current_phase

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID


WARNING_KEY = "warning"  # a stage summary's line for the terminal (e.g. fewer questions than requested)
NOTE_KEY = "note"  # a stage summary's line of information (e.g. what the corpus loader left out, counted)


def _brief(summary: Mapping[str, object]) -> str:
    parts = []
    for key, value in [kv for kv in summary.items() if kv[0] not in (WARNING_KEY, NOTE_KEY)][:4]:
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            text = f"{value:.3f}" if isinstance(value, float) else str(value)
            parts.append(f"{key}={text[:60]}")
    return ", ".join(parts)


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"


class Display:
    """Plain display: one line per finished or reused stage on ``stream`` (stderr by default).

    While a stage runs longer than ``interval`` seconds (default ``$RAGRADE_PROGRESS_INTERVAL``, else 10;
    0: none), a line every ``interval`` seconds says what it is doing: items done / total, rate, the time
    left at that rate (ETA) and the requests failed so far in the stage.
    """

    def __init__(self, stream: TextIO | None = None, interval: float | None = None) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval_s() if interval is None else interval
        self._stage: tuple[int, int, str, float] | None = None
        self._work: tuple[str, int, int] | None = None  # what, done, total
        self._first: tuple[str, int, float] | None = None  # what, done, when at its first report (for the rate)
        self._failed0 = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc: object) -> None:
        self._end_stage()

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _end_stage(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self._thread = None
        with self._lock:
            self._stage, self._work, self._first = None, None, None

    def _heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            line = self.status_line()
            if line:
                self._line(line)

    def status_line(self, now: float | None = None) -> str | None:
        """The running stage's progress line (None when no stage runs)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._stage is None:
                return None
            i, n, name, started = self._stage
            head = f"[{i + 1:>2}/{n}] {name:<28} running for {_duration(now - started)}"
            if self._work is None:
                running = current_phase()  # what the stage is loading or computing before its items count
                return head if running is None else f"{head}: {running.line(now)}"
            what, done, total = self._work
            first = self._first
        counts = f"{done}/{total} ({100.0 * done / total:.0f}%)" if total else f"{done}"
        base, since = (first[1], first[2]) if first is not None and first[0] == what else (0, started)
        rate = (done - base) / (now - since) if now > since and done > base else 0.0
        left = clock((total - done) / rate) if rate > 0 and total else "--:--"
        failed = failed_so_far() - self._failed0
        return f"{head}: {what} {counts} {rate:.1f}/s ETA {left} failed={failed}"

    def stage_start(self, i: int, n: int, name: str) -> None:
        """A stage begins (a plain display starts its heartbeat)."""
        self._end_stage()
        with self._lock:
            self._stage = (i, n, name, time.monotonic())
            self._failed0 = failed_so_far()
        if type(self) is Display and self.interval > 0:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._heartbeat, args=(self._stop,), daemon=True)
            self._thread.start()

    def stage_done(self, i: int, n: int, name: str, seconds: float, summary: Mapping[str, object]) -> None:
        """A stage finished."""
        self._end_stage()
        brief = _brief(summary)
        self._line(f"[{i + 1:>2}/{n}] {name:<28} done in {seconds:7.1f}s" + (f"  ({brief})" if brief else ""))
        note = summary.get(NOTE_KEY)
        if isinstance(note, str) and note:
            self._line(f"ragrade: {name}: {note}")
        warning = summary.get(WARNING_KEY)
        if isinstance(warning, str) and warning:
            self._line(f"ragrade: warning: {name}: {warning}")

    def stage_reused(self, i: int, n: int, name: str, seconds: float | None) -> None:
        """A stage was reused from an earlier run."""
        self._end_stage()
        self._line(f"[{i + 1:>2}/{n}] {name:<28} reused (unchanged config)")

    def sub_progress(self, what: str, done: int, total: int) -> None:
        """Progress inside the running stage (shown by the plain display's heartbeat lines)."""
        with self._lock:
            if self._first is None or self._first[0] != what or done < self._first[1]:
                self._first = (what, done, time.monotonic())
            self._work = (what, done, total)


class RichDisplay(Display):
    """A rich display: the job's stages as one bar, the running stage's work as another (80 columns)."""

    def __init__(self, stream: TextIO | None = None, console: Console | None = None) -> None:
        super().__init__(stream)
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column

        self.console = console or Console(file=self.stream)
        self.progress = Progress(
            SpinnerColumn(table_column=Column(width=1, no_wrap=True)),
            TextColumn("{task.description}", table_column=Column(width=LABEL_WIDTH, no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=BAR_WIDTH, table_column=Column(width=BAR_WIDTH, no_wrap=True)),
            MofNCompleteColumn(table_column=Column(no_wrap=True, overflow="ellipsis")),
            TimeElapsedColumn(table_column=Column(no_wrap=True)),
            console=self.console,
            transient=True,
        )
        self.job_task: TaskID | None = None
        self.sub_task: TaskID | None = None
        self._last = 0.0

    def __enter__(self) -> RichDisplay:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _line(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False)

    def stage_start(self, i: int, n: int, name: str) -> None:
        """Show the stage on the job bar and reset the work bar."""
        if self.job_task is None:
            self.job_task = self.progress.add_task("job", total=n)
        self.progress.update(self.job_task, completed=i, description=short_label(f"job: {name}"))
        if self.sub_task is not None:
            self.progress.remove_task(self.sub_task)
        self.sub_task = self.progress.add_task(short_label(name), total=None)

    def stage_done(self, i: int, n: int, name: str, seconds: float, summary: Mapping[str, object]) -> None:
        """Print the stage's line and advance the job bar."""
        super().stage_done(i, n, name, seconds, summary)
        if self.job_task is not None:
            self.progress.update(self.job_task, completed=i + 1)

    def sub_progress(self, what: str, done: int, total: int) -> None:
        """Update the work bar (at most ten times a second)."""
        now = time.monotonic()
        if self.sub_task is None or (now - self._last < 0.1 and done < total):
            return
        self._last = now
        self.progress.update(self.sub_task, description=short_label(what), completed=done, total=total)


def make_display(quiet: bool = False) -> Display:
    """Rich on a terminal (stderr), plain lines otherwise; ``quiet`` (or ``RAGRADE_PROGRESS=off``): the stage
    lines only."""
    mode = resolve_mode(quiet)
    if mode == "tty":
        return RichDisplay()
    return Display(interval=0 if mode == "quiet" else None)


__all__ = ["Display", "RichDisplay", "make_display"]
