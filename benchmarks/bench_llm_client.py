"""Client efficiency of the OpenAI-compatible backend: N requests at fixed server latency vs the ideal time.

The local test server runs in a separate process (so the client and server do not share a GIL).
Ideal time = ceil(N / concurrency) * latency. Goal: ratio <= 1.25 (2000 requests, 50 ms, concurrency 64).

    .venv/bin/python benchmarks/bench_llm_client.py [--n 2000] [--latency 0.05] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def serve(latency: float, queue: mp.Queue, stop: mp.Event) -> None:  # type: ignore[type-arg]
    from tests.support.openai_server import OpenAIServer

    with OpenAIServer(latency_s=latency) as srv:
        queue.put(srv.base_url)
        stop.wait(600)
        queue.put(srv.requests_total)


async def raw_httpx(url: str, n: int, concurrency: int) -> float:
    """Baseline: the same chat requests with bare httpx + json (no SDK, no cache, no retries)."""
    import asyncio
    import json

    import httpx

    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def one(i: int) -> None:
            async with sem:
                body = {"model": "test-model", "messages": [{"role": "user", "content": f"baseline question {i}"}]}
                r = await client.post(url + "/chat/completions", json=body, headers={"Authorization": "Bearer x"})
                json.loads(r.content)

        await one(-1)
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()

    from ragrade.llm import GenerationRequest, Message, create_llm, generate

    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    stop = mp.Event()
    proc = mp.Process(target=serve, args=(args.latency, queue, stop), daemon=True)
    proc.start()
    url = queue.get(timeout=60)
    llm = create_llm(
        "openai/test-model", base_url=url, api_key="sk-bench", cache=False, concurrency=args.concurrency, timeout=30
    )
    generate(llm, [GenerationRequest(messages=(Message("user", "warm-up"),))])
    reqs = [GenerationRequest(messages=(Message("user", f"benchmark question {i}"),)) for i in range(args.n)]
    t0, c0 = time.perf_counter(), time.process_time()
    out = generate(llm, reqs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    import asyncio

    raw = asyncio.run(raw_httpx(url, args.n, args.concurrency))
    stop.set()
    served = queue.get(timeout=30) - args.n - 1
    proc.join(timeout=10)
    ideal = math.ceil(args.n / args.concurrency) * args.latency
    ok = sum(c.ok for c in out)
    print(f"requests={args.n} ok={ok} served={served - 1} latency={args.latency}s concurrency={args.concurrency}")
    print(
        f"wall={wall:.2f}s ideal={ideal:.2f}s ratio={wall / ideal:.2f} (goal <= 1.25) "
        f"throughput={args.n / wall:.0f} req/s client_cpu={1000 * cpu / args.n:.2f} ms/request "
        f"cpu_count={os.cpu_count()}"
    )
    print(
        f"baseline bare httpx (same server, same run): wall={raw:.2f}s ratio_to_ideal={raw / ideal:.2f}; "
        f"ragrade/baseline={wall / raw:.2f}"
    )


if __name__ == "__main__":
    main()
