"""Slow servers and servers that fail everything (issue 35, items 1 and 8), against the real HTTP client.

The throttled server (tests/support/openai_server.py ``throttled``) works one request at a time, takes a time
drawn per request and advertises no slots, as llama-cpp-python's server does on a slow CPU; times are scaled
down (a fraction of a second per request, and a default timeout shorter than that) to keep the tests fast.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer, throttled

from ragrade.llm import GenerationRequest, Message, generate
from ragrade.llm.limits import AdaptiveCap, LimitConfig, Limiter, TransientError
from ragrade.llm.openai import OpenAILLM
from ragrade.llm.openai_loglik import Unsupported
from ragrade.llm.pacing import marked, stored


def _llm(url: str, **limits: Any) -> OpenAILLM:
    cfg = LimitConfig(**{"backoff_base_s": 0.01, **limits})
    return OpenAILLM("test-model", base_url=url, api_key="sk-test", limits=cfg)


def _reqs(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(messages=(Message("user", f"question {i}"),)) for i in range(n)]


def test_a_slow_server_is_learned_from_its_first_replies_and_every_request_finishes() -> None:
    # 0.2-0.6 s per request against a default timeout of 0.15 s: before, 16 requests in flight all timed out;
    # now one in flight, the first reply awaited up to the longest timeout, later timeouts set from the replies
    with throttled(latency_s=(0.2, 0.6)) as srv:
        llm = _llm(srv.base_url, timeout=0.15, learn_timeout=True, timeout_max=1.5)
        out = generate(llm, _reqs(6))
        assert srv.probes["/props"] == 1 and srv.probes["/slots"] == 1  # nothing advertised (404)
        assert srv.requests_total == 6 and srv.dropped == 0 and srv.abandoned == 0  # nothing sent twice or wasted
        assert srv.max_in_flight == 1  # room for one: a second would wait a whole reply in the server's queue
    assert all(c.ok and c.attempts == 1 for c in out), [c.error for c in out]
    pace = llm.limiter.pace
    assert pace.slowest is not None and 0.2 <= pace.slowest < 1.0
    assert 0.6 <= pace.request_timeout() <= 1.5  # three times the slowest reply, within the bounds
    assert pace.room() == 1 and llm.limiter.fatal is None


def test_no_first_reply_within_the_longest_timeout_stops_with_one_message(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), throttled(latency_s=3.0) as srv:
        llm = _llm(srv.base_url, timeout=0.2, learn_timeout=True, timeout_max=0.8)
        t0 = time.monotonic()
        out = generate(llm, _reqs(5))
        elapsed = time.monotonic() - t0
        assert srv.requests_total == 1  # one request, awaited 0.8 s; the others never sent
    assert elapsed < 2.5
    assert not any(c.ok for c in out)
    fatal = str(llm.limiter.fatal)
    assert fatal == (
        "server unreachable or too slow: no reply within 0.8s to a request sent alone; "
        "if the server is that slow, rerun with $timeout 1.6 $concurrency 1"  # settings: the CLI spells the flags
    )
    assert sum(str(c.error).startswith("not sent: server unreachable or too slow") for c in out) == 4
    # each request's error (kept in result files) names the settings in words; the tally marks them again
    assert all("$" not in str(c.error) for c in out)
    assert all(str(c.error).endswith("rerun with timeout set to 1.6 and concurrency to 1") for c in out)
    assert marked(stored(fatal)) == fatal
    # one line while waiting past the default timeout, once
    assert caplog.text.count("no reply after 0.2s; waiting up to 0.8s for the server's first reply") == 1


def test_a_server_that_slows_down_is_stopped_with_the_latencies_seen_and_settings_that_work() -> None:
    replies = 0

    def respond(body: dict[str, Any]) -> str:
        nonlocal replies
        replies += 1
        if replies == 3:
            srv.latency_s = 2.0  # every later request takes 2 s
        return "fine"

    with throttled(latency_s=0.1, responder=respond) as srv:
        llm = _llm(srv.base_url, timeout=0.15, learn_timeout=True, timeout_max=0.6)
        t0 = time.monotonic()
        out = generate(llm, _reqs(12))
        elapsed = time.monotonic() - t0
    assert sum(c.ok for c in out) == 3 and elapsed < 10
    fatal = str(llm.limiter.fatal)
    assert fatal.startswith("server unreachable or too slow: replies took ") and "(median " in fatal
    assert fatal.endswith("but 3 requests sent one at a time got no reply within 0.6s; if the server is that slow, "
                          "rerun with $timeout 1.2 $concurrency 1")  # fmt: skip


def test_a_timeout_the_user_gave_is_never_stretched() -> None:
    with throttled(latency_s=(0.4, 0.6)) as srv:
        llm = _llm(srv.base_url, timeout=0.2, max_retries=3)  # learn_timeout=False: the user's --timeout
        t0 = time.monotonic()
        out = generate(llm, _reqs(6))
        elapsed = time.monotonic() - t0
        assert srv.requests_total == 2  # two requests sent alone, then stopped
    assert elapsed < 1.0  # two attempts of 0.2 s (and a short backoff): neither waited longer
    assert not any(c.ok for c in out)
    assert str(llm.limiter.fatal) == (
        "server unreachable or too slow: no reply within 0.2s ($timeout) to 2 requests sent one at a time; "
        "if the server is that slow, rerun with $timeout 0.8 $concurrency 1"
    )
    assert stored(str(llm.limiter.fatal)) == (
        "server unreachable or too slow: no reply within 0.2s (the timeout given) to 2 requests sent one at a "
        "time; if the server is that slow, rerun with timeout set to 0.8 and concurrency to 1"
    )
    assert marked(stored(str(llm.limiter.fatal))) == llm.limiter.fatal


def _failing(status: int = 500) -> Any:
    async def fn() -> str:
        await asyncio.sleep(0.01)
        raise TransientError(f"HTTP {status}: boom", status=status)

    return fn


async def _ok() -> str:
    return "ok"


def _run(limiter: Limiter, fns: list[Any]) -> list[str | None]:
    async def go() -> list[str | None]:
        return [o.error for o in await asyncio.gather(*(limiter.call(fn) for fn in fns))]

    return asyncio.run(go())


def test_failures_alike_before_any_success_stop_the_backend_but_a_burst_counts_once() -> None:
    limiter = Limiter(LimitConfig(concurrency=8, max_retries=0, unreachable_after=0))
    errors = _run(limiter, [_failing()] * 8)  # eight in flight meet one failure together: one round
    assert all("HTTP 500" in str(e) for e in errors) and limiter.fatal is None
    for _ in range(4):  # one at a time: each a round of its own
        _run(limiter, [_failing()])
    assert limiter.fatal is None
    [last] = _run(limiter, [_failing()])
    assert limiter.fatal == (
        "server unreachable: its last 6 attempts, over 6 requests, all failed the same way (last: HTTP 500: boom)"
    )
    assert str(last).startswith("server unreachable: its last 6 attempts")
    assert _run(limiter, [_ok]) == [f"not sent: {limiter.fatal}"]  # nothing sent any more
    other = Limiter(LimitConfig(concurrency=1, max_retries=0, unreachable_after=0))
    for fn in [_failing(500), _failing(502)] * 4:  # failures that differ are no streak
        _run(other, [fn])
    assert other.fatal is None


def test_after_successes_only_a_long_run_of_requests_failing_alike_stops_the_backend() -> None:
    limiter = Limiter(LimitConfig(concurrency=1, max_retries=0))
    for _ in range(3):  # a few failures between successes never stop it
        _run(limiter, [_ok])
        for _ in range(9):
            _run(limiter, [_failing()])
    assert limiter.fatal is None and limiter.succeeded == 3
    [tenth] = _run(limiter, [_failing()])
    assert limiter.fatal == (
        "server unreachable: its last 10 requests failed the same way after their retries "
        "(last: HTTP 500: boom), after 3 that succeeded"
    )
    assert tenth == limiter.fatal


def test_a_refusal_handed_back_is_an_answer_not_a_success() -> None:
    async def refused_500() -> Unsupported:
        return Unsupported("HTTP 500: cannot", 500)

    async def refused_404() -> Unsupported:
        return Unsupported("HTTP 404: no such endpoint", 404)

    limiter = Limiter(LimitConfig(concurrency=1, max_retries=0, unreachable_after=0))
    for _ in range(5):
        _run(limiter, [refused_404])
    assert limiter.succeeded == 0 and limiter.fatal is None  # the server said "not supported": no failure
    for _ in range(6):
        _run(limiter, [refused_500])
    assert limiter.succeeded == 0 and "HTTP 500: cannot" in str(limiter.fatal)


def test_eighty_requests_to_a_server_failing_everything_end_in_seconds() -> None:
    # the default limits (16 in flight allowed, 5 retries with backoff): before, every request ran its own retries
    with OpenAIServer(faults={"rate": 1.0, "kinds": ["500"]}) as srv:
        llm = _llm(srv.base_url, timeout=5.0, backoff_base_s=0.5)
        t0 = time.monotonic()
        out = generate(llm, _reqs(80))
        elapsed = time.monotonic() - t0
        assert srv.requests_total <= 6
    assert elapsed < 15 and not any(c.ok for c in out)
    assert sum(str(c.error).startswith("not sent: server unreachable: its last 6 attempts") for c in out) >= 74


def test_slow_start_doubles_per_round_of_replies_within_the_room_the_latencies_leave() -> None:
    cap = AdaptiveCap(16)
    cap.start_slow()
    assert cap.cap == 1 and not cap.success(None, grow=False) and cap.cap == 1  # too few replies to judge yet
    assert all(cap.success() for _ in range(7)) and cap.cap == 8  # 1 + 1 + 2 + 4: one more per success
    assert not cap.success(room=5) and cap.cap == 5 and cap.cuts == 0  # the latencies leave room for 5
    assert cap.congestion(cap.epoch) and cap.cap == 2  # the first congestion ends slow start ...
    assert [cap.success() for _ in range(2)] == [False, True] and cap.cap == 3  # ... then one per window
    seeded = AdaptiveCap(16)
    seeded.seed(4)  # advertised slots: from 4 at once, not cut while the replies are too few to judge
    assert not seeded.success(None, grow=False) and seeded.cap == 4
