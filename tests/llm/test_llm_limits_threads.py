"""The limiter under batches run at the same time from two threads (two event loops)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

from ragrade.llm.limits import LimitConfig, Limiter


def _run_batch(limiter: Limiter, n: int, starts: list[float], peak: list[int], lock: threading.Lock) -> None:
    in_flight = 0

    async def one() -> str:
        nonlocal in_flight
        with lock:
            starts.append(time.monotonic())
        in_flight += 1
        peak.append(in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return "ok"

    async def batch() -> None:
        outs = await asyncio.gather(*(limiter.call(one) for _ in range(n)))
        assert all(o.value == "ok" and o.error is None for o in outs)

    asyncio.run(batch())


def test_rpm_holds_across_threads_and_concurrency_per_loop() -> None:
    limiter = Limiter(LimitConfig(concurrency=2, rpm=1200.0, timeout=5.0), seed=0)  # one start per 50 ms
    starts: list[float] = []
    lock = threading.Lock()
    peaks: list[list[int]] = [[], []]
    threads = [threading.Thread(target=_run_batch, args=(limiter, 4, starts, peaks[i], lock)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    starts.sort()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(starts) == 8
    # the shared rate limiter spaced every start, whichever thread made it: 8 starts span at least 7 spacings
    # (less a little for when a thread records its start late), and no two starts come together
    assert starts[-1] - starts[0] > 7 * 0.05 * 0.9
    assert min(gaps) > 0.025
    assert max(max(p) for p in peaks) <= 2  # each loop kept its own in-flight limit
