"""External pipelines: evaluate a RAG system you already have, as a Python callable or an HTTP endpoint.

Each question is sent as one JSON object::

    {"id": "q-001", "question": "...", "choices": ["...", "...", "...", "..."], "k": 3}

and the system answers with a JSON object holding retrieved contexts and/or an answer::

    {"contexts": ["passage text", {"text": "...", "id": "chunk-7", "doc_id": "doc-2"}],
     "answer": 2 | "C" | "the option's text" | null,
     "scores": [float, float, float, float]}          # optional, one per choice

When ``answer`` is missing or null, the pipeline's LLM answers from the
returned contexts (the external system acts as a retriever). A target is
``"package.module:function"`` (sync or async function of the request dict) or
an ``http(s)://`` URL receiving the request as a POST body.

An external system is under the reachability rule of LLM servers: a URL that takes no connection fails
before the run folder is created (:func:`check_reachable`), and a system whose first requests are all
refused or unreachable (connection errors, HTTP 4xx but 408 and 429; a callable raising ``OSError``)
stops the run with one line naming it (:class:`~ragrade.errors.BackendError`, exit 2) instead of
retrying every question. Any other failure is recorded on its row, missing for the rerun.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragrade.errors import BackendError, ConfigError
from ragrade.exam.files import LETTERS, Question
from ragrade.io import JSONObject

if TYPE_CHECKING:
    import httpx


@dataclass
class ExternalResult:
    """What an external system returned for one question (or the error it caused)."""

    contexts: list[str] = field(default_factory=list)
    context_ids: list[str] = field(default_factory=list)
    context_docs: list[str] = field(default_factory=list)
    answer: int | None = None  # choice index, when the system answered
    answer_raw: str | None = None
    scores: list[float] | None = None
    error: str | None = None
    latency_s: float = 0.0


class Refused(RuntimeError):
    """A request the system refused or could not take (what the reachability rule counts)."""


#: HTTP statuses that are no refusal: a timeout and a rate limit are retried answers-to-come
_TRANSIENT_4XX = (408, 429)


def _parse_answer(value: object, choices: Sequence[str]) -> tuple[int | None, str | None]:
    """(index, error) from an int index, a letter or a choice's exact text."""
    if value is None:
        return None, None
    if isinstance(value, bool):
        return None, f"answer must be an index, a letter or a choice text, got {value!r}"
    if isinstance(value, int):
        return (value, None) if 0 <= value < len(choices) else (None, f"answer index {value} out of range")
    text = str(value).strip()
    if len(text) == 1 and text.upper() in LETTERS[: len(choices)]:
        return LETTERS.index(text.upper()), None
    lowered = [c.strip().lower() for c in choices]
    if text.lower() in lowered:
        return lowered.index(text.lower()), None
    return None, f"answer {text[:60]!r} is neither a letter nor one of the choices"


def parse_response(payload: object, question: Question) -> ExternalResult:
    """Validate one external response; problems become ``error`` (never an exception)."""
    if not isinstance(payload, dict):
        return ExternalResult(error=f"expected a JSON object, got {type(payload).__name__}")
    res = ExternalResult()
    raw_ctx = payload.get("contexts") or []
    if not isinstance(raw_ctx, list):
        return ExternalResult(error="'contexts' must be a list")
    for i, c in enumerate(raw_ctx):
        if isinstance(c, str):
            res.contexts.append(c)
            res.context_ids.append(f"external-{i}")
            res.context_docs.append("")
        elif isinstance(c, dict) and isinstance(c.get("text"), str):
            res.contexts.append(c["text"])
            res.context_ids.append(str(c.get("id", f"external-{i}")))
            res.context_docs.append(str(c.get("doc_id", "")))
        else:
            return ExternalResult(error=f"context {i} must be a string or an object with 'text'")
    res.answer, err = _parse_answer(payload.get("answer"), question.choices)
    if payload.get("answer") is not None:
        res.answer_raw = str(payload.get("answer"))
    if err:
        res.error = err
    scores = payload.get("scores")
    if scores is not None:
        try:
            res.scores = [float(s) for s in scores]
        except (TypeError, ValueError):
            res.error = res.error or "'scores' must be a list of numbers"
        else:
            if len(res.scores) != len(question.choices):
                res.error = res.error or f"'scores' has {len(res.scores)} values for {len(question.choices)} choices"
    return res


def request_payload(question: Question, k: int) -> JSONObject:
    """The JSON object sent for ``question``."""
    return {"id": question.id, "question": question.question, "choices": list(question.choices), "k": k}


class ExternalSystem:
    """A user's RAG system behind a callable or an HTTP endpoint."""

    def __init__(
        self,
        name: str,
        target: str,
        *,
        timeout: float = 60.0,
        concurrency: int = 8,
        max_retries: int = 2,
        dry_run: bool = False,
    ) -> None:
        self.name = name
        self.dry_run = dry_run
        self.target = target
        self.timeout = timeout
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.is_http = target.startswith(("http://", "https://"))
        self._fn: Callable[[JSONObject], object] | None = None
        self._answered = False  # any request answered so far (then failures are per-row, never a stop)
        if not self.is_http:
            from ragrade.run.executors import resolve_callable

            self._fn = resolve_callable(target)

    def describe(self) -> JSONObject:
        """Arguments for the manifest."""
        return {
            "kind": "http" if self.is_http else "callable",
            "name": self.name,
            "target": self.target,
            "timeout": self.timeout,
            "concurrency": self.concurrency,
        }

    async def aquery(self, questions: Sequence[Question], k: int) -> list[ExternalResult]:
        """One result per question, in order; failures are recorded on the result.

        In a dry run nothing is sent: each question is counted on the dry-run ledger as one request to
        ``external/NAME`` and gets a dry-run error result.
        """
        if self.dry_run:
            from ragrade.llm.dryrun import DRY_RUN_ERROR, DryRunLLM

            counter = DryRunLLM(f"external/{self.name}", base_url=self.target if self.is_http else None)
            counter.stats.generate_requests += len(questions)
            counter.stats.prompt_tokens += sum(len(q.question.split()) for q in questions)
            counter.stats.by_task["external"] += len(questions)
            return [ExternalResult(error=DRY_RUN_ERROR) for _ in questions]
        sem = asyncio.Semaphore(self.concurrency)
        if self.is_http:
            import httpx

            async with httpx.AsyncClient(timeout=self.timeout) as client:
                got = list(await asyncio.gather(*(self._one(q, k, sem, client) for q in questions)))
        else:
            got = list(await asyncio.gather(*(self._one(q, k, sem, None) for q in questions)))
        self._check_refusals(got)
        return got

    def _check_refusals(self, results: Sequence[ExternalResult]) -> None:
        """BackendError when no request was ever answered and each of these was refused or unreachable."""
        self._answered = self._answered or any(r.error is None or not r.error.startswith("Refused: ") for r in results)
        if self._answered or not results:
            return
        what = self.target if self.is_http else f"the callable {self.target}"
        last = (results[-1].error or "").removeprefix("Refused: ")
        raise BackendError(
            f"external system '{self.name}' ({what}) refused or could not take each of its first {len(results)} "
            f"requests (last: {last}); start it or fix its target, then rerun the same command"
        )

    async def _one(
        self, q: Question, k: int, sem: asyncio.Semaphore, client: httpx.AsyncClient | None
    ) -> ExternalResult:
        async with sem:
            t0 = time.perf_counter()
            try:
                payload = await (self._post(client, q, k) if client is not None else self._call(q, k))
            except OSError as exc:  # a callable that cannot reach what it wraps
                res = ExternalResult(error=f"Refused: {type(exc).__name__}: {exc}"[:500])
            except Exception as exc:  # the user's system failed: record, never drop
                res = ExternalResult(error=f"{type(exc).__name__}: {exc}"[:500])
            else:
                res = parse_response(payload, q)
            res.latency_s = time.perf_counter() - t0
            return res

    async def _call(self, q: Question, k: int) -> object:
        if self._fn is None:
            raise ConfigError(f"external '{self.name}': {self.target} is not a callable")
        out = self._fn(request_payload(q, k))
        if inspect.isawaitable(out):
            out = await out
        return out

    async def _post(self, client: httpx.AsyncClient, q: Question, k: int) -> object:
        import httpx

        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                resp = await client.post(self.target, json=request_payload(q, k))
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing takes the connection
                raise Refused(f"cannot connect ({exc or type(exc).__name__})") from exc
            except httpx.TransportError as exc:
                last = exc
            else:
                if resp.status_code >= 500 and attempt < self.max_retries:
                    last = RuntimeError(f"HTTP {resp.status_code}")
                elif 400 <= resp.status_code < 500 and resp.status_code not in _TRANSIENT_4XX:
                    raise Refused(f"HTTP {resp.status_code}: {resp.text[:200]}")
                elif resp.status_code >= 400:
                    raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:200]}")
                else:
                    try:
                        return resp.json()
                    except ValueError as exc:
                        raise RuntimeError(f"response is not JSON: {resp.text[:200]!r}") from exc
            await asyncio.sleep(0.2 * (2**attempt))
        raise RuntimeError(f"no answer after {self.max_retries + 1} attempts ({last})")


def check_reachable(name: str, url: str) -> None:
    """BackendError naming ``url`` when its host takes no TCP connection (:func:`ragrade.llm.reach.unreachable`:
    nothing is sent), so that a system that is down fails before a run folder is created."""
    from urllib.parse import urlsplit

    from ragrade.llm.reach import unreachable

    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as exc:
        raise ConfigError(f"external '{name}': bad port in {url} ({exc})") from exc
    if not parts.hostname:
        raise ConfigError(f"external '{name}': no host in {url}")
    why = unreachable(url)
    if why is not None:
        raise BackendError(
            f"external system '{name}': {url} is unreachable ({why}); start it or fix the URL, then rerun"
        )


def create_external(name: str, target: str, *, dry_run: bool = False) -> ExternalSystem:
    """An :class:`ExternalSystem`; ConfigError on a malformed target, BackendError on a URL that takes no
    connection (:func:`check_reachable`). A dry-run system sends nothing and connects to nothing."""
    if not target.startswith(("http://", "https://")) and ":" not in target:
        raise ConfigError(f"external '{name}': expected 'module:function' or an http(s) URL, got '{target}'")
    if not dry_run and target.startswith(("http://", "https://")):
        check_reachable(name, target)
    return ExternalSystem(name, target, dry_run=dry_run)


__all__ = [
    "ExternalResult",
    "ExternalSystem",
    "Refused",
    "check_reachable",
    "create_external",
    "parse_response",
    "request_payload",
]
