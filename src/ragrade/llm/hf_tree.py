"""The hf backend's batched scorer: prefix-tree rows (:mod:`ragrade.llm.prefix_tree`) through a transformers model.

One forward pass per batch of rows: token ids padded on the right, position ids = tree depths, and a 4-D
additive attention mask built on the device from the rows' subtree ends (``k <= q < end[k]``), which
transformers hands to the attention as it is. Only the positions whose logits are needed (the last context
token and each continuation token but the last) go through the output layer: a pre-hook on the model's
output embeddings gathers their hidden states, so the model's own head, and whatever it applies after it
(a logit soft-cap, a scale), computes ``[positions, vocabulary]`` logits instead of ``[rows, length,
vocabulary]``. Log-softmax runs in float32 whatever the weights' dtype; sums in float64.

Out of memory (CUDA, MPS or the CPU allocator) halves the token budget and retries the same rows, down to
one row per pass; a row that does not fit alone fails its requests with the error (missing, never dropped),
and the budget stays halved for later batches (:attr:`TreeScorer.budget`).

:meth:`TreeScorer.check` compares the batched scores of a probe with full forwards of each sequence (the
``per-choice`` method) once per model: an architecture that ignores the custom mask or positions, or whose
head the gather changes, is caught there and the backend falls back to per-request scoring, saying so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragrade.llm.core import log
from ragrade.llm.prefix_tree import Item, Row, TreeStats, plan_batches, plan_rows

Scores = list[float] | str  # a request's scores, or the error that failed it
#: rows of gathered logits given to one log_softmax call (torch's log_softmax, as a lone request's scoring and
#: lm-evaluation-harness use: torch.logsumexp differs from it by up to ~1e-4 over a 262k vocabulary)
LOGSOFTMAX_ROWS = 1024
#: successful passes after an out-of-memory error before the token budget grows back (by half, never past 90%
#: of the smallest pass that ran out of memory, nor past the budget it started with)
GROW_AFTER = 8
#: requests in the first chunk of a streamed call (:func:`chunk_bounds`): what the device waits for
FIRST_CHUNK = 64
#: later chunks grow by doubling up to this many passes' worth of requests
CHUNK_PASSES = 4
STOPPED = "stopped before this request was scored"


def is_oom(exc: BaseException) -> bool:
    """True for an out-of-memory error of any torch device (CUDA, MPS, the CPU allocator)."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def chunk_bounds(n: int, budget: int, placed: Sequence[tuple[int, Item]] | None) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` bounds of the chunks in which a call of ``n`` requests is encoded and planned: one chunk
    when ``placed`` is None; else :data:`FIRST_CHUNK` requests, then each chunk twice the one before, up to
    :data:`CHUNK_PASSES` passes of ``budget`` token positions at the mean cost of the requests ``placed`` so
    far (read when each chunk is cut, so the list may grow between chunks)."""
    if placed is None or n <= 2 * FIRST_CHUNK:
        yield 0, n
        return
    lo, size = 0, FIRST_CHUNK
    while lo < n:
        hi = min(n, lo + size)
        if n - hi < FIRST_CHUNK // 2:  # no small chunk at the end
            hi = n
        yield lo, hi
        lo = hi
        mean = sum(it.cost for _, it in placed) / len(placed) if placed else 0.0
        cap = max(FIRST_CHUNK, int(CHUNK_PASSES * budget / mean)) if mean else 2 * size
        size = min(2 * size, cap)


@dataclass
class Pass:
    """A forward pass queued on the device: its rows, the picked log-probabilities (a device tensor, sorted
    by gathered position; None when nothing is picked) and the order that sorted them."""

    rows: list[Row]
    picked: Any
    order: np.ndarray


class TreeScorer:
    """Scores encoded requests in prefix-tree batches on one transformers model (see module docstring)."""

    def __init__(
        self,
        lm: Any,
        torch: Any,
        device: str,
        *,
        budget: int,
        row_cap: int = 2048,
        share: bool = True,
        empty_cache: Callable[[], None] | None = None,
    ) -> None:
        self.lm, self.torch, self.device = lm, torch, device
        self.budget = max(1, budget)
        self._start_budget = self.budget
        self._ceiling: int | None = None  # padded positions of the smallest pass that ran out of memory
        self._since_oom = 0
        self.row_cap = row_cap
        self.share = share
        self.stats = TreeStats()
        self._empty_cache = empty_cache or (lambda: None)
        self._dtype = next(lm.parameters()).dtype
        pad = getattr(lm.config, "pad_token_id", None)
        self._pad = int(pad) if isinstance(pad, int) and pad >= 0 else 0

    # -- scoring -------------------------------------------------------------------------------------------------
    def score(self, items: Sequence[Item], stop: Callable[[], bool] = lambda: False) -> list[Scores]:
        """Per request, the summed log-probability of each continuation (or the error that failed it)."""
        return self.score_stream(iter([items]), stop)

    def score_stream(self, chunks: Iterator[Sequence[Item]], stop: Callable[[], bool] = lambda: False) -> list[Scores]:
        """:meth:`score` of the requests of every chunk, in order, taking a chunk only when the passes planned
        so far have all been queued.

        Passes overlap with the host's work: pass i+1 is prepared and queued on the device before the
        results of pass i are read back, and the next chunk (whose encoding the iterator may do when asked)
        is planned while the device still runs the last two passes, so a GPU waits for the host only for
        the first chunk. Rows never mix chunks: a chunk's last pass may be smaller than the budget. After a
        stop request the output is shorter than the requests offered: those of the chunks never taken."""
        out: list[Scores] = []
        pending: list[list[Row]] = []
        started, led = time.perf_counter(), False

        def refill() -> bool:
            chunk = next(chunks, None)
            if chunk is None:
                return False
            pending.extend(self._plan(chunk, base=len(out)))
            out.extend(["not scored"] * len(chunk))
            return True

        more = refill()
        flight: Pass | None = None
        while pending or flight is not None or more:
            if not pending and more:
                more = refill()
                continue
            queued: Pass | None = None
            if pending and stop():  # chunks not yet taken are left out: the caller counts them as stopped
                pending, more = [], False
                for n, got in enumerate(out):
                    if got == "not scored" and not self._in_flight(flight, n):
                        out[n] = STOPPED
            elif pending:
                batch = pending.pop(0)
                try:
                    queued = self.launch(batch)
                    self._grow()
                    if not led:
                        self.stats.lead += time.perf_counter() - started
                        led = True
                except Exception as exc:
                    if not is_oom(exc):
                        self._fail(batch, exc, out)
                        continue
                    self._empty_cache()
                    if flight is not None:  # finish what is in flight, then retry with the memory it held
                        self._deliver(flight, out)
                        flight = None
                        pending.insert(0, batch)
                        continue
                    pending[:0] = self._split(batch, exc, out)
                    continue
                if not pending and more:  # plan the next chunk while the device runs what is queued
                    more = refill()
            if flight is not None:
                self._deliver(flight, out)
            flight = queued
        return out

    def _plan(self, items: Sequence[Item], base: int) -> list[list[Row]]:
        """``items`` as passes of rows, request indices offset by ``base`` (their place in the output)."""
        t0 = time.perf_counter()
        rows = plan_rows(items, max(self.row_cap, max((it.cost for it in items), default=1)), share=self.share)
        for row in rows:
            row.items = [base + i for i in row.items]
        self.stats.requests += len(items)
        self.stats.plain_positions += sum(it.plain for it in items)
        batches = plan_batches(rows, self.budget)
        self.stats.add_seconds("plan", time.perf_counter() - t0)
        return batches

    @staticmethod
    def _in_flight(flight: Pass | None, n: int) -> bool:
        return flight is not None and any(n in row.items for row in flight.rows)

    def _split(self, batch: list[Row], exc: BaseException, out: list[Scores]) -> list[list[Row]]:
        """After out of memory on ``batch`` alone: halve the token budget and re-plan it (a lone row that does
        not fit fails its own requests)."""
        self.stats.oom_splits += 1
        size = len(batch) * max(len(r) for r in batch)
        self._ceiling = size if self._ceiling is None else min(self._ceiling, size)
        self._since_oom = 0
        if len(batch) == 1:
            for i in batch[0].items:
                out[i] = f"out of memory on one row of {len(batch[0])} token positions: {str(exc)[:200]}"
            return []
        width = max(len(r) for r in batch)
        self.budget = max(width, (len(batch) * width) // 2)
        log.warning("hf: out of memory on %d rows x %d tokens; token budget now %d", len(batch), width, self.budget)
        return plan_batches(batch, self.budget)

    def _grow(self) -> None:
        """After :data:`GROW_AFTER` passes without running out of memory, let the budget grow back by half
        (bounded by 90% of the smallest pass that did not fit): one transient shortage (another process, a
        fragmented cache) must not keep every later batch small."""
        self._since_oom += 1
        if self._ceiling is None or self.budget >= self._start_budget or self._since_oom < GROW_AFTER:
            return
        grown = min(self._start_budget, self.budget + self.budget // 2, int(0.9 * self._ceiling))
        if grown > self.budget:
            self.budget, self._since_oom = grown, 0

    def _fail(self, rows: Sequence[Row], exc: BaseException, out: list[Scores]) -> None:
        """A pass that failed for a reason other than memory: its requests fail with the error (missing
        data, counted by the caller; a rerun scores them again), the other passes go on."""
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        self.stats.failed_passes += 1
        if self.stats.failed_passes == 1:
            log.warning("hf: a forward pass failed (%s); its %d requests are missing, the others go on", why,
                        sum(len(r.items) for r in rows))  # fmt: skip
        for row in rows:
            for i in row.items:
                out[i] = f"forward pass failed: {why}"

    def _deliver(self, flight: Pass, out: list[Scores]) -> None:
        try:
            got = self.collect(flight)
        except Exception as exc:  # an asynchronous device error surfaces when the results are read
            self._fail(flight.rows, exc, out)
            return
        for row, per_item in zip(flight.rows, got, strict=True):
            for i, scores in zip(row.items, per_item, strict=True):
                out[i] = scores

    def forward(self, rows: Sequence[Row]) -> list[list[list[float]]]:
        """One forward pass over ``rows``: per row, per request, the score of each continuation."""
        return self.collect(self.launch(rows))

    def launch(self, rows: Sequence[Row]) -> Pass:
        """Prepare one forward pass over ``rows`` and queue it on the device (on a GPU this returns before the
        device has finished; :meth:`collect` reads the results)."""
        t0 = time.perf_counter()
        torch = self.torch
        width = max(len(r) for r in rows)
        n = len(rows)
        ids = np.full((n, width), self._pad, dtype=np.int64)
        pos = np.zeros((n, width), dtype=np.int64)
        end = np.tile(np.arange(1, width + 1, dtype=np.int64), (n, 1))  # padding attends to itself only
        flat: list[int] = []
        cols: list[int] = []
        for b, row in enumerate(rows):
            m = len(row)
            ids[b, :m], pos[b, :m], end[b, :m] = row.tokens, row.depth, row.end
            for per in row.targets:
                for opt in per:
                    flat.extend(b * width + p for p, _ in opt)
                    cols.extend(tok for _, tok in opt)
        at = np.asarray(flat, dtype=np.int64)
        keep = np.unique(at)
        rank = np.searchsorted(keep, at)  # each pick's row among the gathered logits
        order = np.argsort(rank, kind="stable")
        with torch.inference_mode():
            dev = self.device
            t_ids, t_pos, t_end = self._to_device(ids), self._to_device(pos), self._to_device(end)
            idx = torch.arange(width, device=dev)
            allowed = (idx[None, None, :] <= idx[None, :, None]) & (idx[None, :, None] < t_end[:, None, :])
            mask = torch.zeros((n, 1, width, width), dtype=self._dtype, device=dev)
            mask.masked_fill_(~allowed[:, None], torch.finfo(self._dtype).min)
            del allowed
            logits = self._gathered_logits(t_ids, t_pos, mask, self._to_device(keep))
            del mask
            picked = self._picked(logits, rank[order], np.asarray(cols, dtype=np.int64)[order])
        self.stats.forward_passes += 1
        self.stats.token_positions += sum(len(r) for r in rows)
        self.stats.padded_positions += n * width
        self.stats.batch_sizes.append(sum(len(r.items) for r in rows))
        self.stats.add_seconds("launch", time.perf_counter() - t0)
        return Pass(list(rows), picked, order)

    def collect(self, flight: Pass) -> list[list[list[float]]]:
        """Per row, per request, per continuation of a launched pass: the sum of its tokens' log-probabilities
        (log-softmax in float32, summed in float64). Blocks until the device has finished the pass."""
        t0 = time.perf_counter()
        got = flight.picked.double().cpu().numpy() if flight.picked is not None else np.zeros(0)
        self.stats.add_seconds("wait", time.perf_counter() - t0)
        values = np.empty(len(got), dtype=np.float64)
        values[flight.order] = got
        listed = values.tolist()
        out: list[list[list[float]]] = []
        at = 0
        for row in flight.rows:
            per_row = []
            for per in row.targets:
                sums = []
                for opt in per:
                    sums.append(math.fsum(listed[at : at + len(opt)]))
                    at += len(opt)
                per_row.append(sums)
            out.append(per_row)
        return out

    def _gathered_logits(self, ids: Any, pos: Any, mask: Any, keep: Any) -> Any:
        """Float32 logits ``[len(keep), vocabulary]`` at the flat positions ``keep`` (b * width + p)."""
        head = self.lm.get_output_embeddings()

        def gather(_module: object, args: tuple[Any, ...]) -> tuple[Any, ...]:
            hidden = args[0]
            return (hidden.reshape(-1, hidden.shape[-1]).index_select(0, keep).unsqueeze(0), *args[1:])

        handle = head.register_forward_pre_hook(gather)
        try:
            with self._attention_kernels():
                out = self.lm(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False, logits_to_keep=0)
        finally:
            handle.remove()
        return out.logits[0].float()

    def _to_device(self, arr: np.ndarray, device: Any = None) -> Any:
        """``arr`` as a tensor on the device. On CUDA the copy goes through pinned memory without blocking: a
        copy from pageable memory waits for everything queued before it, which would make each pass wait for
        the one before it to finish (no overlap with the host's work). The caching host allocator keeps the
        pinned buffer until the copy has run."""
        dev = self.device if device is None else device
        t = self.torch.from_numpy(arr)
        if str(dev).startswith("cuda"):
            return t.pin_memory().to(dev, non_blocking=True)
        return t.to(dev)

    def _attention_kernels(self) -> Any:
        """On CUDA, scaled-dot-product attention without the cuDNN kernel: with a custom 4-D mask it fails on
        some shapes ("mha_graph.execute ... is_good()", an H200 with a 7B Llama's 128-wide heads in bf16);
        the memory-efficient kernel takes the same mask. Elsewhere, no restriction."""
        import contextlib

        if not str(self.device).startswith("cuda"):
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH])

    def _picked(self, logits: Any, rows: np.ndarray, cols: np.ndarray) -> Any:
        """The log-probabilities at (``rows[i]``, ``cols[i]``) of ``logits``, ``rows`` ascending, on the device
        (no synchronisation: the slices are cut on the host)."""
        torch = self.torch
        if not len(rows):
            return None
        t_rows, t_cols = self._to_device(rows, logits.device), self._to_device(cols, logits.device)
        parts = []
        for start in range(0, logits.shape[0], LOGSOFTMAX_ROWS):  # a slice of rows at a time: bounded memory
            a, b = np.searchsorted(rows, [start, start + LOGSOFTMAX_ROWS])
            if a == b:
                continue
            part = torch.log_softmax(logits[start : start + LOGSOFTMAX_ROWS], dim=-1)
            parts.append(part[t_rows[a:b] - start, t_cols[a:b]])
        return torch.cat(parts)

    # -- the once-per-model check --------------------------------------------------------------------------------
    def check(self, items: Sequence[Item], reference: Callable[[Item], list[float]], tolerance: float) -> str | None:
        """None when the batched scores of ``items`` equal ``reference`` (full forwards) within ``tolerance``,
        else why not."""
        rows = plan_rows(items, 1 << 30, share=True)
        saved, self.stats = self.stats, TreeStats()  # the check is not the run's work
        try:
            got = self.forward(rows)
        except Exception as exc:
            if is_oom(exc):
                return None  # the check itself did not fit: not evidence against the method
            return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        finally:
            self.stats = saved
        batched = {i: s for row, per in zip(rows, got, strict=True) for i, s in zip(row.items, per, strict=True)}
        worst = 0.0
        for i, it in enumerate(items):
            ref = reference(it)
            worst = max([worst, *(abs(a - b) for a, b in zip(batched[i], ref, strict=True))])
        return None if worst <= tolerance else f"batched scores differ from full forwards by {worst:.3g} nats"


__all__ = ["Pass", "Scores", "TreeScorer", "is_oom"]
