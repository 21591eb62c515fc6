"""Request limits: requests in flight, requests per minute, per-request timeout, retries with backoff.

A backend wraps each network call in :meth:`Limiter.call`. Transient failures
(HTTP 429 and 5xx, timeouts, connection errors, unreadable responses) are
retried with exponential backoff and full jitter, honouring ``Retry-After``;
permanent failures (4xx other than 408/409/429) are not. The final failure is
returned as an :class:`Outcome` with the error text, never raised.

The number of requests in flight adapts to the server (additive increase,
multiplicative decrease, as TCP does): it starts at ``concurrency``, or at the
server's advertised slots (:meth:`Limiter.seed_capacity`; then never above them,
as more would only queue at the server), halves when a request
times out or the server answers 429/503 (once per round: failures of requests
sent before the last cut do not cut again), and grows by one after as many
successes in a row as the current cap, never above ``concurrency``. A one-slot
server thus ends up with one request at a time instead of a queue whose tail
times out.

Two failures stop a backend early instead of grinding through every item: an
:class:`AuthError` (the server rejected the API key) at once, and a server whose
first ``unreachable_after`` requests all failed (after their retries). A request
that timed out (or got 429/503) while other requests were in flight may have
waited in the server's queue; it does not count toward that tally. Every later
call then fails at once, without a request, with an error starting with
:data:`AUTH_REJECTED` or :data:`UNREACHABLE`; callers count those requests as failed
(missing), and commands exit with the message (see :mod:`ragrade.llm.failures`).

A request's total time is bounded: at most ``max_retries + 1`` attempts of at most
``timeout`` seconds each, separated by backoff waits of at most ``backoff_max_s``
(or the server's ``Retry-After``, at most ``retry_after_max_s``); waiting for a
free place under the in-flight cap comes on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ragrade.llm.options import LLMOptions

T = TypeVar("T")

CONGESTION_STATUS = (429, 503)  # the server says it is busy: fewer requests in flight help


_DEFAULTS = LLMOptions()


class TransientError(Exception):
    """A failure worth retrying; ``retry_after`` (seconds) when the server said so.

    ``status`` is the HTTP status when the server answered with one; ``timeout`` marks a request
    that got no answer in time. Both tell the limiter whether the server is congested.
    """

    def __init__(
        self, message: str, retry_after: float | None = None, status: int | None = None, timeout: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
        self.timeout = timeout

    @property
    def congestion(self) -> bool:
        """True for a timeout or a 429/503 answer: signs of too many requests in flight."""
        return self.timeout or self.status in CONGESTION_STATUS


class PermanentError(Exception):
    """A failure that retrying cannot fix (bad request, authentication, unsupported feature).

    ``status`` is the HTTP status when the server answered with one.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AuthError(PermanentError):
    """The server rejected the credentials (HTTP 401/403): every further request would fail the same way."""


AUTH_REJECTED = "the server rejected the API key"
UNREACHABLE = "server unreachable"


@dataclass(frozen=True)
class LimitConfig:
    """Limits of one backend (``concurrency`` is the ceiling of the adaptive in-flight cap)."""

    concurrency: int = _DEFAULTS.concurrency  # the defaults of LLMOptions (one set, in ragrade.llm.options)
    rpm: float | None = _DEFAULTS.rpm
    timeout: float = _DEFAULTS.timeout
    max_retries: int = _DEFAULTS.max_retries
    backoff_base_s: float = _DEFAULTS.backoff_s
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0
    unreachable_after: int = 5  # give up on a backend whose first N requests all failed (0: never)
    adaptive: bool = True  # adapt the in-flight cap to the server (AIMD); False: always ``concurrency``

    def __post_init__(self) -> None:
        from ragrade.errors import ConfigError

        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.rpm is not None and self.rpm <= 0:
            raise ConfigError(f"rpm must be > 0, got {self.rpm}")
        if self.timeout <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.unreachable_after < 0:
            raise ConfigError(f"unreachable_after must be >= 0, got {self.unreachable_after}")


@dataclass
class Outcome(Generic[T]):
    """The end of one call: ``value`` or ``error``, and how many attempts it took."""

    value: T | None
    error: str | None
    attempts: int
    latency_s: float


class RateLimiter:
    """Spaces request starts to at most ``rpm`` per minute (no burst), across threads and event loops."""

    def __init__(self, rpm: float) -> None:
        self.interval = 60.0 / rpm
        self._next = 0.0
        self._lock = threading.Lock()  # held only to book a slot, never across an await

    async def acquire(self) -> None:
        """Wait for the next free slot."""
        with self._lock:
            now = time.monotonic()
            wait = self._next - now
            self._next = max(now, self._next) + self.interval
        if wait > 0:
            await asyncio.sleep(wait)


class AdaptiveCap:
    """The in-flight cap of one backend: additive increase, multiplicative decrease (thread-safe).

    ``epoch`` counts the cuts; a congestion signal from a request sent before the latest cut is
    ignored, so that a burst of timeouts of requests that were all queued together halves once.
    """

    def __init__(self, ceiling: int, adaptive: bool = True) -> None:
        self.ceiling = ceiling
        self.adaptive = adaptive
        self.cap = ceiling
        self.epoch = 0
        self.cuts = 0  # how often the cap was halved
        self.lowest = ceiling
        self._streak = 0
        self._lock = threading.Lock()

    def seed(self, n: int) -> None:
        """Start from, and stay within, ``n`` in flight (the server's advertised slots): requests beyond the
        slots would only queue at the server (and evict each other's cached prompts there)."""
        with self._lock:
            self.ceiling = self.cap = max(1, min(self.ceiling, int(n)))
            self.lowest = min(self.lowest, self.cap)
            self.epoch += 1
            self._streak = 0

    def success(self) -> bool:
        """Count a success; True when the cap grew (after ``cap`` successes in a row)."""
        if not self.adaptive:
            return False
        with self._lock:
            self._streak += 1
            if self._streak < self.cap or self.cap >= self.ceiling:
                return False
            self.cap += 1
            self._streak = 0
            return True

    def congestion(self, epoch: int) -> bool:
        """A request sent in ``epoch`` met a congested server; halve the cap unless already cut since."""
        if not self.adaptive:
            return False
        with self._lock:
            self._streak = 0
            if epoch != self.epoch:
                return False
            self.epoch += 1
            self.cap = max(1, self.cap // 2)
            self.cuts += 1
            self.lowest = min(self.lowest, self.cap)
            return True


class _Gate:
    """First-come first-served admission under a cap that may change, for one event loop.

    Like an asyncio semaphore whose size is read from ``cap`` at every admission; the slot of a
    waiter is counted when it is granted, so that release is synchronous (safe in ``finally``).
    """

    def __init__(self) -> None:
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self, cap: int) -> int:
        """Wait for a place; the number in flight, this call included."""
        if self.in_flight < cap and not self._waiters:
            self.in_flight += 1
            return self.in_flight
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted, then cancelled before running: hand it on
                self.release(cap)
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise
        return self.in_flight

    def release(self, cap: int) -> None:
        """Free a place and admit waiters up to ``cap``."""
        self.in_flight -= 1
        self.wake(cap)

    def wake(self, cap: int) -> None:
        """Admit waiters while fewer than ``cap`` are in flight."""
        while self._waiters and self.in_flight < cap:
            fut = self._waiters.popleft()
            if not fut.done():
                self.in_flight += 1
                fut.set_result(None)


def backoff_delay(attempt: int, cfg: LimitConfig, retry_after: float | None, rng: random.Random) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): Retry-After when given, else full-jitter backoff."""
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, cfg.retry_after_max_s) + rng.uniform(0, 0.1 * max(retry_after, 0.01))
    cap = min(cfg.backoff_max_s, cfg.backoff_base_s * (2 ** (attempt - 1)))
    return rng.uniform(cap / 2, cap)


class Limiter:
    """Applies a :class:`LimitConfig` to async calls; counts retries. One per backend.

    The requests-per-minute limit and the adaptive cap's value hold across threads and event
    loops; admission under the cap is per event loop (asyncio futures belong to one loop), so
    batches run at the same time from two threads each get up to ``cap`` places.
    """

    def __init__(self, cfg: LimitConfig, seed: int | None = None) -> None:
        self.cfg = cfg
        self.retries = 0
        self.grace_s = 0.0  # added to the timeout of the outer guard when the client enforces its own
        self.retry_reasons: Counter[str] = Counter()  # first words of each retried error
        self._rng = random.Random(seed)
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate] = weakref.WeakKeyDictionary()
        self._gates_lock = threading.Lock()
        self._rate: RateLimiter | None = RateLimiter(cfg.rpm) if cfg.rpm else None
        self.adaptive = AdaptiveCap(cfg.concurrency, cfg.adaptive)
        self.fatal: str | None = None  # set once the backend is known unusable: later calls fail at once
        self.succeeded = 0  # calls that returned a value
        self.failed_in_a_row = 0  # final failures since the last success (queued timeouts excepted)

    @property
    def cap(self) -> int:
        """The current in-flight cap."""
        return self.adaptive.cap

    def seed_capacity(self, slots: int) -> None:
        """Keep the adaptive cap within the server's ``slots`` (and ``concurrency``), starting there."""
        self.adaptive.seed(slots)

    def _settle(self, outcome: Outcome[T], auth: bool = False, queued: bool = False) -> Outcome[T]:
        """Track successes and failures; declare the backend unusable on an auth error or a dead start.

        ``queued``: the final failure was a timeout or busy answer while other requests were in flight
        (the server may be alive and merely queueing): it does not count toward "unreachable".
        """
        if outcome.value is not None:
            self.succeeded += 1
            self.failed_in_a_row = 0
            return outcome
        if not queued:
            self.failed_in_a_row += 1
        if auth:
            outcome.error = f"{AUTH_REJECTED} ({outcome.error})"
            self.fatal = self.fatal or outcome.error
        elif self.fatal is None and self.succeeded == 0 and 0 < self.cfg.unreachable_after <= self.failed_in_a_row:
            self.fatal = f"{UNREACHABLE}: its first {self.failed_in_a_row} requests failed (last: {outcome.error})"
            outcome.error = self.fatal
        elif self.fatal is not None and self.succeeded == 0 and not (outcome.error or "").startswith(UNREACHABLE):
            outcome.error = f"{UNREACHABLE}: {outcome.error}"  # was in flight when the backend was given up
        return outcome

    def _refused(self, attempts: int, start: float) -> Outcome[T]:
        return Outcome(None, f"not sent: {self.fatal}", attempts, time.perf_counter() - start)

    def _bind(self) -> _Gate:
        loop = asyncio.get_running_loop()
        with self._gates_lock:
            gate = self._gates.get(loop)
            if gate is None:
                gate = self._gates[loop] = _Gate()
        return gate

    async def call(self, fn: Callable[[], Awaitable[T]], timeout: float | None = None) -> Outcome[T]:
        """Run ``fn`` under the limits with retries; never raises for transient or permanent errors.

        ``timeout``: seconds one attempt may take, when ``fn`` makes several requests in a row
        (default: the configured per-request timeout).
        """
        gate = self._bind()
        limit = (timeout or self.cfg.timeout) + self.grace_s
        start = time.perf_counter()
        attempts = 0
        last = "no attempt made"
        while True:
            retry_after: float | None = None
            congested = False
            sent_with = await gate.acquire(self.cap)
            try:
                if self.fatal is not None:
                    return self._refused(attempts, start)
                attempts += 1
                epoch = self.adaptive.epoch
                if self._rate is not None:
                    await self._rate.acquire()
                try:
                    async with asyncio.timeout(limit):  # no extra task per call
                        value = await fn()
                    if self.adaptive.success():
                        gate.wake(self.cap)
                    return self._settle(Outcome(value, None, attempts, time.perf_counter() - start))
                except PermanentError as exc:
                    outcome: Outcome[T] = Outcome(None, str(exc), attempts, time.perf_counter() - start)
                    return self._settle(outcome, auth=isinstance(exc, AuthError))
                except TransientError as exc:
                    last, retry_after, congested = str(exc), exc.retry_after, exc.congestion
                except TimeoutError:
                    last, congested = f"timed out after {timeout or self.cfg.timeout:g}s", True
                if congested:
                    self.adaptive.congestion(epoch)
            finally:
                gate.release(self.cap)
            if attempts > self.cfg.max_retries:
                msg = f"{last} (gave up after {attempts} attempts)" if attempts > 1 else last
                failed: Outcome[T] = Outcome(None, msg, attempts, time.perf_counter() - start)
                return self._settle(failed, queued=congested and sent_with > 1)
            self.retries += 1
            self.retry_reasons[" ".join(last.split()[:2])] += 1
            await asyncio.sleep(backoff_delay(attempts, self.cfg, retry_after, self._rng))


__all__ = [
    "AUTH_REJECTED",
    "CONGESTION_STATUS",
    "UNREACHABLE",
    "AdaptiveCap",
    "AuthError",
    "LimitConfig",
    "Limiter",
    "Outcome",
    "PermanentError",
    "RateLimiter",
    "TransientError",
    "backoff_delay",
]
