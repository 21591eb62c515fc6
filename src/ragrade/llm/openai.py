"""The OpenAI-compatible backend (OpenAI, vLLM, Ollama, llama.cpp server, TGI, LM Studio), on the official SDK.

Generation uses chat completions for ``messages`` and completions for ``prompt``.
Log-likelihood uses the completions endpoint with ``echo`` and ``logprobs`` (what
vLLM and OpenAI's legacy models serve): the prompt ``context + continuation`` is
echoed with per-token log-probabilities and the continuation's tokens are summed.
Support is detected at first use; servers without prompt log-probabilities
(Ollama, llama.cpp) get a one-time warning and an automatic fallback that asks
the chat endpoint to pick a lettered option, scored by the letter's
log-probability when the server returns token log-probabilities, else by the
letter it answers (0 for the chosen option, -50 for the others).

The API key comes from ``api_key=`` or ``OPENAI_API_KEY``; it is sent to the
server only and never appears in :meth:`describe`, cache keys, logs or errors.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import re
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrade.deps import require
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache
from ragrade.llm.core import BaseLLM, log
from ragrade.llm.limits import LimitConfig, PermanentError, TransientError

MISSING_SCORE = -50.0
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
FALLBACK_PROMPT = (
    "Read the text below and decide which option continues it best.\n\n"
    "{context}\n\nOptions:\n{options}\n\n"
    "Reply with the letter of the best option and nothing else."
)


class _NoPromptLogprobs(Exception):
    """The server answered but gave no log-probabilities for the prompt tokens."""


def redact_url(url: str | None) -> str | None:
    """``url`` without user info and query string (where credentials could hide)."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def _strip_userinfo(url: str | None) -> str | None:
    """``url`` without ``user:password@`` (the SDK authenticates with the API key)."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


class OpenAILLM(BaseLLM):
    """An OpenAI-compatible server through the ``openai`` SDK (see module docstring)."""

    provider = "openai"
    supports_loglikelihood = True  # natively (echo) or through the chat fallback

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        limits: LimitConfig | None = None,
        seed: int | None = None,
        loglikelihood_mode: str = "auto",
        fallback_prompt: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        super().__init__(model, base_url=redact_url(base_url), cache=cache, limits=limits, seed=seed)
        self._url = _strip_userinfo(base_url)
        if base_url and self._url != base_url:
            log.warning(
                "%s: credentials in the base URL are ignored (HTTP libraries log URLs); use OPENAI_API_KEY instead",
                self.name,
            )
        self._key = api_key or os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url else None)
        if self._key is None:
            from ragrade.errors import ConfigError

            raise ConfigError(
                "no API key for openai/...: set OPENAI_API_KEY, or give --llm-base-url for a local "
                "OpenAI-compatible server (vLLM, Ollama, llama.cpp) that needs none"
            )
        if loglikelihood_mode not in ("auto", "echo", "chat-logprobs", "letter-choice"):
            from ragrade.errors import ConfigError

            raise ConfigError(
                f"loglikelihood_mode must be auto, echo, chat-logprobs or letter-choice, got '{loglikelihood_mode}'"
            )
        self.loglikelihood_mode: str | None = None if loglikelihood_mode == "auto" else loglikelihood_mode
        self.fallback_prompt = _load_prompt(fallback_prompt) if fallback_prompt else FALLBACK_PROMPT
        self.extra_body = dict(extra_body or {})
        self._json_mode = "json_schema"  # degrades to json_object, then none, when the server refuses
        self._chat_logprobs = True
        self._clients: dict[int, Any] = {}
        self._probe_lock: asyncio.Lock | None = None
        self.limiter.grace_s = min(5.0, 0.5 * self.limits.timeout)  # httpx enforces the timeout itself

    # -- client --------------------------------------------------------------------------------
    def _client(self) -> Any:
        loop = asyncio.get_running_loop()
        client = self._clients.get(id(loop))
        if client is None:
            openai = require("openai", purpose="the OpenAI-compatible backend")
            httpx = require("httpx", purpose="the OpenAI-compatible backend")
            limits = httpx.Limits(
                max_connections=self.limits.concurrency + 8, max_keepalive_connections=self.limits.concurrency
            )
            http = httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(self.limits.timeout))
            client = openai.AsyncOpenAI(
                base_url=self._url, api_key=self._key, max_retries=0, timeout=self.limits.timeout, http_client=http
            )
            self._clients = {id(loop): client}  # clients are bound to their loop; drop older ones
        return client

    def _warm(self) -> None:
        """Build the client and its resources before any timed request (first use imports a lot)."""
        client = self._client()
        _ = (client.chat.completions, client.completions)

    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        self._warm()
        return await super()._generate_batch(reqs)

    async def _call(self, fn: Any, **kwargs: Any) -> Any:
        """One SDK call with its exceptions mapped to Transient/Permanent errors."""
        openai = require("openai", purpose="the OpenAI-compatible backend")
        if self.extra_body:
            kwargs["extra_body"] = {**self.extra_body, **kwargs.get("extra_body", {})}
        try:
            return await fn(**kwargs)
        except openai.APITimeoutError as exc:
            raise TransientError(f"timed out after {self.limits.timeout:g}s") from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise TransientError(_scrub(f"connection error: {type(cause).__name__}: {cause}", self._key)) from exc
        except openai.APIStatusError as exc:
            code = exc.status_code
            msg = _scrub(f"HTTP {code}: {_error_message(exc)}", self._key)
            if code == 429 or code >= 500 or code in (408, 409):
                raise TransientError(msg, _retry_after(exc.response.headers)) from exc
            raise PermanentError(msg) from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise TransientError(f"unreadable response: {type(exc).__name__}: {str(exc)[:200]}") from exc

    # -- generation ----------------------------------------------------------------------------
    async def _generate_one(self, req: GenerationRequest) -> Completion:
        client = self._client()
        common: dict[str, Any] = {"model": self.model, "temperature": req.temperature, "max_tokens": req.max_tokens}
        if req.stop:
            common["stop"] = list(req.stop)
        if req.seed is not None:
            common["seed"] = req.seed
        if req.messages is None:
            resp = await self._call(client.completions.create, prompt=req.prompt or "", **common)
            choice = _first_choice(resp)
            text = choice.text
        else:
            messages = [{"role": m.role, "content": m.content} for m in req.messages]
            resp = await self._chat_with_schema(client, messages, req.json_schema, common)
            choice = _first_choice(resp)
            text = choice.message.content
            if text is None:
                refusal = getattr(choice.message, "refusal", None)
                raise PermanentError(f"no text in the reply{': refused: ' + refusal if refusal else ''}")
        usage = getattr(resp, "usage", None)
        return Completion(
            text=text,
            finish_reason=getattr(choice, "finish_reason", None),
            usage=Usage(int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)),
        )

    async def _chat_with_schema(
        self, client: Any, messages: list[dict[str, str]], schema: dict[str, Any] | None, common: dict[str, Any]
    ) -> Any:
        """Chat call asking for structured JSON when ``schema`` is given, degrading as the server allows."""
        while True:
            kwargs = dict(common)
            if schema is not None and self._json_mode == "json_schema":
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema, "strict": False},
                }
            elif schema is not None and self._json_mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
            try:
                return await self._call(client.chat.completions.create, messages=messages, **kwargs)
            except PermanentError as exc:
                if schema is None or self._json_mode == "none" or "HTTP 4" not in str(exc):
                    raise
                old = self._json_mode
                self._json_mode = "json_object" if old == "json_schema" else "none"
                log.warning(
                    "%s: the server refused response_format=%s (%s); retrying with %s",
                    self.name,
                    old,
                    exc,
                    self._json_mode,
                )

    # -- log-likelihood ------------------------------------------------------------------------
    async def _loglikelihood_batch(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        self._warm()
        if self.loglikelihood_mode is None and reqs:
            if self._probe_lock is None:
                self._probe_lock = asyncio.Lock()
            async with self._probe_lock:
                if self.loglikelihood_mode is None:
                    first = await self._probe(reqs[0])
                    if first is not None:
                        rest = await super()._loglikelihood_batch(reqs[1:])
                        return [first, *rest]
        return await super()._loglikelihood_batch(reqs)

    async def _probe(self, req: LoglikelihoodRequest) -> LoglikelihoodResult | None:
        """Try echo log-probabilities on ``req``; settle the mode; return its result when echo works."""
        outcome = await self.limiter.call(lambda: self._echo(req, probing=True))
        if outcome.value is not None:
            self.loglikelihood_mode = "echo"
            return self._loglik(outcome)
        if outcome.error and outcome.error.startswith("no-prompt-logprobs"):
            self.loglikelihood_mode = "chat-logprobs"
            log.warning(
                "%s: the server returns no prompt log-probabilities (completions with echo+logprobs); "
                "falling back to asking the chat endpoint to pick a lettered option (%s)",
                self.name,
                outcome.error.split(":", 1)[-1].strip(),
            )
            return None
        # the probe failed for another reason (server down, ...): report it, decide on the next call
        return self._loglik(outcome)

    async def _loglikelihood_one(self, req: LoglikelihoodRequest) -> LoglikelihoodResult:
        if self.loglikelihood_mode == "echo":
            return await self._echo(req)
        return await self._letter_choice(req)

    async def _echo(self, req: LoglikelihoodRequest, probing: bool = False) -> LoglikelihoodResult:
        if not req.continuations:
            return LoglikelihoodResult(logprobs=[], token_counts=[], method="echo-logprobs")
        ctx = req.context
        prompts = [ctx + c for c in req.continuations]
        try:
            resp = await self._call(
                self._client().completions.create,
                model=self.model,
                prompt=prompts,
                max_tokens=1,
                temperature=0,
                echo=True,
                logprobs=1,
            )
        except PermanentError as exc:
            if probing:
                raise PermanentError(f"no-prompt-logprobs: {exc}") from exc
            raise
        choices = sorted(resp.choices, key=lambda c: c.index)
        if len(choices) != len(prompts):
            raise _wrap_probe(probing, f"expected {len(prompts)} choices, got {len(choices)}")
        scores, counts = [], []
        for prompt, choice in zip(prompts, choices, strict=True):
            try:
                lp, n = _continuation_logprob(choice.logprobs, len(ctx), len(prompt))
            except _NoPromptLogprobs as exc:
                raise _wrap_probe(probing, str(exc)) from exc
            scores.append(lp)
            counts.append(n)
        return LoglikelihoodResult(logprobs=scores, token_counts=counts, method="echo-logprobs")

    async def _letter_choice(self, req: LoglikelihoodRequest) -> LoglikelihoodResult:
        n = len(req.continuations)
        if n == 0:
            return LoglikelihoodResult(logprobs=[], token_counts=[], method="letter-choice")
        if n > len(LETTERS):
            raise PermanentError(f"the letter fallback handles at most {len(LETTERS)} continuations, got {n}")
        options = "\n".join(f"{LETTERS[i]}. {c.strip()}" for i, c in enumerate(req.continuations))
        prompt = self.fallback_prompt.replace("{context}", req.context.strip()).replace("{options}", options)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": 2,
        }
        client = self._client()
        resp = None
        if self._chat_logprobs and self.loglikelihood_mode != "letter-choice":
            try:
                resp = await self._call(client.chat.completions.create, logprobs=True, top_logprobs=20, **kwargs)
            except PermanentError:
                self._chat_logprobs = False
        if resp is None:
            resp = await self._call(client.chat.completions.create, **kwargs)
        choice = _first_choice(resp)
        scores = _letter_logprobs(getattr(choice, "logprobs", None), n)
        if scores is not None:
            return LoglikelihoodResult(logprobs=scores, token_counts=[1] * n, method="chat-logprobs")
        text = (choice.message.content or "").strip()
        m = re.match(r"[\s(\[]*([A-Z])\b", text.upper())
        if not m or LETTERS.index(m.group(1)) >= n:
            raise PermanentError(f"could not read an option letter from the reply {text[:60]!r}")
        picked = LETTERS.index(m.group(1))
        return LoglikelihoodResult(
            logprobs=[0.0 if i == picked else MISSING_SCORE for i in range(n)],
            token_counts=[1] * n,
            method="letter-choice",
        )

    def describe(self) -> dict[str, Any]:
        """Arguments for the run manifest (no API key)."""
        out = super().describe()
        out["loglikelihood_mode"] = self.loglikelihood_mode or "auto (not yet probed)"
        if self.extra_body:
            out["extra_body"] = self.extra_body
        return out

    def close(self) -> None:
        """Drop the HTTP clients."""
        self._clients = {}


def _wrap_probe(probing: bool, message: str) -> Exception:
    return PermanentError(f"no-prompt-logprobs: {message}") if probing else PermanentError(message)


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


def _first_choice(resp: Any) -> Any:
    choices = getattr(resp, "choices", None)
    if not choices:
        raise TransientError("unreadable response: no choices")
    return choices[0]


def _continuation_logprob(logprobs: Any, ctx_len: int, end: int) -> tuple[float, int]:
    """Sum of the log-probabilities of the tokens covering characters ``[ctx_len, end)`` of the echoed prompt."""
    if logprobs is None:
        raise _NoPromptLogprobs("the response has no logprobs")
    tokens = list(getattr(logprobs, "tokens", None) or [])
    lps = list(getattr(logprobs, "token_logprobs", None) or [])
    offsets = list(getattr(logprobs, "text_offset", None) or [])
    if not tokens or len(lps) != len(tokens):
        raise _NoPromptLogprobs("the response has no per-token logprobs for the prompt")
    if len(offsets) != len(tokens):
        offsets, pos = [], 0
        for tok in tokens:
            offsets.append(pos)
            pos += len(tok)
    if offsets[-1] + len(tokens[-1]) < end:
        raise _NoPromptLogprobs("the prompt was not echoed")
    total, count = 0.0, 0
    for tok, lp, off in zip(tokens, lps, offsets, strict=True):
        if off >= end:
            break  # the generated token(s)
        if off + max(len(tok), 1) <= ctx_len:
            continue
        if lp is None:
            raise _NoPromptLogprobs("a continuation token has no logprob (empty context?)")
        total += float(lp)
        count += 1
    if count == 0 and end > ctx_len:
        raise _NoPromptLogprobs("no continuation tokens in the echoed prompt")
    return total, count


def _letter_logprobs(logprobs: Any, n: int) -> list[float] | None:
    """Scores of the option letters from the first generated token's top log-probabilities, if present."""
    content = getattr(logprobs, "content", None) if logprobs is not None else None
    if not content:
        return None
    best: dict[str, float] = {}
    for entry in content[:2]:
        for top in getattr(entry, "top_logprobs", None) or []:
            letter = str(top.token).strip().strip(".):(").upper()
            if len(letter) == 1 and letter in LETTERS[:n]:
                best[letter] = max(best.get(letter, -1e9), float(top.logprob))
        if best:
            break
    if not best:
        return None
    return [best.get(LETTERS[i], MISSING_SCORE) for i in range(n)]


def _load_prompt(value: str) -> str:
    path = Path(value)
    if "\n" not in value and path.suffix in (".txt", ".md", ".j2") and path.exists():
        return path.read_text(encoding="utf-8")
    return value


__all__ = ["FALLBACK_PROMPT", "OpenAILLM", "redact_url"]
