"""Client efficiency of the OpenAI-compatible backend: N requests at fixed server latency vs the ideal time.

Ideal time = ceil(N / concurrency) * latency. Goal: ratio <= 1.25 (2000 requests, 50 ms, concurrency 64)
with the response cache on (fresh cache file). Measured in the same run, interleaved, ``--repeat`` times:

- ``ceiling``: a minimal aiohttp client (no SDK, no cache): what the server and machine allow;
- ``httpx``: bare ``httpx`` + ``json`` (the transport most SDK users get);
- ``ragrade-nocache`` / ``ragrade-cache``: ``create_llm("openai/...")`` + ``generate`` (official SDK,
  limits, retries, accounting; with the SQLite cache off / on a fresh file).

The server (``benchmarks/_fast_openai_server.py``, raw asyncio, uvloop when installed) runs in its own
process so that it is not the bottleneck; ``--server stdlib`` uses the threaded test server instead.
CPU is the client process's CPU time per request. ``--profile`` prints where the client's CPU goes.

    .venv/bin/python benchmarks/bench_llm_client.py [--n 2000] [--latency 0.05] [--concurrency 64]
        [--repeat 3] [--only ragrade-cache,ceiling] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONFIGS = ("ceiling", "httpx", "ragrade-nocache", "ragrade-cache")


def start_server(kind: str, latency: float) -> tuple[subprocess.Popen[str], str]:
    """Start the benchmark server in its own process; return it and its base URL."""
    if kind == "fast":
        cmd = [sys.executable, str(ROOT / "benchmarks" / "_fast_openai_server.py"), "--latency", str(latency)]
    else:
        code = (
            "import sys, threading; sys.path.insert(0, sys.argv[2]);"
            "from tests.support.openai_server import OpenAIServer;"
            "srv = OpenAIServer(latency_s=float(sys.argv[1]), max_log=0).start();"
            "print('PORT', srv.port, flush=True); threading.Event().wait()"
        )
        cmd = [sys.executable, "-c", code, str(latency), str(ROOT)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT"):
        proc.kill()
        raise SystemExit(f"benchmark server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}/v1"


def served(url: str) -> int | None:
    """POST requests the fast server has answered (None for the stdlib server)."""
    try:
        with urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/stats", timeout=5) as r:
            return int(json.loads(r.read())["served"])
    except Exception:
        return None


def body(i: int) -> dict[str, Any]:
    return {"model": "test-model", "messages": [{"role": "user", "content": f"benchmark question {i}"}]}


async def _timed(n: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> tuple[float, float]:
    sem = asyncio.Semaphore(concurrency)

    async def limited(i: int) -> None:
        async with sem:
            await one(i)

    await one(-1)  # warm-up: imports, first connection
    t0, c0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(limited(i) for i in range(n)))
    return time.perf_counter() - t0, time.process_time() - c0


async def run_ceiling(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """A minimal aiohttp client: the most this server and machine allow."""
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def one(i: int) -> None:
            async with session.post(url + "/chat/completions", json=body(i)) as r:
                json.loads(await r.read())

        return await _timed(n, concurrency, one)


async def run_httpx(url: str, n: int, concurrency: int) -> tuple[float, float]:
    """Bare httpx + json (no SDK, no cache, no retries)."""
    import httpx

    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def one(i: int) -> None:
            r = await client.post(url + "/chat/completions", json=body(i), headers={"Authorization": "Bearer x"})
            json.loads(r.content)

        return await _timed(n, concurrency, one)


def run_ragrade(url: str, n: int, concurrency: int, cache: bool, tag: str) -> tuple[float, float]:
    """``create_llm`` + ``generate`` through the official SDK; the cache (when on) is a fresh file."""
    from ragrade.llm import GenerationRequest, Message, create_llm, generate

    with tempfile.TemporaryDirectory(prefix="ragrade-bench-cache-") as cache_dir:
        llm: Any = create_llm(
            "openai/test-model",
            base_url=url,
            api_key="sk-bench",
            cache=cache,
            cache_dir=cache_dir,
            concurrency=concurrency,
            timeout=30,
        )
        generate(llm, [GenerationRequest(messages=(Message("user", f"warm-up {tag}"),))])
        reqs = [GenerationRequest(messages=(Message("user", f"benchmark question {tag} {i}"),)) for i in range(n)]
        t0, c0 = time.perf_counter(), time.process_time()
        out = generate(llm, reqs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        bad = [c.error for c in out if not c.ok]
        if bad:
            raise SystemExit(f"{len(bad)} requests failed, e.g. {bad[0]}")
        if cache:
            again = generate(llm, reqs)
            if not all(c.cached for c in again):
                raise SystemExit("the second run was not served from the cache")
        llm.close()
        return wall, cpu


def measure(name: str, url: str, args: argparse.Namespace, rep: int) -> dict[str, float]:
    """One timed run of configuration ``name``: wall, client CPU per request, requests served (all runs)."""
    before = served(url)
    if name == "ceiling":
        wall, cpu = asyncio.run(run_ceiling(url, args.n, args.concurrency))
    elif name == "httpx":
        wall, cpu = asyncio.run(run_httpx(url, args.n, args.concurrency))
    else:
        wall, cpu = run_ragrade(url, args.n, args.concurrency, cache=name == "ragrade-cache", tag=f"{name}-{rep}")
    after = served(url)
    n_served = (after - before) if before is not None and after is not None else float("nan")
    return {"wall": wall, "cpu_ms": 1000 * cpu / args.n, "served": n_served, "load": os.getloadavg()[0]}


def profile(url: str, args: argparse.Namespace) -> None:
    """Where the client's CPU goes on one cached run, grouped by layer (cProfile self time)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    run_ragrade(url, args.n, args.concurrency, cache=True, tag="profile")
    prof.disable()
    groups: dict[str, float] = {}
    stats: Any = cast(Any, pstats.Stats(prof)).stats
    for (filename, _line, _fn), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        groups[_layer(filename)] = groups.get(_layer(filename), 0.0) + tottime
    total = sum(groups.values())
    print(f"\nprofile (cProfile self time, inflated by the profiler; {args.n} requests + warm-up + cached rerun):")
    for layer, secs in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {layer:32s} {1000 * secs / args.n:6.3f} ms/request  {100 * secs / total:5.1f}%")


def _layer(filename: str) -> str:
    f = filename.replace("\\", "/")
    for key, label in (
        ("/ragrade/llm/cache", "ragrade cache (sqlite, keys)"),
        ("/ragrade/llm/", "ragrade llm layer"),
        ("/openai/_vendor/httpx_aiohttp", "SDK aiohttp adapter"),
        ("/openai/", "openai SDK (request building)"),
        ("/httpx2/", "httpx2 (SDK request/response)"),
        ("/httpx/", "httpx"),
        ("/httpcore/", "httpcore"),
        ("/aiohttp/", "aiohttp transport"),
        ("/pydantic", "pydantic"),
        ("/asyncio/", "asyncio event loop"),
        ("/json/", "json"),
        ("sqlite3", "sqlite3"),
    ):
        if key in f:
            return label
    if f.startswith("~") or f.startswith("<"):
        return "builtins (socket, hashing, ...)"
    return "other python"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--server", choices=("fast", "stdlib"), default="fast")
    ap.add_argument("--only", default=",".join(CONFIGS), help=f"comma-separated subset of {', '.join(CONFIGS)}")
    ap.add_argument("--profile", action="store_true", help="also profile one ragrade-cache run")
    args = ap.parse_args()
    names = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = set(names) - set(CONFIGS)
    if unknown:
        raise SystemExit(f"unknown configuration(s): {', '.join(sorted(unknown))}")

    proc, url = start_server(args.server, args.latency)
    ideal = math.ceil(args.n / args.concurrency) * args.latency
    results: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    try:
        for rep in range(args.repeat):
            for name in names:  # interleaved, so that a load spike hits every configuration alike
                r = measure(name, url, args, rep)
                results[name].append(r)
                print(
                    f"  rep {rep + 1} {name:16s} wall={r['wall']:6.2f}s ratio={r['wall'] / ideal:5.2f} "
                    f"cpu={r['cpu_ms']:5.2f} ms/req served={r['served']:.0f} load1={r['load']:.1f}",
                    flush=True,
                )
        if args.profile:
            profile(url, args)
    finally:
        proc.kill()
        proc.wait()

    print(
        f"\nrequests={args.n} latency={args.latency}s concurrency={args.concurrency} ideal={ideal:.2f}s "
        f"server={args.server} cpu_count={os.cpu_count()} loadavg={'/'.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(f"{'configuration':18s} {'median wall':>11s} {'ratio':>6s} {'best':>6s} {'cpu ms/req':>10s}")
    for name in names:
        walls = [r["wall"] for r in results[name]]
        cpu = statistics.median(r["cpu_ms"] for r in results[name])
        med = statistics.median(walls)
        print(f"{name:18s} {med:10.2f}s {med / ideal:6.2f} {min(walls) / ideal:6.2f} {cpu:10.2f}")
    if "ragrade-cache" in results:
        med = statistics.median(r["wall"] for r in results["ragrade-cache"])
        verdict = "meets" if med / ideal <= 1.25 else "misses"
        print(f"goal: ragrade-cache ratio <= 1.25 -> {med / ideal:.2f} ({verdict} the goal)")
        if "ceiling" in results:
            ceil_med = statistics.median(r["wall"] for r in results["ceiling"])
            print(f"ragrade-cache / ceiling = {med / ceil_med:.2f} (client overhead over the machine's best)")


if __name__ == "__main__":
    main()
