"""Phases of a command: work before (or between) its counted items, announced to every progress display.

A phase says what is being loaded or computed (``loading hf/MODEL``, ``retrieving passages for 3,000
questions x 18 retrieval settings``) and, where the work is countable, how many units of how many are done,
so a display shows counts, a rate and an ETA instead of a bare ``loading ...``. Phases are process-wide, like
the failure counts of :mod:`ragrade.progress`: a stage announces one with :func:`phase` without a display in
its signature, and every display shows the innermost one running (:func:`current_phase`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

_phase_lock = threading.Lock()
_phases: list[Phase] = []
_ended = [0.0]  # when the last phase ended (monotonic)
STALL_S = 30.0  # nothing finished and no request answered for this long: a display says what it waits on


def clock(seconds: float) -> str:
    """``mm:ss`` (``h:mm:ss`` from an hour on)."""
    whole = max(0, round(seconds))
    h, rest = divmod(whole, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


@dataclass(eq=False)  # phases are told apart by identity (two may have the same text)
class Phase:
    """One piece of work a command does before (or between) its counted items: ``text`` says what (``loading
    hf/MODEL``), ``done`` of ``total`` units (0: not countable) since ``started``."""

    text: str
    total: int = 0
    done: int = 0
    started: float = field(default_factory=time.monotonic)
    moved: float = 0.0  # when a unit was last done (the start before the first)

    def __post_init__(self) -> None:
        self.moved = self.moved or self.started

    def advance(self, n: int = 1, text: str | None = None) -> None:
        """``n`` more units done; ``text``: what is being done now (e.g. the next model's name)."""
        with _phase_lock:
            self.done += int(n)
            if n:
                self.moved = time.monotonic()
            if text is not None:
                self.text = text

    def _parts(self, now: float | None) -> tuple[str, str]:
        """``(counts, pace)``: ``1,200/54,000 (2%)`` and ``40.0/s ETA 22:00`` (``ETA --:--`` before the first
        unit; ``nothing finished for mm:ss`` once no unit was done for :data:`STALL_S` seconds); not countable:
        ``("", mm:ss)``, the time it has run."""
        now = time.monotonic() if now is None else now
        with _phase_lock:
            done, total, moved = self.done, self.total, self.moved
        spent = max(0.0, now - self.started)
        if total <= 0:
            return "", clock(spent)
        counts = f"{done:,}/{total:,} ({100.0 * done / total:.0f}%)"
        if done < total and now - moved >= STALL_S:
            return counts, f"nothing finished for {clock(now - moved)}"
        rate = done / spent if done > 0 and spent > 0 else 0.0
        eta = clock(max(0, total - done) / rate) if rate > 0 else "--:--"
        return counts, f"{rate:.1f}/s ETA {eta}"

    def line(self, now: float | None = None) -> str:
        """``text: done/total (pct) rate/s ETA mm:ss`` when countable (``; nothing finished for mm:ss`` instead
        of the rate once stalled), else ``text (mm:ss)``."""
        counts, pace = self._parts(now)
        if not counts:
            return f"{self.text} ({pace})"
        return f"{self.text}: {counts}" + ("; " if pace.startswith("nothing") else " ") + pace

    def bar_text(self, now: float | None = None) -> str:
        """For a terminal bar, which cuts the end of what does not fit: the counts first, then the text
        (``1,200/54,000 (2%) 40.0/s ETA 22:00 retrieving passages ...``; ``01:05 loading hf/MODEL``)."""
        counts, pace = self._parts(now)
        return " ".join(part for part in (counts, pace, self.text) if part)


@contextmanager
def phase(text: str, total: int = 0) -> Iterator[Phase]:
    """Announce ``text`` (``total`` units, 0: not countable) to every display while the block runs; the block
    advances the :class:`Phase` it is given. Phases nest: a display shows the innermost one."""
    current = Phase(text, total=max(0, int(total)))
    with _phase_lock:
        _phases.append(current)
    try:
        yield current
    finally:
        with _phase_lock:
            if current in _phases:
                _phases.remove(current)
            _ended[0] = time.monotonic()


def current_phase() -> Phase | None:
    """The innermost phase running in this process (None: none)."""
    with _phase_lock:
        return _phases[-1] if _phases else None


def phase_activity(now: float | None = None) -> float:
    """``now`` while a phase runs, else when the last one ended (0.0: none yet): a display that waits on no
    item counts a phase's work as movement (see :meth:`ragrade.progress.Progress.stalled`)."""
    with _phase_lock:
        if _phases:
            return time.monotonic() if now is None else now
        return _ended[0]


__all__ = [
    "STALL_S",
    "Phase",
    "clock",
    "current_phase",
    "phase",
    "phase_activity",
]
