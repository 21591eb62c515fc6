"""Dry runs: an LLM that counts the requests and prompt tokens a command would send, and sends nothing.

A dry run is a setting of the run, like a timeout: ``create_llm(spec, LLMOptions(dry_run=True))`` (the
``dry_run`` key of the LLM options every command and executor passes down, to Ray workers too)
builds a :class:`DryRunLLM`; the command runs as usual and prints what the :data:`LEDGER` counted
(Ray actors send their counts back to it). Every reply is an error result saying it was a
dry run, so nothing downstream mistakes it for an answer. Token counts are an
estimate (words and punctuation marks, about what BPE tokenizers give on English
text, within some 30%).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragrade.io import JSONObject
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

    def as_dict(self) -> JSONObject:
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
    is_dry_run = True
    supports_loglikelihood = True

    def __init__(self, spec: str, base_url: str | None = None) -> None:
        self.name = spec
        self.base_url = base_url
        self.stats = DryRunStats()
        LEDGER.record(self)

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

    def describe(self) -> JSONObject:
        """The manifest entry: the spec, marked as a dry run."""
        return {"name": self.name, "dry_run": True, **({"base_url": self.base_url} if self.base_url else {})}

    def summary(self) -> JSONObject:
        """The counts so far."""
        return {"llm": self.name, "dry_run": True, **self.stats.as_dict()}


class DryRunLedger:
    """What the dry-run LLMs of this process counted, plus the counts workers in other processes sent back.

    It only records: whether a run is dry is decided by its settings (``LLMOptions(dry_run=True)``,
    carried in the LLM options every executor ships to its workers), never by this object. A command reads
    the counts of its own run with :meth:`mark` before and :meth:`since` after; a Ray actor hands its
    process's counts (:meth:`summaries`) back to the executor, which records them with :meth:`add`.
    """

    def __init__(self) -> None:
        self._llms: list[DryRunLLM] = []
        self._remote: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def record(self, llm: DryRunLLM) -> None:
        """Count ``llm``'s requests from now on."""
        with self._lock:
            self._llms.append(llm)

    def add(self, summaries: Sequence[Mapping[str, object]]) -> None:
        """Counts made in another process (a Ray worker) for a run of this one."""
        with self._lock:
            self._remote.extend(dict(s) for s in summaries)

    def mark(self) -> LedgerMark:
        """Where the counts stand now (see :meth:`since`)."""
        with self._lock:
            return LedgerMark({id(m): m.summary() for m in self._llms}, len(self._remote))

    def since(self, mark: LedgerMark) -> list[dict[str, Any]]:
        """The counts added after ``mark``, merged per model spec."""
        with self._lock:
            parts = [_minus(m.summary(), mark.local.get(id(m))) for m in self._llms]
            parts += self._remote[mark.n_remote :]
        return merge_summaries(p for p in parts if p["requests"])

    def summaries(self) -> list[dict[str, object]]:
        """Everything the dry-run LLMs of this process counted, merged per model spec."""
        return self.since(LedgerMark({}, len(self._remote)))


@dataclass(frozen=True)
class LedgerMark:
    """A point in a :class:`DryRunLedger` (each local LLM's counts then, and how many remote counts)."""

    local: dict[int, JSONObject]
    n_remote: int


def _minus(cur: JSONObject, old: dict[str, Any] | None) -> JSONObject:
    if old is None:
        return cur
    out = dict(cur)
    for key, value in cur.items():
        if isinstance(value, int) and not isinstance(value, bool):
            out[key] = value - int(old.get(key, 0))
        elif isinstance(value, dict):
            out[key] = dict(Counter(value) - Counter(old.get(key, {})))
    return out


def merge_summaries(summaries: Iterable[dict[str, Any]]) -> list[JSONObject]:
    """Summaries (:meth:`DryRunLLM.summary`) summed per model spec, in first-seen order."""
    merged: dict[str, dict[str, Any]] = {}
    for cur in summaries:
        old = merged.get(cur["llm"])
        if old is None:
            merged[cur["llm"]] = {k: dict(v) if isinstance(v, dict) else v for k, v in cur.items()}
            continue
        for key, value in cur.items():
            if isinstance(value, int) and not isinstance(value, bool):
                old[key] = old.get(key, 0) + value
            elif isinstance(value, dict):
                old[key] = dict(Counter(old.get(key, {})) + Counter(value))
    return list(merged.values())


LEDGER = DryRunLedger()  # the counts of this process (a record, not a switch)


def is_dry_run(llm: object) -> bool:
    """True when ``llm`` is a dry-run stand-in (it sends nothing)."""
    return bool(getattr(llm, "is_dry_run", False))


def dry_run_summary(llm: LLM) -> JSONObject | None:
    """The counts of ``llm`` when it is a dry run, else None."""
    return llm.summary() if isinstance(llm, DryRunLLM) else None


__all__ = [
    "DRY_RUN_ERROR",
    "LEDGER",
    "DryRunLLM",
    "DryRunLedger",
    "DryRunStats",
    "LedgerMark",
    "dry_run_summary",
    "estimate_tokens",
    "is_dry_run",
    "merge_summaries",
]
