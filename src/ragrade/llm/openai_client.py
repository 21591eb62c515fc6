"""What the log-likelihood and probing helpers need from the OpenAI-compatible client.

:class:`~ragrade.llm.openai.OpenAILLM` is split over three files for size: the client itself, its
log-likelihood strategies (:mod:`ragrade.llm.openai_loglik`) and its server probes
(:mod:`ragrade.llm.capabilities`). The helpers take the client as this protocol, so they depend on
this small module rather than on the client's (imports run one way: openai -> helpers -> here).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ragrade.llm.base import LoglikelihoodRequest, LoglikelihoodResult
from ragrade.llm.limits import CallResult, Limiter


@dataclass
class CacheWatch:
    """Replies to requests that extend a cached prompt: how many, how many recomputed several prompt tokens,
    and whether the user was told (:func:`ragrade.llm.openai_loglik.note_recomputed`)."""

    replies: int = 0
    recomputing: int = 0
    warned: bool = False


class OpenAIClient(Protocol):
    """The client's state and transport as the helpers use them (implemented by ``OpenAILLM``)."""

    name: str
    model: str
    limiter: Limiter
    server_root: str | None
    slots: int | None
    n_ctx: int | None
    token_cache: dict[tuple[str, bool], list[tuple[int, str | None]]]
    cache_watch: CacheWatch
    loglikelihood_mode: str | None
    no_loglikelihood: str | None
    letter_fallback: bool
    echo_batched: bool
    chat_logprobs: bool
    fallback_prompt: str

    async def post_json(self, path: str, body: dict[str, Any], extra: bool = True) -> dict[str, Any]:
        """POST ``body``; the parsed JSON object of the reply (Transient/Permanent errors otherwise)."""
        ...

    async def get_json(self, url: str, timeout: float) -> Any:
        """GET ``url`` once; the parsed JSON, or None on any failure."""
        ...

    def batch_session(self) -> AbstractAsyncContextManager[object]:
        """Hold the client for one batch of requests."""
        ...

    def loglik_result(self, o: CallResult[LoglikelihoodResult]) -> LoglikelihoodResult:
        """The result of one limiter outcome (a failed one as an error result)."""
        ...

    def loglikelihood_budget(self, req: LoglikelihoodRequest) -> float:
        """Seconds one log-likelihood request may take in all."""
        ...

    def prompt_logprobs_method(self) -> str:
        """How prompt log-probabilities are read (or why not)."""
        ...


__all__ = ["OpenAIClient"]
