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
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


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
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


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

    def describe(self) -> dict[str, Any]:
        """Arguments for the run manifest (never an API key)."""
        ...


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code (also inside a running loop's thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


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
