"""What scoring by prompt log-probabilities costs on this server, said once when it is slow.

Some servers compute prompt log-probabilities one request at a time and slowly (llama-cpp-python's server
answered 3 log-likelihood requests of an exam in 20 minutes, an ETA of hours, where ``--method generate``
took two minutes for the whole exam). :class:`LoglikCost` measures the run time each request adds, from
the first request sent to the first replies (with the requests in flight that is what the run waits for
each one), and after :data:`FIRST` replies at :data:`SLOW_S` seconds or more each it gives one warning:
the measured seconds per request, the run time that rate means for the requests seen so far, and the flag
that switches to generation. It never switches: generation scores the letter the model picks, a different
number, so only the user may choose it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
log = logging.getLogger("ragrade.llm")

#: replies measured before the warning is decided
FIRST = 3
#: seconds of run time per log-likelihood request from which the method is worth a word
SLOW_S = 10.0
#: seconds without a request in flight after which the next request starts a new measurement
IDLE_S = 5.0


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class LoglikCost:
    """Seconds per log-likelihood request of one backend (thread-safe); see the module.

    The clock starts at the first request sent after the backend was idle for :data:`IDLE_S` seconds (a
    backend shared by several runs of one process measures each burst of work, not the pause between them).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.started: float | None = None
        self.last = 0.0  # when a request was last sent or answered
        self.sent = 0  # requests sent since the clock started
        self.done = 0  # of those, answered or failed
        self.replies = 0  # of those, answered
        self.told = False
        self._lock = threading.Lock()

    def on_send(self) -> None:
        """A log-likelihood request is about to be sent (cached answers are never sent)."""
        with self._lock:
            now = time.monotonic()
            if self.started is None or (self.sent == self.done and now - self.last > IDLE_S):
                self.started, self.sent, self.done, self.replies = now, 0, 0, 0
            self.sent += 1
            self.last = now

    def on_reply(self, ok: bool, method: str) -> str | None:
        """Count a reply; the warning (once) when the first :data:`FIRST` show a slow method, else None."""
        with self._lock:
            if self.started is None:
                return None
            self.done += 1
            self.last = time.monotonic()
            if not ok or self.told:
                return None
            self.replies += 1
            if self.replies < FIRST:
                return None
            elapsed = self.last - self.started
            per = elapsed / self.replies
            self.told = True  # decided once, slow or not
            if per < SLOW_S:
                return None
            left = self.sent - self.done
            return (
                f"{self.name}: scoring by prompt log-probabilities ({method}) takes about {_duration(per)} per request "
                f"on this server ({self.replies} replies in {_duration(elapsed)}; the {left} requests sent and not "
                f"answered yet need about {_duration(left * per)} more at this rate, and the progress ETA follows "
                "it); --method generate asks for one generated letter per question instead, without prompt "
                "log-probabilities, often far faster on servers that compute them one request at a time; it "
                "scores the letter the model picks, a different number, so the run keeps its method; `ragrade llm "
                "probe` times one request of each kind"
            )

    async def watch(self, call: Awaitable[T], method: Callable[[], str]) -> T:
        """Await one log-likelihood request (``call``: the limiter's call, an outcome with ``error``), counting it;
        the warning, when its reply decides one, goes to the log (standard error)."""
        self.on_send()
        outcome = await call
        note = self.on_reply(getattr(outcome, "error", None) is None, method())
        if note is not None:
            log.warning("%s", note)
        return outcome


__all__ = ["FIRST", "IDLE_S", "SLOW_S", "LoglikCost"]
