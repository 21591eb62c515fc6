"""The LLM protocol and its request/response types.

Every backend (OpenAI-compatible HTTP, local Hugging Face, offline baselines)
implements :class:`LLM`. Calls are batched and async; a failure of one request
is recorded on its result (``error``), never raised away from the batch and
never dropped.

Requests carry an optional structured view (``question``, ``passages``,
``choices``) besides the prompt. Real models read the prompt; offline
baselines, which cannot read prompts, read the structured view.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragrade.io import JSONObject

T = TypeVar("T")


@dataclass(frozen=True)
class Message:
    """One chat message."""

    role: str
    content: str


@dataclass(frozen=True)
class GenerationRequest:
    """A generation request: either ``messages`` (chat) or ``prompt`` (plain completion)."""

    messages: tuple[Message, ...] | None = None
    prompt: str | None = None
    temperature: float = 0.0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None
    json_schema: dict[str, Any] | None = None  # ask for structured JSON output when given
    # structured view for baselines that cannot read prompts (not part of the cache key)
    question: str | None = None
    passages: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    task: str | None = None  # e.g. "mcq", "answer", "judge", "generate_question"
    meta: JSONObject = field(default_factory=dict, compare=False, hash=False)


@dataclass
class Usage:
    """Token counts of one request (zeros when a backend cannot tell)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Completion:
    """The result of one :class:`GenerationRequest`: ``text`` or ``error``, never neither."""

    text: str | None
    error: str | None = None
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    cached: bool = False
    latency_s: float = 0.0
    attempts: int = 1
    # JSON output asked for (``json_schema`` given): how it was asked of the server this time,
    # "json_schema", "json_object" or "text" (the server refused both); None when none was asked for
    response_format: str | None = None

    @property
    def ok(self) -> bool:
        """True when the request produced text."""
        return self.error is None and self.text is not None


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """Score each continuation given the shared context."""

    context: str
    continuations: tuple[str, ...]
    question: str | None = None
    passages: tuple[str, ...] = ()
    meta: JSONObject = field(default_factory=dict, compare=False, hash=False)


@dataclass
class LoglikelihoodResult:
    """Summed log-probabilities and token counts, one per continuation, or an error."""

    logprobs: list[float] | None
    token_counts: list[int] | None = None
    error: str | None = None
    cached: bool = False
    latency_s: float = 0.0
    attempts: int = 1
    # how the scores were obtained: "echo-logprobs", "forced-token" (logit_bias + logprobs, one request per
    # continuation token), "shared-prefix" (in-process, one pass over the context), "per-choice",
    # "chat-logprobs" / "letter-choice" (letter picking, only when explicitly allowed),
    # "baseline" (offline similarity scores)
    method: str | None = None
    prompt_tokens: int = 0  # tokens of the shared context as the model saw it (0 when a backend cannot tell)

    @property
    def ok(self) -> bool:
        """True when scores were produced."""
        return self.error is None and self.logprobs is not None


@runtime_checkable
class LLM(Protocol):
    """What every language-model backend offers."""

    name: str  # "provider/model", as given on the command line
    supports_loglikelihood: bool
    is_baseline: bool  # offline baselines say so in every output

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Complete every request; one result per request, in order."""
        ...

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Score every request; one result per request, in order."""
        ...

    def describe(self) -> JSONObject:
        """Arguments for the run manifest (never an API key)."""
        ...


def run_sync(coro: Coroutine[object, object, T]) -> T:
    """Run ``coro`` to completion from synchronous code (also inside a running loop's thread).

    A stop request (first Ctrl-C or SIGTERM, :mod:`ragrade.interrupt`) cancels it: no new request is sent,
    and :class:`~ragrade.interrupt.Interrupted` is raised here. Inside a running loop the coroutine runs on
    a fresh loop in a daemon thread that is never waited for once a stop was asked for.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_loop(coro)
    import threading

    values: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            values.append(_run_loop(coro))
        except BaseException as exc:  # handed to the calling thread
            errors.append(exc)

    thread = threading.Thread(target=target, name="ragrade-run-sync", daemon=True)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return values[0]


def _run_loop(coro: Coroutine[object, object, T]) -> T:
    """``asyncio.run`` whose main task a stop request cancels, and which then does not wait for worker threads."""
    from ragrade import interrupt

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(coro)
    key = interrupt.register(loop, task)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if interrupt.requested():
            raise interrupt.Interrupted() from None
        raise
    finally:
        interrupt.unregister(key)
        try:
            _close_loop(loop, wait=not interrupt.requested())
        finally:
            asyncio.set_event_loop(None)


def _close_loop(loop: asyncio.AbstractEventLoop, *, wait: bool) -> None:
    """Cancel what is left on ``loop`` and close it (waiting for its worker threads only when ``wait``)."""
    try:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        if wait:
            loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()  # shuts the default executor down without waiting


def generate(llm: LLM, requests: Sequence[GenerationRequest]) -> list[Completion]:
    """Synchronous :meth:`LLM.agenerate`."""
    return run_sync(llm.agenerate(requests))


def loglikelihood(llm: LLM, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
    """Synchronous :meth:`LLM.aloglikelihood`."""
    return run_sync(llm.aloglikelihood(requests))


__all__ = [
    "LLM",
    "Completion",
    "GenerationRequest",
    "LoglikelihoodRequest",
    "LoglikelihoodResult",
    "Message",
    "Usage",
    "generate",
    "loglikelihood",
    "run_sync",
]
