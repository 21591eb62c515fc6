"""Query work done once: query embeddings, search results and LLM query rewrites shared by the pipelines of a grid.

A grid's pipelines often differ only downstream of retrieval (LLM, ICL, prompt) or share the queries'
vectors (dense and hybrid, k=1 and k=3, two chunkings of one embedder). The memos here make each
distinct piece of query work run once per process:

* :func:`embed_queries` embeds a batch of queries once per (embedder, batch); vectors also go to the
  on-disk embedding cache (:mod:`ragrade.embedding.cache`, under the embedder's key plus ``|query``),
  so other processes (Ray workers) and later runs read them instead of encoding again;
* :class:`Memo` keeps results of deterministic calls (BM25 and vector-store searches) by their inputs;
* :func:`shared_call` runs an async call (an LLM query rewrite) once per key, concurrent callers on the
  same event loop awaiting the one in flight.

A batch is embedded as given, never split or merged with other batches, so a vector is the one the
per-pipeline path computes for the same shard (on a bf16 path the vector of a text depends slightly on the
other texts of its batch). A batch whose every text another process (an earlier run, the driver of a Ray
run) stored is read back from the embedding cache; a text this process embedded is reused only in its batch.

``RAGRADE_SHARE_RETRIEVAL=0`` turns all of it off (every pipeline repeats its own query work, the path
before sharing; for benchmarks and debugging). :data:`QUERY_STATS` counts the texts sent to an embedder
for queries in this process.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")
SHARE_ENV = "RAGRADE_SHARE_RETRIEVAL"
QUERY_SUFFIX = "|query"  # the embedding cache namespace of query vectors


def sharing_enabled() -> bool:
    """Whether query work is shared (``RAGRADE_SHARE_RETRIEVAL`` unset or not 0/false/no/off)."""
    return os.environ.get(SHARE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class QueryStats:
    """Query texts this process sent to an embedder: in all (``encoded``), per text and per batch."""

    def __init__(self) -> None:
        self.per_text: Counter[str] = Counter()
        self.per_batch: Counter[tuple[str, ...]] = Counter()
        self._lock = threading.Lock()

    def add(self, texts: Sequence[str]) -> None:
        """Count one encoding of each of ``texts`` (one batch)."""
        with self._lock:
            self.per_text.update(texts)
            self.per_batch[tuple(texts)] += 1

    @property
    def encoded(self) -> int:
        """Query texts encoded in all."""
        return sum(self.per_text.values())

    def reset(self) -> None:
        """Forget the counts."""
        with self._lock:
            self.per_text.clear()
            self.per_batch.clear()


QUERY_STATS = QueryStats()


class Memo:
    """A bounded, thread-safe least-recently-used map (results of deterministic calls by their inputs)."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._data: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value stored under ``key`` or None."""
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: object) -> None:
        """Store ``value`` under ``key`` (dropping the least recently used entry when full)."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._data.clear()


_VECTORS = Memo(1024)
_DISK: dict[str, object] = {}
_DISK_LOCK = threading.Lock()
# texts this process stored: a batch holding one is embedded as given, never pieced together from other batches
_WRITTEN: set[tuple[str, str]] = set()


def _disk_cache() -> Any:
    """The embedding cache of ``$RAGRADE_CACHE_DIR`` (one handle per folder), or None when unusable."""
    from ragrade.embedding.onnx_embed import cache_root
    from ragrade.errors import DataError

    root = str(cache_root())
    with _DISK_LOCK:
        if root not in _DISK:
            try:
                from ragrade.embedding.cache import EmbeddingCache

                _DISK[root] = EmbeddingCache()
            except (OSError, DataError):
                _DISK[root] = None
        return _DISK[root]


def embed_queries(embedder: Any, queries: Sequence[str]) -> npt.NDArray[np.float32]:
    """Vectors of ``queries`` from ``embedder``, embedded once per (embedder, batch) (see the module)."""
    texts = list(queries)
    if not sharing_enabled() or not texts:
        QUERY_STATS.add(texts)
        return np.asarray(embedder.embed(texts), dtype=np.float32)
    ckey = getattr(embedder, "cache_key", None)
    key = (ckey or getattr(embedder, "name", repr(embedder)), id(embedder) if not ckey else 0, tuple(texts))
    found = _VECTORS.get(key)
    if found is not None:
        return np.array(found, copy=True)
    vecs = _from_disk(ckey, texts) if isinstance(ckey, str) else None
    if vecs is None:
        QUERY_STATS.add(texts)
        vecs = np.asarray(embedder.embed(texts), dtype=np.float32)
        if isinstance(ckey, str):
            _to_disk(ckey, texts, vecs)
    _VECTORS.put(key, vecs)
    return np.array(vecs, copy=True)


def _from_disk(ckey: str, texts: list[str]) -> npt.NDArray[np.float32] | None:
    from ragrade.embedding.cache import text_sha

    cache = _disk_cache()
    if cache is None:
        return None
    shas = [text_sha(t) for t in texts]
    with _DISK_LOCK:
        if any((ckey, s) in _WRITTEN for s in shas):  # embedded here in another batch: embed this one as given
            return None
    try:
        have = cache.lookup(ckey + QUERY_SUFFIX, shas)
    except Exception:  # a busy or damaged cache: compute instead
        return None
    if any(s not in have for s in shas):
        return None
    return np.stack([have[s] for s in shas]).astype(np.float32)


def _to_disk(ckey: str, texts: list[str], vecs: npt.NDArray[np.float32]) -> None:
    from ragrade.embedding.cache import text_sha

    cache = _disk_cache()
    if cache is None:
        return
    shas = [text_sha(t) for t in texts]
    try:
        cache.store(ckey + QUERY_SUFFIX, shas, vecs)
    except Exception:  # the vectors are still used; only their reuse is lost
        return
    with _DISK_LOCK:
        if len(_WRITTEN) > 500_000:
            _WRITTEN.clear()
        _WRITTEN.update((ckey, s) for s in shas)


_INFLIGHT: dict[Hashable, asyncio.Future[Any]] = {}
_RESULTS = Memo(256)


async def shared_call(key: Hashable, make: Callable[[], Awaitable[T]], memo: Memo | None = None) -> T:
    """``await make()`` once per ``key``: later callers get the stored result, concurrent ones await it.

    Results are kept in ``memo`` (default: this module's). Failures are not stored (the next caller
    tries again). Without sharing, always calls ``make``.
    """
    if not sharing_enabled():
        return await make()
    results = _RESULTS if memo is None else memo
    done: T | None = results.get(key)
    if done is not None:
        return done
    loop = asyncio.get_running_loop()
    running = _INFLIGHT.get(key)
    if running is not None and running.get_loop() is loop:
        return await asyncio.shield(running)
    fut: asyncio.Future[object] = loop.create_future()
    _INFLIGHT[key] = fut
    try:
        value = await make()
    except asyncio.CancelledError:
        fut.cancel()
        raise
    except Exception as exc:
        fut.set_exception(exc)
        fut.exception()  # retrieved: no "never retrieved" warning when nobody waited
        raise
    finally:
        if _INFLIGHT.get(key) is fut:
            del _INFLIGHT[key]
    fut.set_result(value)
    results.put(key, value)
    return value


def hashable(obj: object) -> Hashable:
    """``obj`` itself when it can be a dict key (kept alive and compared as the object), else its id."""
    if not isinstance(obj, Hashable):
        return ("id", id(obj))
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return obj


def memo_search(memo: Memo, owner: object, queries: Sequence[str], k: int, search: Callable[[], list[T]]) -> list[T]:
    """``search()`` once per (``owner``, ``queries``, ``k``) while sharing is on (a shallow copy each time).

    ``owner`` (the retriever or index searched) is referenced weakly beside the result and compared by
    identity: a result is never served for another object, and never keeps an index in memory.
    """
    if not sharing_enabled():
        return search()
    key = (id(owner), k, tuple(queries))
    got = memo.get(key)
    if got is not None and got[0]() is owner:
        return list(got[1])
    out = search()
    memo.put(key, (weakref.ref(owner), out))
    return list(out)


def clear_query_memos() -> None:
    """Forget every memo of this module (tests, benchmarks)."""
    _VECTORS.clear()
    _RESULTS.clear()
    with _DISK_LOCK:
        _WRITTEN.clear()
    for memo in MEMOS:
        memo.clear()


MEMOS: list[Memo] = []  # other modules' memos, cleared with clear_query_memos()


def register_memo(size: int = 512) -> Memo:
    """A new :class:`Memo` cleared by :func:`clear_query_memos`."""
    memo = Memo(size)
    MEMOS.append(memo)
    return memo


__all__ = [
    "QUERY_STATS",
    "SHARE_ENV",
    "Memo",
    "QueryStats",
    "clear_query_memos",
    "embed_queries",
    "hashable",
    "memo_search",
    "register_memo",
    "shared_call",
    "sharing_enabled",
]
