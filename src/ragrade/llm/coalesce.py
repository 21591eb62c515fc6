"""Requests from many callers merged into large batches for one in-process model.

A grid runs many shards at once on one event loop; each shard asks its LLM for a few dozen scores. An
in-process model (a GPU above all) is fastest when it gets hundreds of requests per batch, sorted and
packed together. :class:`Coalescer` queues every caller's requests and a single worker thread takes
everything queued (after waiting a few milliseconds while more keeps arriving) as one batch, so that
batches grow with the number of callers in flight. A caller that was cancelled before its requests were
taken (a stop request) is skipped, never computed.

The worker thread is a daemon started on first use; :meth:`Coalescer.close` ends it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    """Runs ``work`` on merged batches of the items that concurrent callers of :meth:`run` submit."""

    def __init__(
        self,
        work: Callable[[list[T]], list[R]],
        *,
        gather_s: float = 0.02,
        settle_s: float = 0.002,
        max_items: int | None = None,
        name: str = "ragrade-batcher",
    ) -> None:
        self.work = work
        self.gather_s, self.settle_s = gather_s, settle_s
        self.max_items = max_items
        self.name = name
        self._cv = threading.Condition()
        self._queue: list[tuple[list[T], concurrent.futures.Future[list[R]]]] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches: list[int] = []  # items per batch handed to ``work``

    async def run(self, items: Sequence[T]) -> list[R]:
        """The results of ``items``, in order, computed in a batch with whatever else is queued."""
        if not items:
            return []
        fut: concurrent.futures.Future[list[R]] = concurrent.futures.Future()
        with self._cv:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            self._queue.append((list(items), fut))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cv.notify()
        return await asyncio.wrap_future(fut)

    def _queued(self) -> int:
        return sum(len(items) for items, _ in self._queue)

    def _take(self) -> list[tuple[list[T], concurrent.futures.Future[list[R]]]] | None:
        """Wait for work, let it gather while it keeps arriving, and take it (None once closed)."""
        with self._cv:
            while not self._queue and not self._closed:
                self._cv.wait()
            if self._closed:
                return None
            start = time.monotonic()
            while time.monotonic() - start < self.gather_s:
                if self.max_items is not None and self._queued() >= self.max_items:
                    break
                before = self._queued()
                self._cv.wait(self.settle_s)
                if self._queued() == before:
                    break
            taken: list[tuple[list[T], concurrent.futures.Future[list[R]]]] = []
            count = 0
            while self._queue and (self.max_items is None or not taken or count < self.max_items):
                items, fut = self._queue.pop(0)
                taken.append((items, fut))
                count += len(items)
            return taken

    def _loop(self) -> None:
        while True:
            taken = self._take()
            if taken is None:
                return
            live = [(items, fut) for items, fut in taken if fut.set_running_or_notify_cancel()]
            if not live:
                continue
            flat = [x for items, _ in live for x in items]
            self.batches.append(len(flat))
            try:
                results = self.work(flat)
            except BaseException as exc:  # handed to every caller; the thread lives on
                for _, fut in live:
                    fut.set_exception(exc)
                continue
            at = 0
            for items, fut in live:
                fut.set_result(results[at : at + len(items)])
                at += len(items)

    def close(self) -> None:
        """End the worker thread (queued callers get an error)."""
        with self._cv:
            self._closed = True
            pending, self._queue = self._queue, []
            self._cv.notify_all()
        for _, fut in pending:
            if fut.set_running_or_notify_cancel():
                fut.set_exception(RuntimeError(f"{self.name} was closed"))


__all__ = ["Coalescer"]
