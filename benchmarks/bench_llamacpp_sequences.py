"""``llamacpp/``: one request at a time against schedules that decode several sequences in one call.

Model: the embedded Gemma 3 270M (``llamacpp/gemma-3-270m``). Items: the first N four-option items of
``bench_real_mcq.py`` (a ~300-token docstring passage, four names), encoded as the backend encodes them.

Schedules, all on the same thread count, each timed over every item (best of ``--reps``, run in turn):

* ``one at a time`` -- the backend's own (``LlamaCppLLM.shared_prefix_scores``): a context, then each
  option after it, one option per ``llama_decode`` call, on sequence 0 of an emptied cache.
* ``questions`` -- ``--group`` questions at once, each on its own sequence id: their contexts one after
  the other, then one option of every question per round, the rounds' rows packed into calls of at most
  ``ROWS_PER_DECODE`` rows, each option dropped again after its round.
* ``backend`` -- the backend's own parallel sequences (``LlamaCppLLM.parallel_scores``, ``parallel_sequences
  = --group``): the ``questions`` schedule with cells aligned to ``SLOT_ALIGN`` (16) and each round's options
  ordered to need the fewest pad rows; the backend's once-per-model check against one at a time is left out.
* ``options`` -- one question at a time, its options on their own sequence ids sharing the context's
  cells (``seq_cp``), packed into calls of at most ``ROWS_PER_DECODE`` rows.
* ``contexts`` -- ``--workers`` llama.cpp contexts on Python threads, each scoring its share of the
  items one at a time, with ``threads // workers`` threads each (no sequence ids: the one-at-a-time
  schedule on several contexts at once).

The KV cache's cells are shared by all sequences, and the numbers depend on where a token's cell lies:
``--align A`` (default 8) fills spare cells on a pad sequence so that every cell index equals its
position modulo A, which is what makes the ``questions`` and ``options`` schedules reproduce the
one-at-a-time numbers (``--align 1``: no padding, to see the difference). For each schedule the
script prints the time, the items/s, the speed relative to one at a time, and the largest
|difference| in any option's log-likelihood from one at a time, against the tolerance the backend's
tests use (1e-4 nats). Timings are wall clock on whatever machine runs it; nothing is extrapolated.

    .venv/bin/python benchmarks/bench_llamacpp_sequences.py [--items 8] [--threads N] [--group 4] [--align 8]

Measured (this 2-core x86 AVX2 machine, ik-llama-cpp-python 0.1.5, 8 items, best of 2 runs each; the
machine was shared: other engineers' benchmarks (bench_adaptive.py and two more, niced), mypy and pytest
runs, load average 5.8-7.9 -- so differences under ~25% are noise: ``contexts 1x1t``, the one-at-a-time
schedule on a second backend, came out at 0.78x of itself):

========================  =========================  =========================
schedule                  --threads 1                --threads 2
========================  =========================  =========================
one at a time             11.26 s (1.00x)            52.62 s (1.00x)
questions x4 (align 8)    16.27 s (0.69x), exact     62.66 s (0.84x), exact
backend x4 (align 16)     16.73 s (0.67x), exact     53.05 s (0.99x), exact
options (align 8)         14.86 s (0.76x), exact     41.75 s (1.26x), exact
contexts, 1 thread each   14.48 s (0.78x), 1 of them 12.90 s (4.08x), 2 of them
========================  =========================  =========================

("exact": max|Δ| 0.00 nats against one at a time.) Commands: ``--items 8 --threads 1 --group 4 --reps 2``
(from 21:53 UTC, load 5.8 -> 6.9), then the same with ``--threads 2`` (load 6.9 -> 8.1). With 2 threads
on the busy machine every schedule was ~4x slower than with 1 (llama.cpp's threads spin while they wait
for a core), and there fewer, larger calls helped (options 1.26x, backend 0.99x); with 1 thread, the
faster setting here, no schedule with several sequences was faster. An earlier session on the same
machine, also busy: questions x4 at 0.67x (1 thread) and 0.77x (2 threads), options at 0.79x-1.03x.
Why: every row attends to every cell of the shared cache (the other questions' contexts too), the pad rows
run through every layer, and the contexts' prefill, most of the work, is one call per context either way.
So the backend's ``parallel_sequences`` defaults to 1 below 16 threads (``parallel_count``); the default
from 16 threads on (4 questions) is not measured: run this script there with ``--threads N --group G``
and move ``PARALLEL_FROM_THREADS`` / ``PARALLEL_DEFAULT`` by what it prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if TYPE_CHECKING:
    from ragrade.llm.llamacpp import LlamaCppLLM

TOLERANCE = 1e-4  # tests/llm/test_llm_llamacpp.py: scores against token-by-token decoding
Encoded = list[tuple[list[int], list[list[int]]]]


class Packer:
    """Rows of several sequences into ``llama_decode`` calls of at most ``limit`` rows, with pad cells so
    that each continuation's first cell index equals its first position modulo ``align``; collects each
    row's log-probability under its key."""

    def __init__(self, rt: Any, cell: int, align: int, pad_seq: int, limit: int) -> None:
        self.rt, self.cell, self.align, self.pad_seq, self.limit = rt, cell, align, pad_seq, limit
        self.batch: list[tuple[int, int, int, bool]] = []
        self.keys: list[tuple[Any, int]] = []
        self.pad_pos = 0
        self.rows: dict[Any, list[float]] = {}

    def add(self, key: Any, seq: int, tokens: list[int], start: int, targets: list[int]) -> None:
        for k, tok in enumerate(tokens):
            pad = (start - self.cell) % self.align if k == 0 else 0
            if len(self.batch) + pad + 1 > self.limit:
                self.flush()
            for _ in range(pad):
                self.batch.append((0, self.pad_pos, self.pad_seq, False))
                self.pad_pos += 1
            self.batch.append((tok, start + k, seq, True))
            self.keys.append((key, targets[k]))
            self.cell += pad + 1

    def flush(self) -> None:
        from ragrade.llm.llamacpp_lib import token_logprobs

        if self.batch:
            logits = self.rt.decode(self.batch)
            for (key, _), lp in zip(self.keys, token_logprobs(logits, [t for _, t in self.keys]), strict=True):
                self.rows.setdefault(key, []).append(lp)
        self.batch, self.keys = [], []


def total(first: float, rows: list[float], chunk: int) -> float:
    """An option's score summed as the backend sums it (first token, then per chunk of rows)."""
    out = first
    for s in range(0, len(rows), chunk):
        out += sum(rows[s : s + chunk])
    return out


def questions(rt: Any, enc: Encoded, group: int, align: int, limit: int) -> list[list[float]]:
    from ragrade.llm.llamacpp_lib import log_softmax64

    out: list[list[float]] = []
    for g in range(0, len(enc), group):
        chunk = enc[g : g + group]
        rt.clear()
        cell, firsts, pad_pos = 0, [], 0
        for s, (ctx, _) in enumerate(chunk):
            pad = (-cell) % align
            if pad:  # the context starts on a cell whose index is a multiple of align
                rt.decode([(0, pad_pos + k, group, False) for k in range(pad)])
                cell, pad_pos = cell + pad, pad_pos + pad
            firsts.append(log_softmax64(rt.prefill(ctx, seq=s)))
            cell += len(ctx)
        scores: list[list[float]] = [[] for _ in chunk]
        for r in range(max(len(conts) for _, conts in chunk)):
            pk = Packer(rt, cell, align, group + 1, limit)
            for s, (ctx, conts) in enumerate(chunk):
                if r < len(conts) and len(conts[r]) > 1:
                    pk.add(s, s, conts[r][:-1], len(ctx), conts[r][1:])
            pk.flush()
            for s, (ctx, conts) in enumerate(chunk):
                if r < len(conts):
                    first = float(firsts[s][conts[r][0]]) if conts[r] else 0.0
                    scores[s].append(total(first, pk.rows.get(s, []), limit) if conts[r] else 0.0)
                rt.seq_rm(s, len(ctx), -1)
            rt.seq_rm(group + 1, -1, -1)
        out.extend(scores)
    rt.clear()
    return out


def options(rt: Any, enc: Encoded, align: int, limit: int) -> list[list[float]]:
    from ragrade.llm.llamacpp_lib import log_softmax64

    out: list[list[float]] = []
    pad_seq = rt.n_seq - 1
    for ctx, conts in enc:
        rt.clear()
        first = log_softmax64(rt.prefill(ctx))
        for j in range(1, len(conts)):
            rt.seq_cp(0, j, -1, -1)
        pk = Packer(rt, len(ctx), align, pad_seq, limit)
        for j, c in enumerate(conts):
            if len(c) > 1:
                pk.add(j, j, c[:-1], len(ctx), c[1:])
        pk.flush()
        out.append([total(float(first[c[0]]), pk.rows.get(j, []), limit) if c else 0.0 for j, c in enumerate(conts)])
    rt.clear()
    return out


def backend(llm: LlamaCppLLM, enc: Encoded, group: int) -> list[list[float]]:
    """The backend's own parallel sequences (``parallel_sequences=group``; the once-per-model check left out)."""
    out: list[list[float]] = []
    for g in range(0, len(enc), group):
        out.extend(llm.parallel_scores(enc[g : g + group]))
    return out


def contexts(backends: list[LlamaCppLLM], enc: Encoded) -> list[list[float]]:
    n = len(backends)

    def share(w: int) -> list[list[float]]:
        return [backends[w].shared_prefix_scores(*enc[i]) for i in range(w, len(enc), n)]

    with ThreadPoolExecutor(n) as pool:
        parts = list(pool.map(share, range(n)))
    return [parts[i % n][i // n] for i in range(len(enc))]


def main() -> None:
    from bench_real_mcq import build_items

    from ragrade.llm import LLMOptions, create_llm
    from ragrade.llm.llamacpp import ROWS_PER_DECODE, LlamaCppLLM, thread_count
    from ragrade.llm.llamacpp_lib import LlamaRuntime

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--threads", type=int, default=None, help="default: the backend's (usable cores, or the env)")
    ap.add_argument("--group", type=int, default=4, help="questions decoded as parallel sequences")
    ap.add_argument("--align", type=int, default=8, help="cell index = position modulo this (1: no padding)")
    ap.add_argument("--workers", type=int, default=None, help="contexts of the 'contexts' schedule (default 2)")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    threads, source = thread_count(args.threads)
    workers = max(1, min(args.workers or 2, threads))
    llm = create_llm("llamacpp/gemma-3-270m", LLMOptions(cache=False, n_threads=threads))
    assert isinstance(llm, LlamaCppLLM)
    par = create_llm(llm.name, LLMOptions(cache=False, n_threads=threads), parallel_sequences=args.group)
    assert isinstance(par, LlamaCppLLM)
    enc: Encoded = [llm.encode_pair(it["context"], it["options"]) for it in build_items(args.items)]
    longest = max(len(c) + args.align + max(len(o) for o in conts) for c, conts in enc)
    n_seq = max(args.group + 2, max(len(conts) for _, conts in enc) + 1)
    rt = LlamaRuntime(llm.path, n_ctx=max(4096, args.group * longest + 256), n_threads=threads, n_seq=n_seq)
    per_worker = max(1, threads // workers)
    pool: list[LlamaCppLLM] = []
    for _ in range(workers):
        worker = create_llm(llm.name, LLMOptions(cache=False, n_threads=per_worker))
        assert isinstance(worker, LlamaCppLLM)
        pool.append(worker)
    runs: dict[str, Callable[[], list[list[float]]]] = {
        "one at a time": lambda: [llm.shared_prefix_scores(c, o) for c, o in enc],
        f"questions x{args.group}": lambda: questions(rt, enc, args.group, args.align, ROWS_PER_DECODE),
        f"backend x{args.group}": lambda: backend(par, enc, args.group),
        "options": lambda: options(rt, enc, args.align, ROWS_PER_DECODE),
        f"contexts {workers}x{per_worker}t": lambda: contexts(pool, enc),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    scores: dict[str, list[list[float]]] = {}
    for _ in range(args.reps):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            scores[name] = fn()
            times[name].append(time.perf_counter() - t0)
    report(args, threads, source, enc, times, scores)
    for each in [llm, par, *pool]:
        each.close()
    rt.close()


def report(
    args: argparse.Namespace,
    threads: int,
    source: str,
    enc: Encoded,
    times: dict[str, list[float]],
    scores: dict[str, list[list[float]]],
) -> None:
    n = len(enc)
    ctx = [len(c) for c, _ in enc]
    load = os.getloadavg()[0]
    print(f"llamacpp/gemma-3-270m: {n} items x 4 options, context tokens {min(ctx)}-{max(ctx)}; threads {threads} "
          f"({source}); align {args.align}; load average {load:.2f} on {os.cpu_count()} cores")  # fmt: skip
    base_name = "one at a time"
    base, base_t = scores[base_name], min(times[base_name])
    hdr = f"{'schedule':<18} {'best s':>7} {'items/s':>8} {'vs one':>7} {'max|Δ| nats':>12}  all runs"
    print(hdr)
    print("-" * len(hdr))
    for name, got in scores.items():
        best = min(times[name])
        delta = max(abs(a - b) for x, y in zip(base, got, strict=True) for a, b in zip(x, y, strict=True))
        runs = " ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:<18} {best:>7.2f} {n / best:>8.2f} {base_t / best:>6.2f}x {delta:>12.2e}  {runs}")
    print(f"tolerance of the backend's tests: {TOLERANCE:g} nats; a schedule qualifies when max|Δ| is within it "
          "and it is not slower than one at a time")  # fmt: skip


if __name__ == "__main__":
    main()
