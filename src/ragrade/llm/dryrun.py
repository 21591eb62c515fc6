"""Dry runs: an LLM that counts the requests and prompt tokens a command would send, and sends nothing.

Other commands offer ``--dry-run`` by building their LLM with
``create_llm(spec, dry_run=True)`` (or :func:`dry_run_llm`), running as usual, and
printing :func:`dry_run_summary`. Every reply is an error result saying it was a
dry run, so nothing downstream mistakes it for an answer. Token counts are an
estimate (words and punctuation marks, about what BPE tokenizers give on English
text, within some 30%).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragrade.llm.base import LLM, Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage

DRY_RUN_ERROR = "dry run: request not sent"
_TOKEN_RE = re.compile(r"[A-Za-z]+|\d|[^\sA-Za-z\d]")


def estimate_tokens(text: str) -> int:
    """An estimate of the token count of ``text`` (words, single digits and punctuation marks)."""
    words = _TOKEN_RE.findall(text)
    # long words split into several BPE tokens: one extra per 6 letters beyond the first 6
    return sum(1 + max(0, (len(w) - 6) // 6) if w.isalpha() else 1 for w in words)


def _prompt_of(req: GenerationRequest) -> str:
    if req.messages is not None:
        return "\n".join(f"{m.role}: {m.content}" for m in req.messages)
    if req.prompt is not None:
        return req.prompt
    # offline baselines read the structured view; count it as a prompt would carry it
    return "\n".join([req.question or "", *req.passages, *req.choices])


@dataclass
class DryRunStats:
    """What a dry run counted."""

    generate_requests: int = 0
    loglikelihood_requests: int = 0
    loglikelihood_continuations: int = 0
    prompt_tokens: int = 0
    max_completion_tokens: int = 0
    by_task: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        return {
            "requests": self.generate_requests + self.loglikelihood_requests,
            "generate_requests": self.generate_requests,
            "loglikelihood_requests": self.loglikelihood_requests,
            "loglikelihood_continuations": self.loglikelihood_continuations,
            "prompt_tokens_estimate": self.prompt_tokens,
            "max_completion_tokens": self.max_completion_tokens,
            "by_task": dict(self.by_task),
        }


class DryRunLLM:
    """Stands in for ``spec``'s backend: counts, never sends (see module docstring)."""

    is_baseline = False
    supports_loglikelihood = True

    def __init__(self, spec: str, base_url: str | None = None) -> None:
        self.name = spec
        self.base_url = base_url
        self.stats = DryRunStats()

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        """Count ``requests``; every result is a dry-run error."""
        out = []
        for req in requests:
            n = estimate_tokens(_prompt_of(req))
            self.stats.generate_requests += 1
            self.stats.prompt_tokens += n
            self.stats.max_completion_tokens += req.max_tokens
            self.stats.by_task[req.task or "generate"] += 1
            out.append(Completion(text=None, error=DRY_RUN_ERROR, usage=Usage(n, 0), attempts=0))
        return out

    async def aloglikelihood(self, requests: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        """Count ``requests`` (one request per context, all continuations echoed)."""
        for req in requests:
            self.stats.loglikelihood_requests += 1
            self.stats.loglikelihood_continuations += len(req.continuations)
            self.stats.prompt_tokens += sum(estimate_tokens(req.context + c) for c in req.continuations)
            self.stats.by_task["loglikelihood"] += 1
        return [LoglikelihoodResult(logprobs=None, error=DRY_RUN_ERROR, attempts=0) for _ in requests]

    def describe(self) -> dict[str, Any]:
        """The manifest entry: the spec, marked as a dry run."""
        return {"name": self.name, "dry_run": True, **({"base_url": self.base_url} if self.base_url else {})}

    def summary(self) -> dict[str, Any]:
        """The counts so far."""
        return {"llm": self.name, "dry_run": True, **self.stats.as_dict()}


_SESSION: list[DryRunLLM] | None = None  # set while `ragrade --dry-run ...` runs a command


def start_session() -> None:
    """From now on every :func:`~ragrade.llm.create_llm` returns a :class:`DryRunLLM` (``ragrade --dry-run``)."""
    global _SESSION
    _SESSION = []


def session_active() -> bool:
    """True while a dry-run session is on."""
    return _SESSION is not None


def track(llm: DryRunLLM) -> DryRunLLM:
    """Remember ``llm`` for :func:`end_session` when a session is on."""
    if _SESSION is not None:
        _SESSION.append(llm)
    return llm


def end_session() -> list[dict[str, Any]]:
    """Stop the session; the summaries of every dry-run LLM it created (one per model spec, merged)."""
    global _SESSION
    llms, _SESSION = _SESSION or [], None
    merged: dict[str, dict[str, Any]] = {}
    for llm in llms:
        cur = llm.summary()
        old = merged.get(llm.name)
        if old is None:
            merged[llm.name] = cur
            continue
        for key, value in cur.items():
            if isinstance(value, int) and not isinstance(value, bool):
                old[key] = old.get(key, 0) + value
            elif isinstance(value, dict):
                old[key] = dict(Counter(old.get(key, {})) + Counter(value))
    return list(merged.values())


def dry_run_llm(spec: str, base_url: str | None = None) -> DryRunLLM:
    """A :class:`DryRunLLM` for ``spec``."""
    return DryRunLLM(spec, base_url=base_url)


def dry_run_summary(llm: LLM) -> dict[str, Any] | None:
    """The counts of ``llm`` when it is a dry run, else None."""
    return llm.summary() if isinstance(llm, DryRunLLM) else None


__all__ = [
    "DRY_RUN_ERROR",
    "DryRunLLM",
    "DryRunStats",
    "dry_run_llm",
    "dry_run_summary",
    "end_session",
    "estimate_tokens",
    "session_active",
    "start_session",
    "track",
]
