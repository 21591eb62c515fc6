"""What a backend's replies and failures say: how long to wait for a reply, how many requests to keep in flight,
and when to stop sending.

:class:`Pace` keeps the latencies of a backend's recent replies. From them it derives

- the **timeout** of the next request, when the user left ``timeout`` at its default (``learn``): before
  the first reply, the bounded maximum ``timeout_max`` (a slow server's first reply is awaited, not
  abandoned and sent again: the server would go on computing the abandoned copy); afterwards three times
  the slowest recent reply, or three times the queue that the requests in flight would make at a server
  that works one request at a time, never below the default, never above the maximum, and never below
  what a request sent alone has already been shown to need (:meth:`Pace.escalate`). A timeout the user
  gave is used as it is, always;
- the **room** for requests in flight: such a server answers the n-th request in flight after n service
  times, so the in-flight cap stops growing where that queue would no longer be answered within half the
  longest timeout allowed (and stays at one until a few replies have come). The service time is the
  longest recent reply's latency over the requests in flight when it was sent: exact for such a server,
  an underestimate for a parallel one, which only lets the cap grow further;
- the words of a message: the latencies seen, and settings that would work.

:class:`Streak` counts failures in a row that look alike (one :func:`signature`), and the requests they span;
:class:`Watch` keeps three for one backend and says when it is beyond use (the rules are listed in
:mod:`ragrade.llm.limits`, which asks it after every failure and stops sending when it gives a reason).
"""

from __future__ import annotations

import math
import re
import statistics
import threading
from collections import deque

from ragrade.errors import render_settings

UNREACHABLE = "server unreachable"
TOO_SLOW = "server unreachable or too slow"  # contains UNREACHABLE: older readers of the errors still see it
WINDOW = 16  # recent replies the estimates are taken from
MARGIN = 3.0  # a learned timeout: this many times the slowest recent reply (or the queue ahead of a request)
ROOM = 2.0  # the in-flight cap grows while the queue it makes takes at most 1 / ROOM of the longest timeout
SAMPLE = 3  # replies before the in-flight cap grows past one
# a stop reason names settings as ``$name`` (the CLI spells them as flags); a request's error, kept in result
# files, names them in words: the two spellings of the phrases below, each way
_ADVICE_MARKED = re.compile(r"\$timeout ([0-9.]+) \$concurrency ([0-9]+)")
_ADVICE_BARE = re.compile(r"\btimeout set to ([0-9.]+) and concurrency to ([0-9]+)")
_GIVEN_MARKED, _GIVEN_BARE = "($timeout)", "(the timeout given)"
#: what a server that cannot score log-likelihoods leaves to the user (every request's error then)
LETTER_HINT = (
    "set $methods to generate, or allow letter picking with $letter_fallback = true in the [llm_options] table "
    "of a config file (its scores are option letters the model picks, not log-likelihoods)"
)
_LETTER_HINT_BARE = render_settings(LETTER_HINT)


def nice_seconds(value: float) -> float:
    """``value`` rounded up to a figure worth typing: whole tens above 30 s, whole seconds above 3 s, else tenths."""
    step = 10.0 if value > 30 else 1.0 if value > 3 else 0.1
    return round(math.ceil(value / step - 1e-9) * step, 1)


def seconds(value: float) -> str:
    """``value`` for a message: ``75s``, ``4.5s``, ``0.25s``."""
    return f"{value:.0f}s" if value >= 10 else f"{value:.2g}s"


class Pace:
    """Latencies of one backend's recent replies and the timeout and in-flight room they imply (see module).

    Thread-safe: batches on several event loops report to one backend's pace.
    """

    def __init__(self, timeout: float, timeout_max: float, learn: bool) -> None:
        self.timeout = timeout
        self.learn = learn
        self.timeout_max = max(timeout, timeout_max) if learn else timeout
        self.replies = 0  # replies observed in all
        self.floor = timeout  # raised when a request sent alone timed out (learned timeouts only)
        self._recent: deque[tuple[float, int]] = deque(maxlen=WINDOW)  # (latency, requests in flight at its send)
        self._lock = threading.Lock()

    def observe(self, latency_s: float, in_flight: int) -> None:
        """Note a reply that took ``latency_s``, sent while ``in_flight`` requests were in flight (itself included)."""
        with self._lock:
            self.replies += 1
            self._recent.append((max(0.0, latency_s), max(1, in_flight)))

    def _replies(self) -> list[tuple[float, int]]:
        with self._lock:
            return list(self._recent)

    @property
    def slowest(self) -> float | None:
        """The slowest recent reply (seconds), None before the first."""
        recent = self._replies()
        return max(lat for lat, _ in recent) if recent else None

    def _service(self) -> float | None:
        """The longest recent service time: a reply's latency over the requests in flight when it was sent."""
        recent = self._replies()
        return max(lat / n for lat, n in recent) if recent else None

    def request_timeout(self, in_flight: int = 1) -> float:
        """Seconds the next request may take, sent with ``in_flight`` requests in flight (itself included): three
        times the slowest recent reply, or the queue that many requests make at a one-at-a-time server, within
        the bounds (see module)."""
        if not self.learn:
            return self.timeout
        slowest, service = self.slowest, self._service()
        if slowest is None or service is None:
            return self.timeout_max
        need = MARGIN * max(slowest, in_flight * service)
        return min(self.timeout_max, max(self.timeout, self.floor, need))

    def escalate(self, waited: float) -> None:
        """A request sent alone got no reply within ``waited`` seconds: wait twice as long from now on (bounded)."""
        if self.learn:
            self.floor = min(self.timeout_max, max(self.floor, 2.0 * waited))

    def room(self) -> int | None:
        """The most requests in flight whose queue a one-at-a-time server answers within half the longest timeout
        allowed; None until ``SAMPLE`` replies have come (one reply says little of a server whose times vary)."""
        service = self._service()
        if self.replies < SAMPLE or not service:
            return None
        return max(1, int(self.timeout_max / (ROOM * service)))

    def describe(self) -> str:
        """``replies took 48s-75s (median 60s)``, or ``""`` before the first reply."""
        lats = [lat for lat, _ in self._replies()]
        if not lats:
            return ""
        low, high, mid = min(lats), max(lats), statistics.median(lats)
        spread = seconds(high) if math.isclose(low, high, rel_tol=0.05) else f"{seconds(low)}-{seconds(high)}"
        return f"replies took {spread} (median {seconds(mid)})"

    def advice(self, waited: float) -> str:
        """The settings that would work, after requests sent one at a time got no reply within ``waited`` seconds:
        one request at a time, and a timeout of 3 times the slowest reply seen, or a multiple of the wait (twice
        the longest learned timeout, which already is 4 times the default; 4 times a timeout the user gave).
        Names the settings as :mod:`ragrade.errors` does (``$timeout``): the error it ends is raised later."""
        slowest = self.slowest or 0.0
        longer = (2.0 if self.learn else 4.0) * waited
        return f"$timeout {nice_seconds(max(longer, 3.0 * slowest)):g} $concurrency 1"


def stored(reason: str) -> str:
    """A stop reason as a request's error keeps it in result files: no ``$name``, each setting in words
    (``rerun with timeout set to 240 and concurrency to 1``)."""
    text = _ADVICE_MARKED.sub(r"timeout set to \1 and concurrency to \2", reason.replace(_GIVEN_MARKED, _GIVEN_BARE))
    return render_settings(text)


def marked(error: str) -> str:
    """A request's error read back from a result file with the settings of a stop reason marked ``$name`` again
    (the inverse of :func:`stored` for its phrases), for a message the CLI spells with flags."""
    error = error.replace(_GIVEN_BARE, _GIVEN_MARKED).replace(_LETTER_HINT_BARE, LETTER_HINT)
    return _ADVICE_BARE.sub(r"$timeout \1 $concurrency \2", error)


def signature(message: str, status: int | None = None) -> str:
    """What failures that look alike share: ``HTTP 500``, ``connection error``, ``unreadable response``, ..."""
    if status is not None:
        return f"HTTP {status}"
    words = message.replace(":", " ").split()[:2]
    return " ".join(words).lower()


class Streak:
    """Failures in a row with one :func:`signature`: how many rounds, over how many requests, and the last error.

    A round is a failure of a request sent after the previous counted failure was seen: requests that were
    in flight together and failed together (a burst meeting one refusal or one brief outage) count once, so
    the streak measures how long the failures have gone on, not how many requests were in flight.
    """

    def __init__(self) -> None:
        self.signature: str | None = None
        self.count = 0
        self.calls: set[int] = set()
        self.error = ""
        self.mark = -1  # the last request sent when the latest counted failure was seen

    def add(self, sig: str, call: int, error: str, sent: int, latest: int) -> int:
        """Count a failure of request ``call`` (sent as number ``sent``; ``latest``: the last number sent so far)
        unless it is of the round already counted; a different signature starts a new streak. The rounds so far."""
        if sig == self.signature and sent <= self.mark:
            return self.count
        if sig != self.signature:
            self.clear()
            self.signature = sig
        self.count += 1
        self.calls.add(call)
        self.error = error
        self.mark = latest
        return self.count

    @property
    def requests(self) -> int:
        """Distinct requests the streak's counted failures span."""
        return len(self.calls)

    def clear(self) -> None:
        """Forget the streak (a success ended it)."""
        self.signature, self.count, self.error, self.mark = None, 0, "", -1
        self.calls = set()


class Watch:
    """The failure streaks of one backend and the rules that stop it (thread-safe; see :mod:`ragrade.llm.limits`).

    Each method is told of one failure and returns the reason to stop the backend, or None. ``succeeded``:
    the calls of the backend that returned a value so far; ``sent``: the send number of the failed attempt
    (:meth:`send` hands them out), so that a burst of requests in flight together counts as one round.
    """

    def __init__(self, pace: Pace, fail_streak: int, dead_after: int) -> None:
        self.pace = pace
        self.fail_streak, self.dead_after = fail_streak, dead_after
        self._alike = Streak()  # attempts failed alike (server errors, network, garbage)
        self._finals = Streak()  # calls that gave up alike after their retries
        self._lone = Streak()  # requests sent alone that timed out at the longest timeout allowed
        self._sends = 0
        self._lock = threading.Lock()

    def send(self) -> int:
        """The number of an attempt being sent (1, 2, ...)."""
        with self._lock:
            self._sends += 1
            return self._sends

    def success(self) -> None:
        """A call returned a value: every streak ends."""
        with self._lock:
            for streak in (self._alike, self._finals, self._lone):
                streak.clear()

    def _add(self, streak: Streak, sig: str, call: int, error: str, sent: int) -> tuple[int, int]:
        with self._lock:
            return streak.add(sig, call, error, sent, self._sends), streak.requests

    def attempt_failed(self, message: str, status: int | None, call: int, sent: int, succeeded: int) -> str | None:
        """An attempt failed (not by a timeout): ``fail_streak`` rounds alike over 2+ requests, before any
        success, stop the backend."""
        n, spans = self._add(self._alike, signature(message, status), call, message, sent)
        if succeeded == 0 and 0 < self.fail_streak <= n and spans >= 2:
            alike = f"its last {n} attempts, over {spans} requests, all failed the same way"
            return f"{UNREACHABLE}: {alike} (last: {message})"
        return None

    def gave_up(self, message: str, status: int | None, call: int, first: int, succeeded: int) -> str | None:
        """A call gave up (not by a timeout; ``first``: its first attempt's send number): ``dead_after`` such
        calls alike in a row, once some had succeeded, stop the backend."""
        if not succeeded:
            return None
        n, _ = self._add(self._finals, signature(message, status), call, message, first)
        if 0 < self.dead_after <= n:
            return (
                f"{UNREACHABLE}: its last {n} requests failed the same way after their retries "
                f"(last: {message}), after {succeeded} that succeeded"
            )
        return None

    def timed_out_alone(self, message: str, call: int, sent: int, waited: float, succeeded: int) -> str | None:
        """A request sent alone got no reply within ``waited`` seconds: below the longest timeout allowed the
        next ones wait twice as long; at it, one (learned timeout, no reply yet), two over two requests (the
        user's timeout, no reply yet) or three over two or more requests (after replies) stop the backend."""
        if waited < self.pace.timeout_max:
            self.pace.escalate(waited)
            return None
        n, spans = self._add(self._lone, "timeout", call, message, sent)
        if succeeded:
            stop = n >= 3 and spans >= 2
        else:
            stop = n >= 1 if self.pace.learn else (n >= 2 and spans >= 2)
        return self._slow(waited, n) if stop else None

    def _slow(self, waited: float, n: int) -> str:
        seen = self.pace.describe()
        given = "" if self.pace.learn else " ($timeout)"
        alone = "a request sent alone" if n == 1 else f"{n} requests sent one at a time"
        if seen:
            what = f"{seen}, but {alone} got no reply within {seconds(waited)}{given}"
        else:
            what = f"no reply within {seconds(waited)}{given} to {alone}"
        return f"{TOO_SLOW}: {what}; if the server is that slow, rerun with {self.pace.advice(waited)}"


__all__ = [
    "LETTER_HINT",
    "MARGIN",
    "ROOM",
    "SAMPLE",
    "TOO_SLOW",
    "UNREACHABLE",
    "WINDOW",
    "Pace",
    "Streak",
    "Watch",
    "marked",
    "nice_seconds",
    "seconds",
    "signature",
    "stored",
]
