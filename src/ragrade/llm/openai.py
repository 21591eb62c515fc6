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

Requests go through the SDK (``AsyncOpenAI.post``: it builds, authenticates and
sends them and maps failures to its exceptions) and replies are read as plain
JSON. One SDK client per event loop, with a connection pool sized to the
concurrency limit, serves every request of a batch; ``transport="auto"`` picks
the SDK's aiohttp client when available (much less CPU per request than httpx),
``"httpx"`` forces the SDK's default client.

The API key comes from ``api_key=`` or ``OPENAI_API_KEY``; it is sent to the
server only and never appears in :meth:`describe`, cache keys, logs or errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import importlib
import importlib.util
import json
import os
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrade.deps import require
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache
from ragrade.llm.core import BaseLLM, log
from ragrade.llm.limits import AuthError, LimitConfig, PermanentError, TransientError

MISSING_SCORE = -50.0
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
FALLBACK_PROMPT = (
    "Read the text below and decide which option continues it best.\n\n"
    "{context}\n\nOptions:\n{options}\n\n"
    "Reply with the letter of the best option and nothing else."
)


TRANSPORTS = ("auto", "aiohttp", "httpx")


class _NoPromptLogprobs(Exception):
    """The server answered but gave no log-probabilities for the prompt tokens."""


@dataclass
class _Session:
    """One event loop's SDK client, the response type to ask it for, and how many batches use it."""

    client: Any
    response_type: type
    transport: str
    users: int = 0


def _http_client(openai: Any, transport: str, limits: LimitConfig) -> tuple[Any, type, str]:
    """The SDK's HTTP client for ``transport``, pooled for ``limits.concurrency`` connections.

    ``auto`` takes the SDK's aiohttp client (``openai.DefaultAioHttpClient``) when the SDK has it and
    aiohttp is installed: per request it costs a fraction of the CPU of the httpx transport, which
    matters at tens of requests in flight. Otherwise the SDK's default httpx client. Returns the
    client, the response class its ``post(..., cast_to=...)`` returns raw, and the transport's name.
    """
    aio = getattr(openai, "DefaultAioHttpClient", None)
    use_aio = transport != "httpx" and aio is not None and importlib.util.find_spec("aiohttp") is not None
    if transport == "aiohttp" and not use_aio:
        from ragrade.errors import ConfigError

        raise ConfigError("transport 'aiohttp' needs an openai SDK with aiohttp support: pip install 'openai[aiohttp]'")
    factory = aio if use_aio else getattr(openai, "DefaultAsyncHttpxClient", None)
    if factory is None:  # SDKs before DefaultAsyncHttpxClient
        factory = require("httpx", purpose="the OpenAI-compatible backend").AsyncClient
    # the httpx flavour the SDK was built on (httpx2 in recent SDKs, httpx before)
    mro = factory.__mro__ if isinstance(factory, type) else ()
    base = next((c for c in mro if c.__name__ == "AsyncClient"), None)
    mod = importlib.import_module((base or factory).__module__.split(".")[0])
    pool = mod.Limits(max_connections=limits.concurrency + 8, max_keepalive_connections=limits.concurrency)
    client = factory(limits=pool, timeout=mod.Timeout(limits.timeout))
    return client, mod.Response, "aiohttp" if use_aio else mod.__name__


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


def _split_query(url: str | None) -> tuple[str | None, dict[str, str]]:
    """``(url without its query string, the query parameters)``: the SDK appends paths to the base URL, so
    parameters such as ``?api-version=...`` travel as its default query instead."""
    if not url or "?" not in url:
        return url, {}
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    return urllib.parse.urlunsplit(parts._replace(query="")), query


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
        transport: str = "auto",
    ) -> None:
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        super().__init__(model, base_url=redact_url(base_url), cache=cache, limits=limits, seed=seed)
        self._url, self._query = _split_query(_strip_userinfo(base_url))
        if base_url and "@" in urllib.parse.urlsplit(base_url).netloc:
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
        self.transport = transport
        if transport not in TRANSPORTS:
            from ragrade.errors import ConfigError

            raise ConfigError(f"transport must be one of {', '.join(TRANSPORTS)}, got '{transport}'")
        self._sessions: dict[int, _Session] = {}
        self._sdk: Any = None
        self._probe_lock: asyncio.Lock | None = None
        self.limiter.grace_s = min(5.0, 0.5 * self.limits.timeout)  # the HTTP client enforces the timeout itself

    # -- client --------------------------------------------------------------------------------
    def _openai(self) -> Any:
        if self._sdk is None:
            self._sdk = require("openai", purpose="the OpenAI-compatible backend")
        return self._sdk

    def _new_session(self) -> _Session:
        openai = self._openai()
        http, response_type, name = _http_client(openai, self.transport, self.limits)
        client = openai.AsyncOpenAI(
            base_url=self._url,
            api_key=self._key,
            max_retries=0,
            timeout=self.limits.timeout,
            http_client=http,
            default_query=self._query or None,
        )
        return _Session(client, response_type, name)

    def _session(self) -> _Session:
        """The SDK client of the running event loop (clients and their connection pools belong to one loop)."""
        key = id(asyncio.get_running_loop())
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = self._new_session()
        return session

    @contextlib.asynccontextmanager
    async def _batch(self) -> AsyncIterator[_Session]:
        """Hold this loop's client for one batch; the last batch to finish on the loop closes it.

        One client (one connection pool sized to the concurrency limit) serves every request of the
        batches running on a loop; closing it when the loop's last batch ends releases its sockets
        before ``asyncio.run`` closes the loop (aiohttp warns about sessions left open).
        """
        key = id(asyncio.get_running_loop())
        session = self._session()
        session.users += 1
        try:
            yield session
        finally:
            session.users -= 1
            if session.users == 0 and self._sessions.get(key) is session:
                del self._sessions[key]
                with contextlib.suppress(Exception):
                    await session.client.close()

    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        async with self._batch():
            return await super()._generate_batch(reqs)

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` (plus ``extra_body``) through the SDK; the parsed JSON object of the reply.

        The SDK builds, authenticates and sends the request and maps HTTP and network failures to its
        exceptions; the reply is read as plain JSON (the typed response models cost more CPU than the
        rest of the request and the few fields used here are checked by the callers).
        """
        session = self._session()
        if self.extra_body:
            body = {**body, **self.extra_body}
        resp = await self._call(session.client.post, path, body=body, cast_to=session.response_type)
        try:
            data = json.loads(resp.content)
        except ValueError as exc:  # JSONDecodeError and undecodable bytes
            raise TransientError(f"unreadable response: {type(exc).__name__}: {str(exc)[:200]}") from exc
        if not isinstance(data, dict):
            raise TransientError(f"unreadable response: expected a JSON object, got {type(data).__name__}")
        return data

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """One SDK call with its exceptions mapped to Transient/Permanent errors."""
        openai = self._openai()
        try:
            return await fn(*args, **kwargs)
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
            if code in (401, 403):
                raise AuthError(msg, code) from exc
            raise PermanentError(msg, code) from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise TransientError(f"unreadable response: {type(exc).__name__}: {str(exc)[:200]}") from exc

    # -- generation ----------------------------------------------------------------------------
    async def _generate_one(self, req: GenerationRequest) -> Completion:
        common: dict[str, Any] = {"model": self.model, "temperature": req.temperature, "max_tokens": req.max_tokens}
        if req.stop:
            common["stop"] = list(req.stop)
        if req.seed is not None:
            common["seed"] = req.seed
        if req.messages is None:
            data = await self._post("/completions", {**common, "prompt": req.prompt or ""})
            choice = _first_choice(data)
            text = choice.get("text")
            if not isinstance(text, str):
                raise TransientError("unreadable response: the choice has no text")
        else:
            messages = [{"role": m.role, "content": m.content} for m in req.messages]
            data = await self._chat_with_schema(messages, req.json_schema, common)
            choice = _first_choice(data)
            message = _as_dict(choice.get("message"))
            text = _message_text(message.get("content"))
            if text is None:
                refusal = message.get("refusal")
                raise PermanentError(f"no text in the reply{': refused: ' + str(refusal) if refusal else ''}")
        usage = _as_dict(data.get("usage"))
        finish = choice.get("finish_reason")
        return Completion(
            text=text,
            finish_reason=finish if isinstance(finish, str) else None,
            usage=Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))),
        )

    async def _chat_with_schema(
        self, messages: list[dict[str, str]], schema: dict[str, Any] | None, common: dict[str, Any]
    ) -> dict[str, Any]:
        """Chat call asking for structured JSON when ``schema`` is given, degrading as the server allows."""
        while True:
            body = {**common, "messages": messages}
            if schema is not None and self._json_mode == "json_schema":
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema, "strict": False},
                }
            elif schema is not None and self._json_mode == "json_object":
                body["response_format"] = {"type": "json_object"}
            try:
                return await self._post("/chat/completions", body)
            except PermanentError as exc:
                if schema is None or self._json_mode == "none" or not unsupported(exc):
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
        async with self._batch():
            return await self._loglikelihood_batch_in_session(reqs)

    async def _loglikelihood_batch_in_session(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
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
        body = {
            "model": self.model,
            "prompt": prompts,
            "max_tokens": 1,
            "temperature": 0,
            "echo": True,
            "logprobs": 1,
        }
        try:
            data = await self._post("/completions", body)
        except PermanentError as exc:
            if probing and unsupported(exc):
                raise PermanentError(f"no-prompt-logprobs: {exc}") from exc
            raise
        _first_choice(data)  # checks the shape
        choices = sorted((_as_dict(c) for c in data["choices"]), key=lambda c: _count(c.get("index")))
        if len(choices) != len(prompts):
            raise _wrap_probe(probing, f"expected {len(prompts)} choices, got {len(choices)}")
        scores, counts = [], []
        for prompt, choice in zip(prompts, choices, strict=True):
            try:
                lp, n = _continuation_logprob(choice.get("logprobs"), len(ctx), len(prompt))
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
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": 2,
        }
        data = None
        if self._chat_logprobs and self.loglikelihood_mode != "letter-choice":
            try:
                data = await self._post("/chat/completions", {**body, "logprobs": True, "top_logprobs": 20})
            except PermanentError as exc:
                if not unsupported(exc):
                    raise
                self._chat_logprobs = False
        if data is None:
            data = await self._post("/chat/completions", body)
        choice = _first_choice(data)
        scores = _letter_logprobs(choice.get("logprobs"), n)
        if scores is not None:
            return LoglikelihoodResult(logprobs=scores, token_counts=[1] * n, method="chat-logprobs")
        text = (_message_text(_as_dict(choice.get("message")).get("content")) or "").strip()
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
        out["transport"] = self.transport
        if self.extra_body:
            out["extra_body"] = self.extra_body
        return out

    def close(self) -> None:
        """Drop the HTTP clients (those of finished batches are closed already)."""
        self._sessions = {}


UNSUPPORTED_STATUS = (400, 404, 405, 415, 422)


def unsupported(exc: PermanentError) -> bool:
    """True when ``exc`` can mean "this server does not support that request" (a capability fallback may help).

    Authentication errors and failures without an HTTP status (network, unreadable replies) never do.
    """
    return not isinstance(exc, AuthError) and exc.status in UNSUPPORTED_STATUS


def _wrap_probe(probing: bool, message: str) -> Exception:
    return PermanentError(f"no-prompt-logprobs: {message}") if probing else PermanentError(message)


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    """The first choice of a reply; TransientError when the reply has none (or is an error object)."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        err = data.get("error")
        if err:
            message = err.get("message", err) if isinstance(err, dict) else err
            raise TransientError(f"server error in the reply: {str(message)[:300]}")
        raise TransientError("unreadable response: no choices")
    first: dict[str, Any] = choices[0]
    return first


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    """A token count or index from a reply (0 when absent or not a number)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _message_text(content: Any) -> str | None:
    """A chat message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    raise TransientError(f"unreadable response: message content is a {type(content).__name__}")


def _continuation_logprob(logprobs: Any, ctx_len: int, end: int) -> tuple[float, int]:
    """Sum of the log-probabilities of the tokens covering characters ``[ctx_len, end)`` of the echoed prompt."""
    if not isinstance(logprobs, dict):
        raise _NoPromptLogprobs("the response has no logprobs")
    tokens = [str(t) for t in logprobs.get("tokens") or []]
    lps = list(logprobs.get("token_logprobs") or [])
    offsets = list(logprobs.get("text_offset") or [])
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
    content = _as_dict(logprobs).get("content")
    if not content or not isinstance(content, list):
        return None
    best: dict[str, float] = {}
    for entry in content[:2]:
        for top in _as_dict(entry).get("top_logprobs") or []:
            top = _as_dict(top)
            if top.get("logprob") is None:
                continue
            letter = str(top.get("token", "")).strip().strip(".):(").upper()
            if len(letter) == 1 and letter in LETTERS[:n]:
                best[letter] = max(best.get(letter, -1e9), float(top["logprob"]))
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
