"""The shared machinery of every backend: cache look-up, in-batch de-duplication, limits, usage accounting.

A backend subclasses :class:`BaseLLM` and implements ``_generate_one`` /
``_loglikelihood_one`` (one network call each, raising
:class:`~ragrade.llm.limits.TransientError` or
:class:`~ragrade.llm.limits.PermanentError`), or overrides the ``_batch``
methods when it computes locally in batches (Hugging Face, offline baselines).

Every request sent to a model (not one read from the cache) is counted for the progress displays
(:func:`ragrade.progress.note_requests`): asked when its batch starts, answered as its result arrives
(a backend computing whole batches: when the batch ends), and taken back when a stop drops it unanswered.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, TypeVar

from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache, make_key
from ragrade.llm.limits import CallResult, LimitConfig, Limiter
from ragrade.progress import note_requests
from ragrade.redact import redact_text

log = logging.getLogger("ragrade.llm")
_Req = TypeVar("_Req", GenerationRequest, LoglikelihoodRequest)
_Res = TypeVar("_Res", Completion, LoglikelihoodResult)


@dataclass
class UsageTotals:
    """Running totals of one backend: requests, cache hits, errors, retries and tokens."""

    requests: int = 0
    cached: int = 0
    sent: int = 0
    errors: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        """Plain dict for JSON output."""
        return asdict(self)


def request_params(req: GenerationRequest) -> dict[str, Any]:
    """Every parameter of ``req`` that changes the answer of a model reading the prompt."""
    return {
        "messages": [[m.role, m.content] for m in req.messages] if req.messages is not None else None,
        "prompt": req.prompt,
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "stop": list(req.stop),
        "seed": req.seed,
        "json_schema": req.json_schema,
    }


def structured_view(req: GenerationRequest | LoglikelihoodRequest) -> dict[str, Any]:
    """The structured fields offline baselines read (part of their cache key)."""
    out: dict[str, Any] = {"question": req.question, "passages": list(req.passages)}
    if isinstance(req, GenerationRequest):
        out.update(choices=list(req.choices), task=req.task)
    return out


def _completion_value(c: Completion) -> dict[str, Any]:
    usage = {"prompt_tokens": c.usage.prompt_tokens, "completion_tokens": c.usage.completion_tokens}  # asdict
    out: dict[str, Any] = {"text": c.text, "finish_reason": c.finish_reason, "usage": usage}
    if c.response_format is not None:
        out["response_format"] = c.response_format
    return out


def _loglik_value(r: LoglikelihoodResult) -> dict[str, Any]:
    return {
        "logprobs": r.logprobs,
        "token_counts": r.token_counts,
        "method": r.method,
        "prompt_tokens": r.prompt_tokens,
    }


class _CacheWriter:
    """Stores a batch's fresh results while the batch runs: a small transaction every ``every`` results
    or ``interval_s`` seconds, so that a crash or kill loses at most the last few seconds of paid answers.

    Writes run on the event loop's thread (one SQLite connection; WAL commits without fsync take about
    a millisecond); a failing write is logged once and never costs the batch its results. It also counts
    each request answered, once (:func:`~ragrade.progress.note_requests`), with or without a cache.
    """

    def __init__(
        self,
        llm: BaseLLM,
        kind: str,
        todo: dict[str, Any],
        encode: Callable[[Any], dict[str, Any]],
        every: int = 256,
        interval_s: float = 2.0,
    ) -> None:
        self.llm, self.kind, self.encode = llm, kind, encode
        self.keys = {id(req): key for key, req in todo.items()}
        self.every, self.interval_s = every, interval_s
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.seen: set[str] = set()
        self.answered: set[str] = set()
        self.last = time.monotonic()
        self.failed = False

    def add(self, req: Any, result: Completion | LoglikelihoodResult) -> None:
        """Queue ``result`` of ``req`` (successes only); write when enough is queued."""
        key = self.keys.get(id(req))
        if key is not None:
            self.add_key(key, result)

    def add_key(self, key: str, result: Completion | LoglikelihoodResult) -> None:
        """Count ``result`` as answered and queue it under ``key`` (each key once; successes only, with a cache)."""
        if key not in self.answered:
            self.answered.add(key)
            note_requests(answered=1)
        if key in self.seen or not result.ok or self.llm.cache is None:
            return
        self.seen.add(key)
        self.pending.append((key, self.encode(result)))
        if len(self.pending) >= self.every or time.monotonic() - self.last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        """Write what is queued in one transaction."""
        rows, self.pending, self.last = self.pending, [], time.monotonic()
        cache = self.llm.cache
        if not rows or cache is None:
            return
        try:
            cache.put_many(rows, provider=self.llm.provider, model=self.llm.model, kind=self.kind)
        except sqlite3.Error as exc:  # disk full, locked for too long, ...: keep the answers, warn once
            if not self.failed:
                log.warning("%s: could not write to the response cache %s: %s", self.llm.name, cache.path, exc)
            self.failed = True


# the cache writer of the batch running in the current task (set by agenerate / aloglikelihood)
_WRITER: contextvars.ContextVar[_CacheWriter | None] = contextvars.ContextVar("ragrade_llm_writer", default=None)


def _completion_from_cache(value: dict[str, Any]) -> Completion:
    usage = value.get("usage") or {}
    return Completion(
        text=value["text"],
        finish_reason=value.get("finish_reason"),
        usage=Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
        cached=True,
        latency_s=0.0,
        attempts=0,
        response_format=value.get("response_format"),
    )


def _loglik_from_cache(value: dict[str, Any]) -> LoglikelihoodResult:
    return LoglikelihoodResult(
        logprobs=[float(x) for x in value["logprobs"]],
        token_counts=[int(x) for x in value["token_counts"]],
        cached=True,
        latency_s=0.0,
        attempts=0,
        method=value.get("method"),
        prompt_tokens=int(value.get("prompt_tokens") or 0),
    )


class BaseLLM:
    """Common behaviour of ragrade's backends (see module docstring)."""

    provider: str = ""
    is_baseline: bool = False
    supports_loglikelihood: bool = False
    cache_flush_every: int = 256  # fresh results are written to the cache in transactions of this many ...
    cache_flush_interval_s: float = 2.0  # ... or after this many seconds, whichever comes first

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        cache: ResponseCache | None = None,
        limits: LimitConfig | None = None,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.name = f"{self.provider}/{model}"
        self.base_url = base_url
        self.cache = cache
        self.limits = limits or LimitConfig()
        self.limiter = Limiter(self.limits, seed=seed, name=self.name)
        self.usage = UsageTotals()

    # -- hooks ---------------------------------------------------------------------------------
    def _key_extra(self, req: GenerationRequest | LoglikelihoodRequest) -> dict[str, Any]:
        """Extra cache-key parts (offline baselines add the structured view)."""
        return {}

    async def _generate_one(self, req: GenerationRequest) -> Completion:
        raise NotImplementedError

    async def _loglikelihood_one(self, req: LoglikelihoodRequest) -> LoglikelihoodResult:
        raise NotImplementedError

    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        writer = _WRITER.get()

        async def one(req: GenerationRequest) -> Completion:
            result = self._completion(await self.limiter.call(partial(self._generate_one, req)))
            if writer is not None:
                writer.add(req, result)
            return result

        return list(await asyncio.gather(*(one(r) for r in reqs)))

    async def _loglikelihood_batch(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        writer = _WRITER.get()

        async def one(req: LoglikelihoodRequest) -> LoglikelihoodResult:
            result = self.loglik_result(await self.limiter.call(partial(self._loglikelihood_one, req)))
            if writer is not None:
                writer.add(req, result)
            return result

        return list(await asyncio.gather(*(one(r) for r in reqs)))

    @staticmethod
    def _completion(o: CallResult[Completion]) -> Completion:
        if o.value is None:
            error = redact_text(o.error or "unknown error")
            return Completion(text=None, error=error, attempts=o.attempts, latency_s=o.latency_s)
        o.value.attempts, o.value.latency_s = o.attempts, o.latency_s
        return o.value

    @staticmethod
    def loglik_result(o: CallResult[LoglikelihoodResult]) -> LoglikelihoodResult:
        """The result of one limiter outcome: its value with the attempts and latency, or a failed one as an
        error result (the server probes of :mod:`ragrade.llm.capabilities` read their outcomes through it)."""
        if o.value is None:
            return LoglikelihoodResult(
                logprobs=None, error=redact_text(o.error or "unknown error"), attempts=o.attempts, latency_s=o.latency_s
            )
        o.value.attempts, o.value.latency_s = o.attempts, o.latency_s
        return o.value

    # -- keys ----------------------------------------------------------------------------------
    def _identity(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "base_url": self.base_url}

    def generation_key(self, req: GenerationRequest) -> str:
        """The cache key of ``req`` for this backend."""
        return make_key({**self._identity(), "kind": "generate", **request_params(req), **self._key_extra(req)})

    def loglikelihood_key(self, req: LoglikelihoodRequest) -> str:
        """The cache key of ``req`` for this backend."""
        return make_key(
            {
                **self._identity(),
                "kind": "loglikelihood",
                "context": req.context,
                "continuations": list(req.continuations),
                **self._key_extra(req),
            }
        )

    # -- the protocol --------------------------------------------------------------------------
    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """One :class:`Completion` per request, in order; errors recorded, never raised."""
        return await self._answer(
            requests, self.generation_key, "generate", _completion_value, self._generate_batch, _completion_from_cache
        )

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """One :class:`LoglikelihoodResult` per request, in order; errors recorded, never raised."""
        return await self._answer(
            requests,
            self.loglikelihood_key,
            "loglikelihood",
            _loglik_value,
            self._loglikelihood_batch,
            _loglik_from_cache,
        )

    async def _answer(
        self,
        requests: Sequence[_Req],
        key: Callable[[_Req], str],
        kind: str,
        encode: Callable[[_Res], dict[str, Any]],
        batch: Callable[[Sequence[_Req]], Awaitable[list[_Res]]],
        decode: Callable[[dict[str, Any]], _Res],
    ) -> list[_Res]:
        """Cached results decoded, the rest (each distinct key once) run through ``batch``; in request order."""
        keys = [key(r) for r in requests]
        hits = self._cache_get(keys)
        todo: dict[str, _Req] = {}
        for k, req in zip(keys, requests, strict=True):
            if k not in hits and k not in todo:
                todo[k] = req
        fresh = await self._run_fresh(todo, kind, encode, batch)
        out = [decode(hits[k]) if k in hits else fresh[k] for k in keys]
        self._account(out, len(fresh))
        return out

    async def _run_fresh(
        self,
        todo: dict[str, Any],
        kind: str,
        encode: Callable[[Any], dict[str, Any]],
        batch: Callable[[list[Any]], Any],
    ) -> dict[str, Any]:
        """Run the uncached requests ``todo`` (key -> request); results reach the cache as they arrive."""
        if not todo:
            return {}
        writer = _CacheWriter(self, kind, todo, encode, self.cache_flush_every, self.cache_flush_interval_s)
        token = _WRITER.set(writer)
        note_requests(asked=len(todo))
        try:
            fresh = dict(zip(todo, await batch(list(todo.values())), strict=True))
        except BaseException:  # cancelled (a stop request) or broken: keep the answers that already arrived
            writer.flush()
            note_requests(asked=-(len(todo) - len(writer.answered)))  # dropped unanswered
            raise
        finally:
            _WRITER.reset(token)
        unreported = [key for key in fresh if key not in writer.answered]  # whole batches (HF, offline) end here
        writer.answered.update(unreported)
        note_requests(answered=len(unreported))
        for key, result in fresh.items():
            writer.add_key(key, result)
        writer.flush()
        return fresh

    def _cache_get(self, keys: list[str]) -> dict[str, Any]:
        if self.cache is None or not keys:
            return {}
        return self.cache.get_many(keys)

    def _account(self, results: Sequence[Completion | LoglikelihoodResult], sent: int) -> None:
        u = self.usage
        u.requests += len(results)
        u.sent += sent
        u.retries = self.limiter.retries
        for r in results:
            u.cached += int(r.cached)
            u.errors += int(not r.ok)
            if isinstance(r, Completion):
                u.prompt_tokens += r.usage.prompt_tokens
                u.completion_tokens += r.usage.completion_tokens

    def describe(self) -> dict[str, Any]:
        """Arguments for the run manifest (never an API key)."""
        out: dict[str, Any] = {
            "name": self.name,
            "provider": self.provider,
            "model": self.model,
            "is_baseline": self.is_baseline,
            "supports_loglikelihood": self.supports_loglikelihood,
            "cache": self.cache is not None,
            "limits": {
                "concurrency": self.limits.concurrency,
                "rpm": self.limits.rpm,
                "timeout": self.limits.timeout,
                "max_retries": self.limits.max_retries,
            },
        }
        if self.base_url:
            out["base_url"] = self.base_url
        if self.is_baseline:
            out["baseline"] = True
            out["note"] = "offline baseline, not a language model"
        return out

    def close(self) -> None:
        """Release resources (HTTP clients, models). Safe to call twice."""


__all__ = ["BaseLLM", "UsageTotals", "log", "request_params", "structured_view"]
