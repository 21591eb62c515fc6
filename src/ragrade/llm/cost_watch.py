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


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class LoglikCost:
    """Seconds per log-likelihood request of one backend (thread-safe); see the module."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.started: float | None = None
        self.sent = 0
        self.replies = 0
        self.told = False
        self._lock = threading.Lock()

    def on_send(self) -> None:
        """A log-likelihood request is about to be sent (cached answers are never sent)."""
        with self._lock:
            self.sent += 1
            if self.started is None:
                self.started = time.monotonic()

    def on_reply(self, ok: bool, method: str) -> str | None:
        """Count a reply; the warning (once) when the first :data:`FIRST` show a slow method, else None."""
        with self._lock:
            if not ok or self.told or self.started is None:
                return None
            self.replies += 1
            if self.replies < FIRST:
                return None
            elapsed = time.monotonic() - self.started
            per = elapsed / self.replies
            if per < SLOW_S:
                self.told = True  # fast enough: decided once
                return None
            self.told = True
            left = max(0, self.sent - self.replies)
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


__all__ = ["FIRST", "SLOW_S", "LoglikCost"]
