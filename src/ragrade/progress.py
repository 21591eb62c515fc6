"""Progress of a long command: rich bars on a terminal, a plain line every few seconds otherwise.

Stages never import this display: they take a callback ``progress(label, done, total)`` (absolute counts)
or, for pipeline grids, ``progress(pipeline, n, total)`` (``n`` more rows of ``total``), and the command
passes :meth:`Progress.update` or :meth:`Progress.advance`. Failed items are counted where results are
kept (:func:`note_failed`, called by the grid executor, the robustness runner, the judges and the exam
writer), so every display can say how many failed so far without another parameter in every signature.

Modes (:func:`resolve_mode`): ``tty`` (stderr is a terminal): rich bars whose columns fit 80 characters,
a short label (``key=value|...`` pipeline ids are shown by their values, long ones ellipsised in the
middle) and each full name printed once above the bars; ``plain`` (a CI job, ``nohup``, a notebook):
a line every ``$RAGRADE_PROGRESS_INTERVAL`` seconds (default 10) and one at the end,
``label: done/total (pct) rate/s ETA mm:ss failed=K``; ``quiet``: nothing (``ragrade --quiet``,
``RAGRADE_PROGRESS=off``). Until the first item finishes the display shows what is being set up
(``loading models ...``) instead of ``0/0``.

LLM requests are counted where they are answered (:func:`note_requests`, called by the LLM layer for
every request sent to a model, not for replies read from the cache), so every display also says how many
requests were answered since it started, at what rate, and how many are still waiting
(``; requests: 45 answered (0.7/s), 16 waiting``): a step whose items finish in batches shows its requests
moving while a batch runs, and requests already running are shown instead of the setup status. A stage
that sends one request per item counts its items as the requests are answered
(:func:`counting_requests`), so its counts, rate and ETA move with every answer, not only after each batch.

Work before the first item (loading a model, retrieving every batch ahead, embedding texts) is announced as a
phase (:func:`phase`: what it does, with a count where the work is countable), so the line says
``exam take: retrieving passages ...: 1,200/54,000 (2%) 40.0/s ETA 22:00`` or ``loading hf/MODEL (01:05)``
instead of a bare ``loading ...``. Phases, like failures, are process-wide: the stages announce them
without a display in their signatures, and every display shows the innermost one running. A run whose
requests stop being answered says it is waiting (``waiting on 16 requests for 02:10``) rather than showing a
rate falling to zero and a growing ETA, once nothing has moved for :data:`STALL_S` seconds.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from ragrade.errors import ConfigError
from ragrade.progress_phases import STALL_S, Phase, clock, current_phase, phase, phase_activity

INTERVAL_ENV = "RAGRADE_PROGRESS_INTERVAL"
MODE_ENV = "RAGRADE_PROGRESS"
DEFAULT_INTERVAL = 10.0
WIDTH = 80
LABEL_WIDTH = 24
BAR_WIDTH = 10
_HIDDEN = ("none", "n/a", "default", "auto")
Mode = Literal["tty", "plain", "quiet"]
ProgressFn = Callable[[str, int, int], None]
RequestListener = Callable[[int, int], None]  # (requests asked, requests answered) since the last call

_failed_lock = threading.Lock()
_failed = [0]
_requests_lock = threading.Lock()
_listeners: list[RequestListener] = []
log = logging.getLogger("ragrade.progress")


def note_failed(n: int = 1) -> None:
    """Count ``n`` more failed items (requests that still failed after their retries) in this process."""
    if n:
        with _failed_lock:
            _failed[0] += int(n)


def failed_so_far() -> int:
    """Failed items counted by :func:`note_failed` since the process started."""
    with _failed_lock:
        return _failed[0]


def note_requests(asked: int = 0, answered: int = 0) -> None:
    """``asked`` more requests handed to a model (negative: asked but dropped unanswered, e.g. by a stop),
    ``answered`` more answered by it (a success or a final failure); tells every listener
    (:func:`counting_requests`, the displays). Called by the LLM layer, in its event loop's thread; a
    listener that fails is logged and never fails the request."""
    if not (asked or answered):
        return
    with _requests_lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(int(asked), int(answered))
        except Exception:  # a display must never cost a request its result
            log.debug("progress listener failed", exc_info=True)


def listen_requests(listener: RequestListener) -> Callable[[], None]:
    """Call ``listener(asked, answered)`` for every :func:`note_requests`; returns the function that stops it."""
    with _requests_lock:
        _listeners.append(listener)

    def stop() -> None:
        with _requests_lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return stop


@contextmanager
def counting_requests(report: Callable[[int], None] | None, cap: int | None = None) -> Iterator[None]:
    """While the block runs, ``report(n)`` each time a request is answered: ``n`` requests answered since the
    block began (at most ``cap``). A stage that sends one request per item reports its items with it while a
    batch runs (``report=None``: nothing is counted)."""
    if report is None:
        yield
        return
    lock = threading.Lock()
    answered = [0]

    def listener(_asked: int, n: int) -> None:
        if n <= 0:
            return
        with lock:  # reports in order, also when requests are answered on several threads
            answered[0] += n
            report(answered[0] if cap is None else min(answered[0], cap))

    stop = listen_requests(listener)
    try:
        yield
    finally:
        stop()


def interval_s() -> float:
    """Seconds between plain progress lines: ``$RAGRADE_PROGRESS_INTERVAL`` (0: only the last line), else 10."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ConfigError(f"${INTERVAL_ENV} must be a number of seconds >= 0, got '{raw}'")
    return value


def resolve_mode(quiet: bool = False, stream: TextIO | None = None) -> Mode:
    """``quiet`` when asked (``quiet`` or ``$RAGRADE_PROGRESS`` off), ``tty`` on a terminal, else ``plain``."""
    forced = os.environ.get(MODE_ENV, "").strip().lower()
    if quiet or forced in ("off", "quiet", "0", "none"):
        return "quiet"
    if forced in ("plain", "tty"):
        return "plain" if forced == "plain" else "tty"
    if forced not in ("", "auto"):
        raise ConfigError(f"${MODE_ENV} must be auto, tty, plain or off, got '{forced}'")
    target = stream if stream is not None else sys.stderr
    return "tty" if target.isatty() else "plain"


def short_label(name: str, width: int = LABEL_WIDTH) -> str:
    """``name`` in at most ``width`` characters, ellipsised in the middle.

    A pipeline id (``llm=...|retriever=bm25|k=3|icl=0|...``) is shown by its values (``bm25 k3 icl0
    recursive-200 Llama-3.1-8B``: default values left out, the model by its last name, last) and cut at the
    end, where the model is.
    """
    if "|" in name and "=" in name:
        parts, model = [], ""
        for part in name.split("|"):
            key, _, value = part.partition("=")
            if key == "llm":
                model = value.rstrip("/").rsplit("/", 1)[-1]
            elif value not in _HIDDEN:
                parts.append(f"{key}{value}" if key in ("k", "icl") else value)
        name = " ".join([*parts, model]).strip()
        return name if len(name) <= width else name[: width - 1] + "\u2026"
    if len(name) <= width:
        return name
    head = (width - 1) * 2 // 3
    return name[:head] + "\u2026" + name[len(name) - (width - 1 - head) :]


@dataclass
class _Task:
    label: str
    done: int = 0
    total: int = 0
    start_done: int = 0  # done at the first report (resumed work is not counted in the rate)
    started: float = field(default_factory=time.monotonic)
    rich_id: object = None


@dataclass
class RequestCounts:
    """The LLM requests a display saw: asked of a model, answered by it, and when the first was asked."""

    asked: int = 0
    answered: int = 0
    first: float | None = None

    def rate(self, now: float) -> float:
        """Requests answered per second since the first was asked."""
        if self.first is None or self.answered <= 0 or now <= self.first:
            return 0.0
        return self.answered / (now - self.first)

    @property
    def waiting(self) -> int:
        """Requests asked and not yet answered."""
        return max(0, self.asked - self.answered)

    def text(self, now: float) -> str:
        """``requests: 45 answered (0.7/s), 16 waiting (~00:23)`` (waiting: asked, not yet answered; the time
        they take at the rate so far, once there is one)."""
        waiting = max(0, self.asked - self.answered)
        rate = self.rate(now)
        left = f" (~{clock(waiting / rate)})" if waiting and rate > 0 else ""
        return f"requests: {self.answered} answered ({rate:.1f}/s)" + (f", {waiting} waiting{left}" if waiting else "")


@dataclass
class Snapshot:
    """What a progress line shows: counts, the rate since the first report and the failures so far, and the
    LLM requests (``requests``: their text, when the display saw any)."""

    label: str
    done: int
    total: int
    rate: float
    failed: int
    requests: str | None = None
    stalled: str | None = None  # what a run that has not moved for STALL_S seconds waits on

    def eta(self) -> float | None:
        """Seconds left at the current rate (None when unknown)."""
        if self.total <= 0 or self.rate <= 0:
            return None
        return max(0, self.total - self.done) / self.rate

    def counts(self) -> str:
        """``done/total (pct)``, or ``done`` when the total is unknown."""
        if self.total <= 0:
            return f"{self.done}"
        return f"{self.done}/{self.total} ({100.0 * self.done / self.total:.0f}%)"

    def line(self) -> str:
        """``label: done/total (pct) rate/s ETA mm:ss failed=K`` (then ``; requests: ...`` when there are); a
        stalled run: ``label: done/total (pct) failed=K; waiting on N requests for mm:ss ...``, no rate or ETA."""
        if self.stalled:
            return f"{self.label}: {self.counts()} failed={self.failed}; {self.stalled}"
        eta = self.eta()
        left = clock(eta) if eta is not None else ("00:00" if self.total and self.done >= self.total else "--:--")
        line = f"{self.label}: {self.counts()} {self.rate:.1f}/s ETA {left} failed={self.failed}"
        return f"{line}; {self.requests}" if self.requests else line


class Progress:
    """The progress of one command (a context manager).

    ``name``: the command's label (``exam take``). ``aggregate``: the line sums every key (a grid of
    pipelines, each reported by :meth:`advance`); otherwise it shows the key reported last (the running
    step, e.g. ``generate`` then ``judge``). ``mode``: see :func:`resolve_mode` (default: from ``quiet``,
    the environment and the stream). ``console``: a rich console for the bars (tests give one of 80
    columns writing to a string). ``status``: what is set up first (see :meth:`status`).
    """

    def __init__(
        self,
        name: str,
        *,
        aggregate: bool = False,
        quiet: bool = False,
        mode: Mode | None = None,
        stream: TextIO | None = None,
        interval: float | None = None,
        console: Any = None,
        status: str | None = None,
    ) -> None:
        self.name = name
        self.aggregate = aggregate
        self.stream = stream
        self.mode: Mode = mode or resolve_mode(quiet, stream)
        self.interval = interval_s() if interval is None else interval
        self._console = console
        self._tasks: dict[str, _Task] = {}
        self._last: str | None = None
        self._status: str | None = status
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rich: Any = None
        self._overall: object = None
        self._failed0 = failed_so_far()
        self._extra_failed = 0
        self._started = self._mark = time.monotonic()  # _mark: the last report (a new step starts there)
        self._printed: str | None = None  # the last plain line (the last line is not repeated)
        self._requests = RequestCounts()
        self._unlisten: Callable[[], None] | None = None
        self._moved = self._started  # an item finished or a request was answered (see stalled)
        self.stall_s = STALL_S

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> Progress:
        self._failed0, self._started = failed_so_far(), time.monotonic()
        self._mark = self._moved = self._started
        if self.mode != "quiet":
            self._unlisten = listen_requests(self._on_requests)
        if self.mode == "tty":
            self._start_rich()
        if self.mode == "tty" or (self.mode == "plain" and self.interval > 0):
            self._thread = threading.Thread(target=self._heartbeat, name="ragrade-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(last_line=exc_type is None)

    def close(self, last_line: bool = True) -> None:
        """Stop the display and print the last line (not in quiet mode, after an error or before any report)."""
        self._stop.set()
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self._thread = None
        if last_line and self.mode != "quiet" and self._tasks:
            line = self.snapshot().line()
            if line != self._printed:
                self._print(line)
        if self._rich is not None:
            self._rich.stop()
            self._rich = None

    # --- reports from the stages ------------------------------------------------------------------------------
    def status(self, text: str | None) -> None:
        """What is being set up (``loading models ...``): shown instead of ``0/0`` until the first item is done
        (the plain display's lines say it, with the time spent, every interval)."""
        with self._lock:
            self._status = text
        if self._rich is not None and self._overall is not None:
            self._rich.update(self._overall, counts=self._counts())

    def update(self, key: str, done: int, total: int) -> None:
        """``key`` has ``done`` of ``total`` items of this run finished (absolute counts, from 0).

        A step first reported with nothing done starts now (what came before, such as loading a model, is not
        in its rate); one first reported after its first batch is taken to have started at the previous report
        (or at the start), so that it still gets a rate.
        """
        with self._lock:
            began = time.monotonic() if int(done) == 0 else self._mark
            task = self._tasks.get(key)
            if task is None:
                task = self._tasks[key] = _Task(key, started=began)
            elif done < task.done:  # the step starts again (the next model of a robustness run)
                task.start_done, task.started = 0, began
            if int(done) != task.done:
                self._moved = time.monotonic()
            task.done, task.total = int(done), int(total)
            self._last, self._mark = key, time.monotonic()
        self._refresh(key)

    def advance(self, key: str, n: int, total: int) -> None:
        """``key`` finished ``n`` more of its ``total`` items (the grid runners' callback).

        The first report of a key gives the items it already had (a resumed run), not counted in the rate.
        """
        with self._lock:
            task = self._tasks.get(key)
            if task is None:
                task = self._tasks[key] = _Task(key, done=int(n), start_done=int(n))
            else:
                task.done += int(n)
                if n:
                    self._moved = time.monotonic()
            task.total = int(total)
            self._last, self._mark = key, time.monotonic()
        self._refresh(key)

    def failed(self, n: int) -> None:
        """``n`` more failed items that :func:`note_failed` did not see (e.g. another process's)."""
        with self._lock:
            self._extra_failed += int(n)

    def _on_requests(self, asked: int, answered: int) -> None:
        """Count the requests of :func:`note_requests` (the LLM layer, any thread)."""
        with self._lock:
            req = self._requests
            if req.first is None and asked > 0:
                req.first = time.monotonic()
            if asked > 0 and req.waiting == 0:  # a new wave of requests: its wait starts now
                self._moved = time.monotonic()
            req.asked += asked
            req.answered += answered
            if answered > 0:
                self._moved = time.monotonic()

    def _requests_text(self, now: float) -> str | None:
        with self._lock:
            return self._requests.text(now) if self._requests.first is not None else None

    def _started_work(self) -> bool:
        """True once an item finished or a request was answered (the setup status is then replaced)."""
        with self._lock:
            return self._requests.answered > 0 or any(t.done > t.start_done for t in self._tasks.values())

    def _setup(self, status: str, now: float) -> str:
        """The setup line before the first item: ``status (mm:ss)``, or, once the phases that set the run up
        (:func:`phase`) have ended, ``the first items are running (mm:ss)``: the time since they ended."""
        ended = phase_activity(now)
        if ended > self._started:
            return f"the first items are running ({clock(now - ended)})"
        return f"{status} ({clock(now - self._started)})"

    def stalled(self, now: float | None = None) -> str | None:
        """What a run that has not moved for :attr:`stall_s` seconds (no item finished, no request answered)
        waits on: ``waiting on 16 requests for 02:10 (45 answered before)``, or ``nothing finished for 02:10``
        while items are left and no request is waiting; None while it moves (or has nothing left)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            quiet_for = now - max(self._moved, phase_activity(now))
            waiting, answered = self._requests.waiting, self._requests.answered
            left = any(t.done < t.total for t in self._tasks.values())
        if quiet_for < self.stall_s:
            return None
        if waiting:
            before = f" ({answered} answered before)" if answered else " (none answered yet)"
            return f"waiting on {waiting} request{'' if waiting == 1 else 's'} for {clock(quiet_for)}{before}"
        return f"nothing finished for {clock(quiet_for)}" if left else None

    def stage(self, prefix: str = "") -> ProgressFn:
        """An absolute-count callback whose keys get ``prefix`` (e.g. a model's name)."""
        return lambda key, done, total: self.update(f"{prefix}{key}", done, total)

    # --- what is shown ----------------------------------------------------------------------------------------
    def snapshot(self, now: float | None = None) -> Snapshot:
        """The counts of the line: every key summed (aggregate) or the key reported last."""
        now = time.monotonic() if now is None else now
        failed = failed_so_far() - self._failed0 + self._extra_failed
        with self._lock:
            if self.aggregate or self._last is None:
                tasks = list(self._tasks.values())
                label = self.name
            else:
                tasks = [self._tasks[self._last]]
                label = f"{self.name} {self._last}"
            done = sum(t.done for t in tasks)
            total = sum(t.total for t in tasks)
            fresh = sum(t.done - t.start_done for t in tasks)
            since = min((t.started for t in tasks), default=now)
        rate = fresh / (now - since) if fresh > 0 and now > since else 0.0
        return Snapshot(label, done, total, rate, failed, self._requests_text(now), self.stalled(now))

    def status_line(self, now: float | None = None) -> str | None:
        """The plain line now: the setup status before the first item, else the counts (None: nothing yet).

        When the step reported last has finished and nothing was reported for an interval, the line says so
        and how long the next step (e.g. loading the embedding model) has run.
        """
        now = time.monotonic() if now is None else now
        started = self._started_work()
        requests = self._requests_text(now)
        running = current_phase()
        if running is not None:  # what is loaded or computed now, counted where it can be
            line = f"{self.name}: {running.line(now)}"
            return f"{line}; {requests}" if requests else line
        with self._lock:
            status, mark = self._status, self._mark
            last = self._tasks.get(self._last) if self._last is not None else None
        if status and not started:
            line = f"{self.name}: {self._setup(status, now)}"
            stalled = self.stalled(now)
            if stalled and self._requests.waiting:
                return f"{line}; {stalled}"
            return f"{line}; {requests}" if requests else line
        snap = self.snapshot(now)
        if not self.aggregate and last is not None and 0 < last.total <= last.done and now - mark >= self.interval:
            line = f"{snap.label} done ({snap.counts()}); the next step has run for {clock(now - mark)}"
            return f"{line}; {requests}" if requests else line
        if not self._tasks:
            return f"{self.name}: {requests}" if requests else None
        return snap.line()

    def render(self, width: int = WIDTH) -> str:
        """The bars as text ``width`` columns wide (what a terminal shows; for tests and logs)."""
        from rich.console import Console

        if self._rich is None:
            return ""
        import io

        out = io.StringIO()
        Console(file=out, width=width, force_terminal=True, color_system=None).print(self._rich.get_renderable())
        return out.getvalue()

    # --- internals --------------------------------------------------------------------------------------------
    def _print(self, text: str) -> None:
        if self._rich is not None:
            self._rich.console.print(text, highlight=False, markup=False, soft_wrap=True)
            return
        print(text, file=self.stream if self.stream is not None else sys.stderr, flush=True)

    def _heartbeat(self) -> None:
        """Plain: a line every interval; terminal: the overall bar's rate, ETA and failures twice a second."""
        while not self._stop.wait(0.5 if self.mode == "tty" else self.interval):
            if self.mode == "tty":
                rich, overall = self._rich, self._overall
                if rich is not None and overall is not None:
                    rich.update(overall, counts=self._counts())
                continue
            line = self.status_line()
            if line:
                self._print(line)
                self._printed = line

    def _start_rich(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn
        from rich.progress import Progress as RichProgress
        from rich.table import Column

        console = self._console or Console(file=self.stream if self.stream is not None else sys.stderr)
        self._rich = RichProgress(
            SpinnerColumn(table_column=Column(width=1, no_wrap=True)),
            TextColumn("{task.description}", table_column=Column(width=LABEL_WIDTH, no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=BAR_WIDTH, table_column=Column(width=BAR_WIDTH, no_wrap=True)),
            TextColumn("{task.fields[counts]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
            console=console,
            transient=True,
            auto_refresh=self._console is None,
        )
        self._rich.start()
        self._overall = self._rich.add_task(short_label(self.name), total=None, counts=self._status or "starting")

    def _counts(self) -> str:
        """The overall bar's text: the setup status before the first item, else counts, ETA and failures (then
        the requests answered, when the display saw requests)."""
        started = self._started_work()
        running = current_phase()
        if running is not None:
            return running.bar_text()
        with self._lock:
            status, req = self._status, self._requests
            answered, waiting = req.answered, req.waiting
            requests = req.first is not None
        if status and not started:
            shown = self._setup(status, time.monotonic())
            return f"{shown} ({waiting} requests waiting)" if waiting else shown
        snap = self.snapshot()
        if snap.stalled:
            return f"{snap.counts()} failed={snap.failed}; {snap.stalled}"
        eta = snap.eta()
        text = f"{snap.counts()} ETA {clock(eta) if eta is not None else '--:--'} failed={snap.failed}"
        return f"{text} req={answered}" if requests else text

    def _refresh(self, key: str) -> None:
        """Update the bars: the overall one, and the key's own (shown while it runs; its full name printed
        once above the bars when the bar shows a shortened one)."""
        if self._rich is None:
            return
        with self._lock:
            task = self._tasks[key]
            snap = self.snapshot()
            running = task.done > task.start_done or not self.aggregate
            show = running and not (self.aggregate and task.total and task.done >= task.total)
            if task.rich_id is None and show:
                if short_label(key) != key:
                    self._print(f"{self.name}: {key}")
                task.rich_id = self._rich.add_task(short_label(key), total=None, counts="")
        self._rich.update(self._overall, total=snap.total or None, completed=snap.done, counts=self._counts())
        if task.rich_id is not None:
            counts = Snapshot(key, task.done, task.total, 0.0, 0).counts()
            self._rich.update(task.rich_id, total=task.total or None, completed=task.done, counts=counts, visible=show)


__all__ = [
    "DEFAULT_INTERVAL",
    "INTERVAL_ENV",
    "MODE_ENV",
    "STALL_S",
    "Phase",
    "Progress",
    "ProgressFn",
    "RequestCounts",
    "RequestListener",
    "Snapshot",
    "clock",
    "counting_requests",
    "current_phase",
    "failed_so_far",
    "interval_s",
    "listen_requests",
    "note_failed",
    "note_requests",
    "phase",
    "resolve_mode",
    "short_label",
]
