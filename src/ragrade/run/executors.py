"""The generic resumable runner and its executors (local asyncio, Ray).

The unit of work is a :class:`Shard`: one pipeline and a list of item ids. A
*worker* is a function named ``"module:function"`` with the signature::

    worker(context: dict, spec: dict, items: list[str]) -> list[dict]   # or an async def

that returns exactly one row per item, each with an ``item_id`` key. Workers
receive only JSON data (file paths and settings), so the same worker runs in
this process or on a Ray cluster; they cache loaded resources themselves.

:func:`run_shards` skips items already in the :class:`~ragrade.run.store.Journal`,
runs the rest on an executor and commits every finished shard durably.
The exam sweep (:mod:`ragrade.run.sweep`) and free-text QA reuse it.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from ragrade import interrupt
from ragrade.errors import BackendError, ConfigError
from ragrade.io import JSONObject
from ragrade.progress import note_failed
from ragrade.run.records import Row, Sample, SpecRecord
from ragrade.run.store import Journal


@dataclass(frozen=True)
class Shard:
    """One pipeline's batch of items."""

    pipeline: str
    spec: SpecRecord
    items: tuple[str, ...]


ResultCallback = Callable[[Shard, list[Row]], None]


class Executor(Protocol):
    """Runs shards and reports each shard's rows through ``on_result`` in the calling thread."""

    name: str

    def run(
        self, worker: str, context: Mapping[str, object], shards: Sequence[Shard], on_result: ResultCallback
    ) -> None:
        """Run every shard; call ``on_result(shard, rows)`` as each finishes."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest."""
        ...


def resolve_callable(target: str) -> Callable[..., object]:
    """Import ``"package.module:function"`` (dotted attribute paths allowed after the colon).

    This imports and runs the user's code. The current folder is put first on ``sys.path``
    (as ``python -m`` does), so a ``my_rag.py`` beside the command line is found.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"expected 'module:function', got '{target}'")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import '{module_name}' for '{target}' ({exc})") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ConfigError(f"'{module_name}' has no attribute '{attr}'") from exc
    if not callable(obj):
        raise ConfigError(f"'{target}' is not callable")
    return obj


def call_worker(
    worker: str, context: Mapping[str, object], spec: Mapping[str, object], items: Sequence[str]
) -> list[Row]:
    """Call ``worker`` synchronously (running it to completion when it is async)."""
    fn = resolve_callable(worker)
    out = fn(dict(context), dict(spec), list(items))
    if inspect.isawaitable(out):
        from ragrade.llm.base import run_sync

        out = run_sync(_await(out))
    return worker_rows(worker, out)


def worker_rows(worker: str, out: object) -> list[Row]:
    """A worker's result as rows: a list of JSON objects (BackendError naming the worker otherwise)."""
    if not isinstance(out, list) or not all(isinstance(r, dict) for r in out):
        raise BackendError(f"worker {worker} returned {type(out).__name__}, not a list of rows (dicts)")
    return out


async def _await(aw: Awaitable[object]) -> object:
    return await aw


def plan_shards(
    journal: Journal, pipelines: Mapping[str, Mapping[str, object]], items: Sequence[str], shard_size: int
) -> list[Shard]:
    """Shards covering every (pipeline, item) not yet in ``journal``, pipeline by pipeline, items in order."""
    shards: list[Shard] = []
    for pid, spec in pipelines.items():
        done = journal.done_items(pid)
        pending = [i for i in items if i not in done]
        for start in range(0, len(pending), shard_size):
            shards.append(Shard(pid, dict(spec), tuple(pending[start : start + shard_size])))
    return shards


def run_shards(
    journal: Journal,
    shards: Sequence[Shard],
    worker: str,
    context: Mapping[str, object],
    executor: Executor,
    on_progress: Callable[[Shard, int], None] | None = None,
    on_samples: Callable[[list[Sample]], None] | None = None,
) -> int:
    """Run ``shards`` on ``executor``, committing each shard's rows to ``journal``; returns the rows added.

    A worker that returns rows for other items than it was given, or misses
    some, is a bug in the worker: BackendError names it. Samples of the requests
    sent (:data:`ragrade.run.samples.SAMPLE_KEY` in a row) are taken off the rows
    and handed to ``on_samples`` before the rows are journaled (dropped without it).
    """
    from ragrade.run.samples import take_samples

    added = 0

    def on_result(shard: Shard, rows: list[Row]) -> None:
        nonlocal added
        got = [str(r.get("item_id")) for r in rows]
        if sorted(got) != sorted(shard.items):
            missing = sorted(set(shard.items) - set(got))[:3]
            raise BackendError(
                f"worker {worker} returned {len(rows)} rows for {len(shard.items)} items "
                f"of '{shard.pipeline}' (missing e.g. {missing})"
            )
        samples = take_samples(rows)
        if on_samples is not None:
            on_samples(samples)
        added += journal.add(shard.pipeline, rows)
        note_failed(sum(1 for r in rows if r.get("error")))  # "failed so far" of the progress display
        if on_progress is not None:
            on_progress(shard, len(rows))

    if shards:
        executor.run(worker, context, shards, on_result)
    return added


class LocalExecutor:
    """Runs shards in this process; async workers run up to ``parallel`` shards concurrently on one loop."""

    name = "local"

    def __init__(self, parallel: int = 2) -> None:
        self.parallel = max(1, parallel)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"executor": self.name, "parallel": self.parallel}

    def run(
        self, worker: str, context: Mapping[str, object], shards: Sequence[Shard], on_result: ResultCallback
    ) -> None:
        """Run every shard here."""
        fn = resolve_callable(worker)
        if inspect.iscoroutinefunction(fn) and self.parallel > 1:
            from ragrade.llm.base import run_sync

            run_sync(self._run_async(worker, fn, context, shards, on_result))
            return
        for shard in shards:
            interrupt.check()
            on_result(shard, call_worker(worker, context, shard.spec, shard.items))

    async def _run_async(
        self,
        worker: str,
        fn: Callable[..., Awaitable[object]],
        context: Mapping[str, object],
        shards: Sequence[Shard],
        on_result: ResultCallback,
    ) -> None:
        sem = asyncio.Semaphore(self.parallel)

        async def one(i: int, shard: Shard) -> tuple[int, list[Row]]:
            async with sem:
                return i, worker_rows(worker, await fn(dict(context), dict(shard.spec), list(shard.items)))

        tasks = [asyncio.ensure_future(one(i, s)) for i, s in enumerate(shards)]
        reported: set[int] = set()
        try:
            for fut in asyncio.as_completed(tasks):
                i, rows = await fut
                reported.add(i)
                on_result(shards[i], rows)
        except asyncio.CancelledError:  # a stop request: keep the shards that finished meanwhile
            for i, t in enumerate(tasks):
                if i not in reported and t.done() and not t.cancelled() and t.exception() is None:
                    on_result(shards[i], t.result()[1])
            raise
        finally:
            for t in tasks:
                t.cancel()


class _RayWorkerImpl:
    """Body of the Ray actor: keeps the worker's caches alive across shards."""

    def run(self, worker: str, context: dict[str, object], spec: dict[str, object], items: list[str]) -> list[Row]:
        return call_worker(worker, context, spec, items)

    def dry_run_counts(self) -> list[dict[str, object]]:
        """What the dry-run LLMs of this actor's process counted (a dry run's requests, sent back)."""
        from ragrade.llm.dryrun import LEDGER

        return LEDGER.summaries()


ENV_PREFIXES = ("RAGRADE_", "HF_", "TRANSFORMERS_", "RAY_AUTH", "TOKENIZERS_", "NUMBA_CACHE")


def worker_env(local: bool) -> dict[str, str]:
    """The settings a worker reads from its environment, as this process has them now.

    The cache folder (``$RAGRADE_CACHE_DIR``, made absolute; on a local instance also the default one),
    model caches and offline switches. Everything else a worker needs (timeouts,
    retries, ``--no-cache``, a dry run) is in the LLM options shipped with every shard.
    """
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    if local or "RAGRADE_CACHE_DIR" in env:
        from ragrade.llm.cache import cache_dir

        env["RAGRADE_CACHE_DIR"] = str(cache_dir().resolve())
    if local:  # a local instance sees this interpreter's import path (user modules, tests)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    return env


class RayExecutor:
    """Distributes shards (pipelines x question shards) over Ray actors; only paths and settings travel.

    Connects to ``address`` when given (an existing cluster), else starts a
    local instance with ``workers`` CPUs. Actors keep loaded indexes and models
    between shards.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self.address = address
        self.workers = workers

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {"executor": self.name, "address": self.address, "workers": self.workers}

    def _init(self) -> ModuleType:
        from ragrade.deps import require

        ray = require("ray", package="ray", extra="ray", purpose="the Ray executor")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if not ray.is_initialized():
            kwargs: dict[str, object] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            if self.address:
                kwargs["address"] = self.address
            else:
                kwargs["num_cpus"] = self.workers or min(4, os.cpu_count() or 1)
            kwargs["runtime_env"] = {"env_vars": worker_env(local=not self.address)}
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BackendError(f"cannot start or reach Ray ({exc})") from exc
        return ray

    def run(
        self, worker: str, context: Mapping[str, object], shards: Sequence[Shard], on_result: ResultCallback
    ) -> None:
        """Run every shard on the actor pool.

        The actors are made for this run, with this run's environment (:func:`worker_env`; the Ray instance
        may have been started with another), and killed after it; the counts of a dry run's actors are
        added to :data:`ragrade.llm.dryrun.LEDGER` here before that.
        """
        ray = self._init()
        n_cpus = int(ray.available_resources().get("CPU", 1)) or 1
        n_actors = max(1, min(self.workers or n_cpus, len(shards), n_cpus))
        env = worker_env(local=not self.address)
        actor_cls = ray.remote(num_cpus=1, runtime_env={"env_vars": env})(_RayWorkerImpl)
        actors = [actor_cls.remote() for _ in range(n_actors)]
        ctx = dict(context)
        queue = list(shards)
        running: dict[Any, tuple[Shard, Any]] = {}  # Ray object refs -> (shard, actor handle)
        try:
            for actor in actors:
                if queue:
                    s = queue.pop(0)
                    running[actor.run.remote(worker, ctx, s.spec, list(s.items))] = (s, actor)
            while running:
                ready, _ = ray.wait(list(running), num_returns=1)
                ref = ready[0]
                shard, actor = running.pop(ref)
                try:
                    rows = ray.get(ref)
                except Exception as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, Exception) and not isinstance(cause, BackendError):
                        raise cause from exc
                    raise BackendError(f"Ray worker failed on '{shard.pipeline}': {exc}") from exc
                if queue:
                    s = queue.pop(0)
                    running[actor.run.remote(worker, ctx, s.spec, list(s.items))] = (s, actor)
                on_result(shard, rows)
        finally:
            if not running:  # every shard finished (actors still busy would keep a stop or an error waiting)
                _collect_dry_run_counts(ray, actors)
            for actor in actors:
                ray.kill(actor)
            if interrupt.requested() and not self.address:  # a stop request: do not leave a local Ray behind
                ray.shutdown()


def _collect_dry_run_counts(ray: ModuleType, actors: Sequence[Any]) -> None:
    """Add what the actors' dry-run LLMs counted to this process's ledger (nothing when none was dry)."""
    from ragrade.llm.dryrun import LEDGER

    try:
        counts = ray.get([actor.dry_run_counts.remote() for actor in actors], timeout=30)
    except Exception:  # an actor that died takes its counts along; the run's own error says why
        return
    for summaries in counts:
        LEDGER.add(summaries)


def create_executor(
    name: str, *, parallel: int = 2, address: str | None = None, workers: int | None = None
) -> Executor:
    """``local`` or ``ray``."""
    if name == "local":
        return LocalExecutor(parallel=parallel)
    if name == "ray":
        return RayExecutor(address=address, workers=workers)
    raise ConfigError(f"unknown executor '{name}'; valid choices: local, ray")


__all__ = [
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "Shard",
    "call_worker",
    "create_executor",
    "plan_shards",
    "resolve_callable",
    "run_shards",
    "worker_env",
]
