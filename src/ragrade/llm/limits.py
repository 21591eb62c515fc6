"""Request limits: requests in flight, requests per minute, per-request timeout, retries with backoff.

A backend wraps each network call in :meth:`Limiter.call`. Transient failures
(HTTP 429 and 5xx, timeouts, connection errors, unreadable responses) are
retried with exponential backoff and full jitter, honouring ``Retry-After``;
permanent failures (4xx other than 408/409/429) are not. The final failure is
returned as a :class:`CallResult` with the error text, never raised.

The number of requests in flight adapts to the server (additive increase,
multiplicative decrease, as TCP does): it starts at ``concurrency``, at the
server's advertised slots (:meth:`Limiter.seed_capacity`; then never above them,
as more would only queue at the server), or, for a server that says nothing of
its capacity, at one (:meth:`Limiter.start_slow`) and grows by one per success
(doubling per round of replies: slow start) until the first congestion signal.
It halves when a request times out or the server answers 429/503 (once per
round: failures of requests sent before the last cut do not cut again), and
after slow start grows by one after as many successes in a row as the current
cap, never above ``concurrency``, nor above the room that the replies' latencies
leave (:meth:`ragrade.llm.pacing.Pace.room`: a one-at-a-time server must answer
the whole queue well within the timeout). A one-slot server thus ends up with
one or a few requests at a time instead of a queue whose tail times out.

The timeout of each request comes from :class:`~ragrade.llm.pacing.Pace`: the
user's, as given; or, when the user left it at its default (``learn_timeout``),
learned from the replies, between the default and ``timeout_max``, and the whole
of ``timeout_max`` for the first reply. The running attempt's timeout and the
requests in flight are in a context variable (:func:`request_timeout`) that the
HTTP client reads, and the client reports each reply's latency
(:meth:`Limiter.observe`). A request sent alone that timed out under a learned
timeout is retried with twice the timeout (up to ``timeout_max``); one that
timed out while others were in flight may have waited in the server's queue and
proves nothing about the server.

Failures that stop a backend instead of grinding through every item (every
later call then fails at once, without a request, with an error that starts
with ``not sent:`` and names the reason):

- an :class:`AuthError` (the server rejected the API key): at once (:data:`AUTH_REJECTED`);
- a server whose first ``unreachable_after`` requests all failed (after their
  retries), or that failed ``fail_streak`` rounds in a row the same way (one
  :func:`~ragrade.llm.pacing.signature`, such as ``HTTP 500``) over two or more
  requests before any success, or, once some requests had succeeded, whose last
  ``dead_after`` rounds of requests all failed the same way after their retries
  (:data:`UNREACHABLE`; timeouts and busy answers of requests queued behind
  others do not count). A round is a failure of a request sent after the
  previous counted one was seen (:class:`~ragrade.llm.pacing.Streak`): requests
  that were in flight together and failed together count once, so a brief
  outage under many requests in flight stops nothing;
- requests sent one at a time that got no reply within the longest timeout
  allowed: one (under a learned timeout, before any reply: ``timeout_max`` has
  passed), two over two requests (under the user's timeout, before any reply),
  or three over two or more requests (after replies): :data:`TOO_SLOW`, with the
  latencies seen and the settings that would work.

The streaks and these rules are :class:`~ragrade.llm.pacing.Watch`'s. Callers
count those requests as failed (missing), and commands exit with the message
(see :mod:`ragrade.llm.failures`). A call whose value is an exception
(a refusal the caller hands back instead of raising) is an answer, not a
success: it counts toward the streaks when its status is a server error (5xx).

A request's total time is bounded: at most ``max_retries + 1`` attempts of at most
the request timeout each, separated by backoff waits of at most ``backoff_max_s``
(or the server's ``Retry-After``, at most ``retry_after_max_s``); waiting for a
free place under the in-flight cap comes on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import random
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ragrade.llm.defaults import BACKOFF_S, CONCURRENCY, MAX_RETRIES, RETRIES, TIMEOUT
from ragrade.llm.pacing import SAMPLE, TOO_SLOW, UNREACHABLE, Pace, Watch, seconds, stored

T = TypeVar("T")

CONGESTION_STATUS = (429, 503)  # the server says it is busy: fewer requests in flight help
TIMEOUT_MAX_FACTOR = 4.0  # a learned timeout goes up to this many times the default

log = logging.getLogger("ragrade.llm")


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


@dataclass(frozen=True)
class LimitConfig:
    """Limits of one backend (``concurrency`` is the ceiling of the adaptive in-flight cap)."""

    concurrency: int = CONCURRENCY  # the defaults of LLMOptions (one set, in ragrade.llm.defaults)
    rpm: float | None = None
    timeout: float = TIMEOUT
    max_retries: int = RETRIES
    backoff_base_s: float = BACKOFF_S
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0
    unreachable_after: int = 5  # give up on a backend whose first N requests all failed (0: never)
    adaptive: bool = True  # adapt the in-flight cap to the server (AIMD); False: always ``concurrency``
    learn_timeout: bool = False  # True: ``timeout`` is a default, learned from the replies up to ``timeout_max``
    timeout_max: float | None = None  # the longest learned timeout (default: 4 x ``timeout``)
    fail_streak: int = 6  # attempts in a row failed alike, over 2+ requests, before any success: stop (0: never)
    dead_after: int = 10  # requests in a row failed alike after their retries, after successes: stop (0: never)

    def __post_init__(self) -> None:
        from ragrade.errors import ConfigError

        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.rpm is not None and self.rpm <= 0:
            raise ConfigError(f"rpm must be > 0, got {self.rpm}")
        if self.timeout <= 0:
            raise ConfigError(f"timeout must be > 0 seconds, got {self.timeout}")
        if self.timeout_max is not None and self.timeout_max < self.timeout:
            raise ConfigError(f"timeout_max must be >= timeout ({self.timeout:g}), got {self.timeout_max}")
        if not isinstance(self.max_retries, int) or not 0 <= self.max_retries <= MAX_RETRIES:
            raise ConfigError(f"max_retries must be a whole number from 0 to {MAX_RETRIES}, got {self.max_retries}")
        for name in ("unreachable_after", "fail_streak", "dead_after"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")

    @property
    def longest_timeout(self) -> float:
        """The longest a request may wait: ``timeout_max`` (or 4 x ``timeout``) when learned, else ``timeout``."""
        if not self.learn_timeout:
            return self.timeout
        return self.timeout_max if self.timeout_max is not None else TIMEOUT_MAX_FACTOR * self.timeout


@dataclass
class CallResult(Generic[T]):
    """What one :meth:`Limiter.call` ends with: ``value`` or ``error``, how many attempts it took and how long.

    Not :class:`ragrade.outcome.Outcome` (the per-item result a stage records).
    """

    value: T | None
    error: str | None
    attempts: int
    latency_s: float


@dataclass
class Attempt:
    """The running attempt of a call, as the HTTP client sees it (:func:`request_timeout`)."""

    timeout: float  # seconds one request of the attempt may take
    in_flight: int  # requests in flight when the attempt was admitted (itself included)
    replies: int = 0  # replies the client reported (:meth:`Limiter.observe`)


_ATTEMPT: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar("ragrade_llm_attempt", default=None)


def request_timeout(default: float) -> float:
    """Seconds the request about to be sent may take: the running attempt's timeout, else ``default``."""
    attempt = _ATTEMPT.get()
    return attempt.timeout if attempt is not None else default


@dataclass
class _Failure:
    """One failed attempt, as the limiter weighs it."""

    message: str
    status: int | None = None
    retry_after: float | None = None
    congestion: bool = False
    timeout: bool = False


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
    """The in-flight cap of one backend: slow start, additive increase, multiplicative decrease (thread-safe).

    ``epoch`` counts the cuts; a congestion signal from a request sent before the latest cut is
    ignored, so that a burst of timeouts of requests that were all queued together halves once.
    Below ``threshold`` (slow start) every success adds one; at or above it, ``cap`` successes in a row do.
    """

    def __init__(self, ceiling: int, adaptive: bool = True) -> None:
        self.ceiling = ceiling
        self.adaptive = adaptive
        self.cap = ceiling
        self.threshold = ceiling  # slow start below it
        self.epoch = 0
        self.cuts = 0  # how often the cap was halved
        self.lowest = ceiling
        self._streak = 0
        self._lock = threading.Lock()

    def seed(self, n: int) -> None:
        """Start from, and stay within, ``n`` in flight (the server's advertised slots): requests beyond the
        slots would only queue at the server (and evict each other's cached prompts there)."""
        with self._lock:
            self.ceiling = self.cap = self.threshold = max(1, min(self.ceiling, int(n)))
            self.lowest = min(self.lowest, self.cap)
            self.epoch += 1
            self._streak = 0

    def start_slow(self) -> None:
        """Start from one request in flight and grow by one per success up to the ceiling (slow start)."""
        if not self.adaptive:
            return
        with self._lock:
            self.cap = self.lowest = 1
            self.threshold = self.ceiling
            self.epoch += 1
            self._streak = 0

    def success(self, room: int | None = None, grow: bool = True) -> bool:
        """Count a success; True when the cap grew. ``room``: the most the latencies allow (a cap above it comes
        down to it, without counting as a cut); ``grow``: False while too few replies have come to judge."""
        if not self.adaptive:
            return False
        with self._lock:
            limit = self.ceiling if room is None else max(1, min(self.ceiling, room))
            if self.cap > limit:
                self.cap = self.threshold = limit
                self.lowest = min(self.lowest, limit)
            if self.cap >= limit or not grow:
                return False
            if self.cap < self.threshold:
                self.cap += 1
                return True
            self._streak += 1
            if self._streak < self.cap:
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
            self.cap = self.threshold = max(1, self.cap // 2)
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

    The requests-per-minute limit, the adaptive cap's value, the latencies and the failure streaks hold
    across threads and event loops; admission under the cap is per event loop (asyncio futures belong
    to one loop), so batches run at the same time from two threads each get up to ``cap`` places.
    """

    def __init__(self, cfg: LimitConfig, seed: int | None = None, name: str = "the LLM") -> None:
        self.cfg = cfg
        self.name = name  # the backend's name, for log lines
        self.retries = 0
        self.grace_s = 0.0  # added to the timeout of the outer guard when the client enforces its own
        self.retry_reasons: Counter[str] = Counter()  # first words of each retried error
        self._rng = random.Random(seed)
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate] = weakref.WeakKeyDictionary()
        self._gates_lock = threading.Lock()
        self._rate: RateLimiter | None = RateLimiter(cfg.rpm) if cfg.rpm else None
        self.adaptive = AdaptiveCap(cfg.concurrency, cfg.adaptive)
        self.pace = Pace(cfg.timeout, cfg.longest_timeout, cfg.learn_timeout)
        self.fatal: str | None = None  # why the backend is unusable (settings as $name): later calls fail at once
        self.succeeded = 0  # calls that returned a value
        self.failed_in_a_row = 0  # final failures since the last success (queued timeouts excepted)
        self.watch = Watch(self.pace, cfg.fail_streak, cfg.dead_after)  # the streaks that stop a backend
        self._calls = itertools.count()
        self._lock = threading.Lock()
        self._noted_wait = False

    @property
    def cap(self) -> int:
        """The current in-flight cap."""
        return self.adaptive.cap

    def seed_capacity(self, slots: int) -> None:
        """Keep the adaptive cap within the server's ``slots`` (and ``concurrency``), starting there."""
        self.adaptive.seed(slots)

    def start_slow(self) -> None:
        """The server says nothing of its capacity: start from one request in flight (slow start)."""
        self.adaptive.start_slow()

    def observe(self, latency_s: float) -> None:
        """A reply came after ``latency_s`` seconds (reported by the HTTP client, once per reply)."""
        attempt = _ATTEMPT.get()
        if attempt is not None:
            attempt.replies += 1
        self.pace.observe(latency_s, attempt.in_flight if attempt is not None else 1)

    # -- judging outcomes ----------------------------------------------------------------------
    def _stop(self, message: str | None) -> None:
        """Declare the backend unusable for ``message`` (None: not); the first reason stands."""
        with self._lock:
            if self.fatal is None and message is not None:
                self.fatal = message

    def _success(self, gate: _Gate) -> None:
        """A call returned a value: every streak ends, and the cap may grow."""
        with self._lock:
            self.succeeded += 1
            self.failed_in_a_row = 0
        self.watch.success()
        if self.adaptive.success(self.pace.room(), grow=self.pace.replies >= SAMPLE):
            gate.wake(self.cap)

    def _judge(self, failure: _Failure, call: int, sent: int, lone: bool, waited: float) -> None:
        """Weigh one failed attempt, sent as number ``sent`` (``lone``: nothing else was in flight)."""
        if failure.timeout:
            if lone:
                self._stop(self.watch.timed_out_alone(failure.message, call, sent, waited, self.succeeded))
        elif lone or not failure.congestion:  # a busy answer while others of ours were in flight proves nothing
            self._stop(self.watch.attempt_failed(failure.message, failure.status, call, sent, self.succeeded))

    def _refusal(self, value: BaseException, call: int, sent: int) -> None:
        """The call handed back a refusal as its value: a server error (5xx) counts as a failed attempt."""
        status = getattr(value, "status", None)
        if isinstance(status, int) and status >= 500:
            self._judge(_Failure(str(value), status), call, sent, lone=True, waited=0.0)

    def _settle(
        self,
        outcome: CallResult[T],
        auth: bool = False,
        queued: bool = False,
        failure: _Failure | None = None,
        call: tuple[int, int] = (-1, -1),
        before: str | None = None,
    ) -> CallResult[T]:
        """Track final failures; declare the backend unusable on an auth error, a dead start or a dead streak.

        ``queued``: the final failure was a timeout or busy answer while other requests were in flight
        (the server may be alive and merely queueing): it does not count toward "unreachable". ``call``: the
        call's number and that of its first attempt's send; ``before``: the backend's stop reason when the
        call's last attempt was sent (None: this call may have stopped it).
        """
        if not queued:
            self.failed_in_a_row += 1
        error = outcome.error or ""
        if auth:
            outcome.error = f"{AUTH_REJECTED} ({error})"
            self._stop(outcome.error)
        elif self.fatal is None and self.succeeded == 0 and 0 < self.cfg.unreachable_after <= self.failed_in_a_row:
            self._stop(f"{UNREACHABLE}: its first {self.failed_in_a_row} requests failed (last: {error})")
        elif self.fatal is None and failure is not None and not failure.timeout and not queued:
            self._stop(self.watch.gave_up(error, failure.status, call[0], call[1], self.succeeded))
        fatal = self.fatal
        if fatal is not None and UNREACHABLE not in (outcome.error or "") and AUTH_REJECTED not in error:
            # the request that stopped the backend says why (its settings in words: the error is kept in result
            # files); one in flight meanwhile is marked as such
            outcome.error = stored(fatal) if before is None else f"{fatal.split(':', 1)[0]}: {error}"
        return outcome

    def _refused(self, attempts: int, start: float) -> CallResult[T]:
        return CallResult(None, f"not sent: {stored(self.fatal or '')}", attempts, time.perf_counter() - start)

    def _bind(self) -> _Gate:
        loop = asyncio.get_running_loop()
        with self._gates_lock:
            gate = self._gates.get(loop)
            if gate is None:
                gate = self._gates[loop] = _Gate()
        return gate

    # -- calls ---------------------------------------------------------------------------------
    def _note_wait(self, waited: float, longest: float) -> None:
        """Say once that a first reply is awaited beyond the default timeout (a slow server is not abandoned)."""
        if self._noted_wait or self.pace.replies:
            return
        self._noted_wait = True
        log.warning(
            "%s: no reply after %s; waiting up to %s for the server's first reply, one request at a time "
            "(--timeout sets a fixed limit)",
            self.name,
            seconds(waited),
            seconds(longest),
        )

    async def _attempt(self, fn: Callable[[], Awaitable[T]], budget: float, per_request: float, sent_with: int) -> T:
        """One attempt of ``fn`` within ``budget`` seconds; its requests may take ``per_request`` seconds each."""
        attempt = Attempt(per_request, sent_with)
        token = _ATTEMPT.set(attempt)
        note = None
        if per_request > self.cfg.timeout and not self.pace.replies:
            note = asyncio.get_running_loop().call_later(
                self.cfg.timeout, self._note_wait, self.cfg.timeout, per_request
            )
        started = time.perf_counter()
        try:
            async with asyncio.timeout(budget + self.grace_s):  # no extra task per call
                value = await fn()
        except TimeoutError as exc:
            raise TransientError(f"timed out after {budget:g}s", timeout=True) from exc
        finally:
            _ATTEMPT.reset(token)
            if note is not None:
                note.cancel()
        if not attempt.replies and not isinstance(value, BaseException):  # a client that reports no replies
            self.pace.observe(time.perf_counter() - started, sent_with)
        return value

    async def call(self, fn: Callable[[], Awaitable[T]], timeout: float | None = None) -> CallResult[T]:
        """Run ``fn`` under the limits with retries; never raises for transient or permanent errors.

        ``timeout``: seconds one attempt may take under the configured timeout, when ``fn`` makes several
        requests in a row (default: the configured per-request timeout); a learned timeout scales it.
        """
        gate = self._bind()
        call = next(self._calls)
        first = -1  # the send number of the call's first attempt
        start = time.perf_counter()
        attempts = 0
        while True:
            sent_with = await gate.acquire(self.cap)
            try:
                before = self.fatal
                if before is not None:
                    return self._refused(attempts, start)
                attempts += 1
                epoch = self.adaptive.epoch
                if self._rate is not None:
                    await self._rate.acquire()
                sent = self.watch.send()
                first = sent if first < 0 else first
                per_request = self.pace.request_timeout(sent_with)
                budget = (timeout or self.cfg.timeout) * per_request / self.cfg.timeout
                try:
                    value = await self._attempt(fn, budget, per_request, sent_with)
                except PermanentError as exc:
                    outcome: CallResult[T] = CallResult(None, str(exc), attempts, time.perf_counter() - start)
                    return self._settle(outcome, auth=isinstance(exc, AuthError), before=before)
                except TransientError as exc:
                    failure = _Failure(str(exc), exc.status, exc.retry_after, exc.congestion, exc.timeout)
                else:
                    if isinstance(value, BaseException):  # a refusal handed back: an answer, not a success
                        self._refusal(value, call, sent)
                    else:
                        self._success(gate)
                    return CallResult(value, None, attempts, time.perf_counter() - start)
                if failure.congestion:
                    self.adaptive.congestion(epoch)
                self._judge(failure, call, sent, sent_with == 1 and gate.in_flight == 1, per_request)
            finally:
                gate.release(self.cap)
            if attempts > self.cfg.max_retries or self.fatal is not None:
                msg = failure.message
                msg = f"{msg} (gave up after {attempts} attempts)" if attempts > 1 else msg
                failed: CallResult[T] = CallResult(None, msg, attempts, time.perf_counter() - start)
                return self._settle(
                    failed,
                    queued=failure.congestion and sent_with > 1,
                    failure=failure,
                    call=(call, first),
                    before=before,
                )
            self.retries += 1
            self.retry_reasons[" ".join(failure.message.split()[:2])] += 1
            await asyncio.sleep(backoff_delay(attempts, self.cfg, failure.retry_after, self._rng))


__all__ = [
    "AUTH_REJECTED",
    "CONGESTION_STATUS",
    "TOO_SLOW",
    "UNREACHABLE",
    "AdaptiveCap",
    "Attempt",
    "AuthError",
    "CallResult",
    "LimitConfig",
    "Limiter",
    "PermanentError",
    "RateLimiter",
    "TransientError",
    "backoff_delay",
    "request_timeout",
]
