"""Request limits: requests in flight, requests per minute, per-request timeout, retries with backoff.

A backend wraps each network call in :meth:`Limiter.call`. Transient failures
(HTTP 429 and 5xx, timeouts, connection errors, unreadable responses) are
retried with exponential backoff and full jitter, honouring ``Retry-After``;
permanent failures (4xx other than 408/409/429) are not. The final failure is
returned as an :class:`Outcome` with the error text, never raised.

Two failures stop a backend early instead of grinding through every item: an
:class:`AuthError` (the server rejected the API key) at once, and a server whose
first ``unreachable_after`` requests all failed (after their retries). Every later
call then fails at once, without a request, with an error starting with
:data:`AUTH_REJECTED` or :data:`UNREACHABLE`; callers count those requests as failed
(missing), and commands exit with the message (see :mod:`ragrade.llm.failures`).

A request's total time is bounded: at most ``max_retries + 1`` attempts of at most
``timeout`` seconds each, separated by backoff waits of at most ``backoff_max_s``
(or the server's ``Retry-After``, at most ``retry_after_max_s``).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class TransientError(Exception):
    """A failure worth retrying; ``retry_after`` (seconds) when the server said so."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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
    """Limits of one backend."""

    concurrency: int = 16
    rpm: float | None = None
    timeout: float = 60.0
    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0
    unreachable_after: int = 5  # give up on a backend whose first N requests all failed (0: never)

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


def backoff_delay(attempt: int, cfg: LimitConfig, retry_after: float | None, rng: random.Random) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): Retry-After when given, else full-jitter backoff."""
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, cfg.retry_after_max_s) + rng.uniform(0, 0.1 * max(retry_after, 0.01))
    cap = min(cfg.backoff_max_s, cfg.backoff_base_s * (2 ** (attempt - 1)))
    return rng.uniform(cap / 2, cap)


class Limiter:
    """Applies a :class:`LimitConfig` to async calls; counts retries. One per backend.

    The requests-per-minute limit holds across threads and event loops; the in-flight
    limit holds per event loop (asyncio semaphores belong to one loop), so batches run
    at the same time from two threads each get ``concurrency`` slots.
    """

    def __init__(self, cfg: LimitConfig, seed: int | None = None) -> None:
        self.cfg = cfg
        self.retries = 0
        self.grace_s = 0.0  # added to the timeout of the outer guard when the client enforces its own
        self.retry_reasons: Counter[str] = Counter()  # first words of each retried error
        self._rng = random.Random(seed)
        self._sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._sems_lock = threading.Lock()
        self._rate: RateLimiter | None = RateLimiter(cfg.rpm) if cfg.rpm else None
        self.fatal: str | None = None  # set once the backend is known unusable: later calls fail at once
        self.succeeded = 0  # calls that returned a value
        self.failed_in_a_row = 0  # final failures since the last success

    def _settle(self, outcome: Outcome[T], auth: bool = False) -> Outcome[T]:
        """Track successes and failures; declare the backend unusable on an auth error or a dead start."""
        if outcome.value is not None:
            self.succeeded += 1
            self.failed_in_a_row = 0
            return outcome
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

    def _bind(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._sems_lock:
            sem = self._sems.get(loop)
            if sem is None:
                sem = self._sems[loop] = asyncio.Semaphore(self.cfg.concurrency)
        return sem

    async def call(self, fn: Callable[[], Awaitable[T]]) -> Outcome[T]:
        """Run ``fn`` under the limits with retries; never raises for transient or permanent errors."""
        sem = self._bind()
        start = time.perf_counter()
        attempts = 0
        last = "no attempt made"
        while True:
            retry_after: float | None = None
            async with sem:
                if self.fatal is not None:
                    return self._refused(attempts, start)
                attempts += 1
                if self._rate is not None:
                    await self._rate.acquire()
                try:
                    async with asyncio.timeout(self.cfg.timeout + self.grace_s):  # no extra task per call
                        value = await fn()
                    return self._settle(Outcome(value, None, attempts, time.perf_counter() - start))
                except PermanentError as exc:
                    outcome: Outcome[T] = Outcome(None, str(exc), attempts, time.perf_counter() - start)
                    return self._settle(outcome, auth=isinstance(exc, AuthError))
                except TransientError as exc:
                    last, retry_after = str(exc), exc.retry_after
                except TimeoutError:
                    last = f"timed out after {self.cfg.timeout:g}s"
            if attempts > self.cfg.max_retries:
                msg = f"{last} (gave up after {attempts} attempts)" if attempts > 1 else last
                return self._settle(Outcome(None, msg, attempts, time.perf_counter() - start))
            self.retries += 1
            self.retry_reasons[" ".join(last.split()[:2])] += 1
            await asyncio.sleep(backoff_delay(attempts, self.cfg, retry_after, self._rng))


__all__ = [
    "AUTH_REJECTED",
    "UNREACHABLE",
    "AuthError",
    "LimitConfig",
    "Limiter",
    "Outcome",
    "PermanentError",
    "RateLimiter",
    "TransientError",
    "backoff_delay",
]
