"""The OpenAI-compatible backend (OpenAI, vLLM, Ollama, llama.cpp server, TGI, LM Studio), on the official SDK.

Generation uses chat completions for ``messages`` and completions for ``prompt``.
Structured output asks for ``response_format`` ``json_schema``; a server that refuses
it gets ``json_object``, then plain text, each step logged once and none skipped: a
request that meets a refusal asks again with the next format down (plain text only
once ``json_object`` is refused too). A refusal is a 400/404/422 that names the
format, or one that the same request one format down does not get; or HTTP 500 for
two requests with the format (none answered) when a retry one format down succeeds:
from the second such 500 on, every attempt goes one format down, so that
``max_retries=0`` keeps its meaning and a broken server costs no extra request.
401/403, 429 and timeouts never degrade it. Each
:class:`~ragrade.llm.base.Completion` records the format it was asked with.

Log-likelihood (:mod:`ragrade.llm.openai_loglik`) is settled on the first request
from what the server really returns (:mod:`ragrade.llm.capabilities`): echoed prompt
log-probabilities (vLLM, OpenAI's legacy models; a list of prompts per request, or
one where lists fail), else forced-token scoring through ``/tokenize`` and
``logit_bias`` (llama.cpp's ``llama-server``), else letter picking on the chat
endpoint only when allowed (``letter_fallback=True`` or ``loglikelihood_mode``
``"chat-logprobs"`` / ``"letter-choice"``); otherwise every log-likelihood request
fails with one error that says what was tried and what to do instead.

The server's advertised slots (llama.cpp ``/props`` or ``/slots``) seed the adaptive
in-flight cap (:mod:`ragrade.llm.limits`), looked up once per backend; a server that
advertises none starts from one request in flight (slow start). Each request is sent
with the running attempt's timeout and reports its reply's latency to the limiter,
which learns the timeout of later requests from them when the user left it at its
default (:mod:`ragrade.llm.pacing`).

Requests go out through one client per event loop, with a connection pool sized
to the concurrency limit, shared by every request of the batches on that loop;
replies are read as plain JSON. ``transport="auto"`` (or ``"aiohttp"``) sends them
with :class:`~ragrade.llm.openai_http.DirectClient`, the SDK's requests sent
straight through aiohttp (a third of the SDK's CPU per request, which at tens of
requests in flight decides the pace); ``"httpx"`` goes through the official SDK
(``AsyncOpenAI.post`` on its default httpx client), which builds, authenticates and
sends them and maps failures to its exceptions. Both map failures alike.

The API key comes from ``api_key=`` or ``OPENAI_API_KEY``; it is sent to the
server only and never appears in :meth:`describe`, cache keys, logs or errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import os
import time
import urllib.parse
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ragrade.deps import require
from ragrade.io import JSONObject
from ragrade.llm.base import Completion, GenerationRequest, LoglikelihoodRequest, LoglikelihoodResult, Usage
from ragrade.llm.cache import ResponseCache
from ragrade.llm.core import _WRITER, BaseLLM, log
from ragrade.llm.cost_watch import LoglikCost
from ragrade.llm.limits import AuthError, LimitConfig, PermanentError, TransientError, request_timeout
from ragrade.llm.openai_client import CacheWatch
from ragrade.llm.openai_http import DirectClient, retry_after, scrub
from ragrade.llm.openai_loglik import (
    FALLBACK_PROMPT,
    as_dict,
    count,
    echo_scores,
    first_choice,
    forced_scores,
    letter_choice,
    message_text,
    unsupported,
)
from ragrade.llm.pacing import stored

TRANSPORTS = ("auto", "aiohttp", "httpx")
LOGLIKELIHOOD_MODES = ("auto", "echo", "forced-token", "chat-logprobs", "letter-choice")
FORMAT_STATUS = (400, 404, 422)  # refusals that may mean "not this response_format" (500: see _chat_with_schema)
JSON_MODES = ("json_schema", "json_object", "none")  # strongest first; "none" asks for plain text
FORMAT_WORDS = ("response_format", "json_schema", "json_object", "json schema", "grammar", "schema")


@dataclass
class _Session:
    """One event loop's client (direct or SDK), the response type to ask the SDK for, and how many batches use it."""

    client: Any
    response_type: type | None
    transport: str
    users: int = 0

    @property
    def direct(self) -> bool:
        return isinstance(self.client, DirectClient)


def _use_direct(transport: str) -> bool:
    """Whether ``transport`` sends through :class:`DirectClient` (aiohttp installed; ``auto`` or ``aiohttp``)."""
    if transport == "httpx":
        return False
    if importlib.util.find_spec("aiohttp") is not None:
        return True
    if transport == "aiohttp":
        from ragrade.errors import ConfigError

        raise ConfigError("transport 'aiohttp' needs aiohttp: pip install aiohttp")
    return False


def _http_client(openai: object, limits: LimitConfig) -> tuple[object, type, str]:
    """The SDK's default httpx client, pooled for ``limits.concurrency`` connections.

    Returns the client, the response class its ``post(..., cast_to=...)`` returns raw, and the transport's name.
    """
    factory = getattr(openai, "DefaultAsyncHttpxClient", None)
    if factory is None:  # SDKs before DefaultAsyncHttpxClient
        factory = require("httpx", purpose="the OpenAI-compatible backend").AsyncClient
    # the httpx flavour the SDK was built on (httpx2 in recent SDKs, httpx before)
    mro = factory.__mro__ if isinstance(factory, type) else ()
    base = next((c for c in mro if c.__name__ == "AsyncClient"), None)
    mod = importlib.import_module((base or factory).__module__.split(".")[0])
    pool = mod.Limits(max_connections=limits.concurrency + 8, max_keepalive_connections=limits.concurrency)
    client = factory(limits=pool, timeout=mod.Timeout(limits.timeout))
    return client, mod.Response, mod.__name__


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


def _config_error(message: str) -> Exception:
    from ragrade.errors import ConfigError

    return ConfigError(message)


class OpenAILLM(BaseLLM):
    """An OpenAI-compatible server through the ``openai`` SDK (see module docstring)."""

    provider = "openai"
    supports_loglikelihood = True  # settled at first use; a server without any way fails with a clear error

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
        letter_fallback: bool = False,
        fallback_prompt: str | None = None,
        extra_body: Mapping[str, object] | None = None,
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
            raise _config_error(
                "no API key for openai/...: set OPENAI_API_KEY, or give $base_url for a local "
                "OpenAI-compatible server (vLLM, Ollama, llama.cpp) that needs none"
            )
        if loglikelihood_mode not in LOGLIKELIHOOD_MODES:
            raise _config_error(
                f"loglikelihood_mode must be one of {', '.join(LOGLIKELIHOOD_MODES)}, got '{loglikelihood_mode}'"
            )
        if transport not in TRANSPORTS:
            raise _config_error(f"transport must be one of {', '.join(TRANSPORTS)}, got '{transport}'")
        # None until settled: "echo", "forced-token", "chat-logprobs", "letter-choice" or "none"
        self.loglikelihood_mode: str | None = None if loglikelihood_mode == "auto" else loglikelihood_mode
        self.letter_fallback = bool(letter_fallback)
        self.no_loglikelihood: str | None = None  # the error of every request once "none" is settled
        self.loglik_cost = LoglikCost(self.name)  # says once when the method is slow on this server
        self.echo_batched = True  # echo sends a list of prompts per request until the server refuses one
        self.chat_logprobs = True
        self.fallback_prompt = _load_prompt(fallback_prompt) if fallback_prompt else FALLBACK_PROMPT
        self.extra_body = dict(extra_body or {})
        self._json_mode = "json_schema"  # degrades to json_object, then none, when the server refuses
        self._format_500s: Counter[str] = Counter()  # HTTP 500 answers to requests with each format
        self._format_ok: set[str] = set()  # formats the server has answered
        self._last_500: dict[int, str] = {}  # id of a request in a batch -> the format its last HTTP 500 came with
        self.transport = transport
        from ragrade.llm.capabilities import server_root

        self.server_root = server_root(self._url)
        self.slots: int | None = None  # advertised by the server (llama.cpp /props or /slots)
        self.n_ctx: int | None = None  # context size per slot, when advertised
        self.token_cache: dict[tuple[str, bool], list[tuple[int, str | None]]] = {}  # short texts' /tokenize
        self.cache_watch = CacheWatch()  # does the server recompute cached prompts? (forced-token scoring)
        self._slots_checked = False
        self._sessions: dict[int, _Session] = {}
        self._sdk: object = None
        self._probe_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self.limiter.grace_s = min(5.0, 0.5 * self.limits.timeout)  # the HTTP client enforces the timeout itself
        self.limiter.start_slow()  # one request in flight until the server's slots or its replies say more

    # -- client --------------------------------------------------------------------------------
    def _openai(self) -> Any:
        if self._sdk is None:
            self._sdk = require("openai", purpose="the OpenAI-compatible backend")
        return self._sdk

    def _new_session(self) -> _Session:
        if _use_direct(self.transport):
            key = self._key or ""  # set in __init__ (a missing key is refused there)
            direct = DirectClient(self._url, key, self._query, self.limits.concurrency, self.limits.timeout)
            return _Session(direct, None, "aiohttp")
        openai = self._openai()
        http, response_type, name = _http_client(openai, self.limits)
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
    async def batch_session(self) -> AsyncIterator[_Session]:
        """Hold this loop's client for one batch; the last batch to finish on the loop closes it.

        One client (one connection pool sized to the concurrency limit) serves every request of the
        batches running on a loop; closing it when the loop's last batch ends releases its sockets
        before ``asyncio.run`` closes the loop (aiohttp warns about sessions left open). The first
        batch also looks up the server's slots.
        """
        key = id(asyncio.get_running_loop())
        session = self._session()
        session.users += 1
        try:
            if not self._slots_checked:
                self._slots_checked = True
                await self._check_slots()
            yield session
        finally:
            session.users -= 1
            if session.users == 0 and self._sessions.get(key) is session:
                del self._sessions[key]
                with contextlib.suppress(Exception):
                    await session.client.close()

    async def _check_slots(self) -> None:
        """Seed the adaptive in-flight cap from the slots the server advertises (once per backend)."""
        from ragrade.llm.capabilities import fetch_slots

        self.slots, self.n_ctx = await fetch_slots(self)
        if self.slots:
            self.limiter.seed_capacity(self.slots)
            if self.slots < self.limits.concurrency:
                log.info("%s: the server has %d slot(s); %d request(s) in flight", self.name, self.slots, self.slots)

    async def _generate_batch(self, reqs: Sequence[GenerationRequest]) -> list[Completion]:
        async with self.batch_session():
            try:
                return await super()._generate_batch(reqs)
            finally:
                for req in reqs:
                    self._last_500.pop(id(req), None)

    async def post_json(self, path: str, body: Mapping[str, object], extra: bool = True) -> JSONObject:
        """POST ``body`` (plus ``extra_body`` when ``extra``); the parsed JSON object of the reply.

        ``path`` is relative to the base URL, or a full URL. The client (direct, or the SDK) builds,
        authenticates and sends the request, and HTTP and network failures become Transient/Permanent
        errors; the reply is read as plain JSON (typed response models cost more CPU than the rest of
        the request, and the few fields used here are checked by the callers).
        """
        session = self._session()
        if self.extra_body and extra:
            body = {**body, **self.extra_body}
        wait = request_timeout(self.limits.timeout)  # the running attempt's (learned from the replies, or given)
        sent = time.perf_counter()
        if session.direct:
            content = await session.client.post(path, body, wait)
        else:
            options = {"timeout": wait}
            post = session.client.post
            content = (await self._call(post, path, body=body, cast_to=session.response_type, options=options)).content
        self.limiter.observe(time.perf_counter() - sent)
        try:
            data = json.loads(content)
        except ValueError as exc:  # JSONDecodeError and undecodable bytes
            raise TransientError(f"unreadable response: {type(exc).__name__}: {str(exc)[:200]}") from exc
        if not isinstance(data, dict):
            raise TransientError(f"unreadable response: expected a JSON object, got {type(data).__name__}")
        return data

    async def get_json(self, url: str, timeout: float) -> object:
        """GET ``url`` once (no retry) with a short timeout; the parsed JSON, or None on any failure."""
        session = self._session()
        options = {"timeout": min(timeout, self.limits.timeout), "max_retries": 0}
        try:
            if session.direct:
                return json.loads(await session.client.get(url, options["timeout"]))
            resp = await session.client.get(url, cast_to=session.response_type, options=options)
            return json.loads(resp.content)
        except Exception:  # 404 on servers without the endpoint, timeouts, garbage: nothing advertised
            return None

    async def _call(self, fn: Any, *args: object, **kwargs: object) -> Any:
        """One SDK call with its exceptions mapped to Transient/Permanent errors."""
        openai = self._openai()
        try:
            return await fn(*args, **kwargs)
        except openai.APITimeoutError as exc:
            wait = request_timeout(self.limits.timeout)
            raise TransientError(f"timed out after {wait:g}s", timeout=True) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise TransientError(scrub(f"connection error: {type(cause).__name__}: {cause}", self._key)) from exc
        except openai.APIStatusError as exc:
            code = exc.status_code
            msg = scrub(f"HTTP {code}: {_error_message(exc)}", self._key)
            if code == 429 or code >= 500 or code in (408, 409):
                raise TransientError(msg, retry_after(exc.response.headers), status=code) from exc
            if code in (401, 403):
                raise AuthError(msg, code) from exc
            raise PermanentError(msg, code) from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise TransientError(f"unreadable response: {type(exc).__name__}: {str(exc)[:200]}") from exc

    # -- generation ----------------------------------------------------------------------------
    async def _generate_one(self, req: GenerationRequest) -> Completion:
        common: JSONObject = {"model": self.model, "temperature": req.temperature, "max_tokens": req.max_tokens}
        if req.stop:
            common["stop"] = list(req.stop)
        if req.seed is not None:
            common["seed"] = req.seed
        fmt: str | None = None
        if req.messages is None:
            data = await self.post_json("/completions", {**common, "prompt": req.prompt or ""})
            choice = first_choice(data)
            text = choice.get("text")
            if not isinstance(text, str):
                raise TransientError("unreadable response: the choice has no text")
        else:
            messages = [{"role": m.role, "content": m.content} for m in req.messages]
            data, fmt = await self._chat_with_schema({**common, "messages": messages}, req.json_schema, id(req))
            choice = first_choice(data)
            message = as_dict(choice.get("message"))
            text = message_text(message.get("content"))
            if text is None:
                refusal = message.get("refusal")
                raise PermanentError(f"no text in the reply{': refused: ' + str(refusal) if refusal else ''}")
        usage = as_dict(data.get("usage"))
        finish = choice.get("finish_reason")
        return Completion(
            text=text,
            finish_reason=finish if isinstance(finish, str) else None,
            usage=Usage(count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))),
            response_format=fmt,
        )

    async def _chat_with_schema(
        self, body: JSONObject, schema: JSONObject | None, key: int | None = None
    ) -> tuple[JSONObject, str | None]:
        """Chat call asking for JSON when ``schema`` is given, degrading as the server allows (module docstring).

        Returns the reply and the response format it was asked with (None without ``schema``). An attempt
        starts from the backend's current format, one step down for each format that is suspect (HTTP 500s,
        never answered); the retry of request ``key`` after an HTTP 500 goes at most one step below the
        format that got it, so no format is skipped.
        """
        if schema is None:
            return await self.post_json("/chat/completions", body), None
        mode = self._json_mode
        last = self._last_500.pop(key, None) if key is not None else None
        floor = JSON_MODES.index(_below(last)) if last is not None else len(JSON_MODES)
        while self._suspect(mode) and JSON_MODES.index(mode) < floor:  # a retry steps one format down at most
            mode = _below(mode)
        refused: dict[str, Exception] = {}  # 4xx answers this request got that may mean "not this format"
        checking: Exception | None = None  # the first of them that did not name the format: raised if not settled
        while True:
            try:
                data = await self.post_json("/chat/completions", _with_format(body, mode, schema))
            except TransientError as exc:
                if checking is not None:  # what the format below meets does not settle the refusal
                    raise checking from None
                if exc.status == 500 and mode != "none":
                    self._format_500s[mode] += 1
                    if key is not None:
                        self._last_500[key] = mode
                raise
            except PermanentError as exc:
                if isinstance(exc, AuthError) or exc.status not in FORMAT_STATUS or mode == "none":
                    raise (checking or exc) from None
                refused[mode] = exc
                if any(w in str(exc).lower() for w in FORMAT_WORDS):
                    self._degrade(mode, exc)  # the answer names the format
                elif checking is None:
                    checking = exc  # is it the format? the same request one format down tells
                mode = _below(mode)
                continue
            self._answered(mode, refused)
            return data, "text" if mode == "none" else mode

    def _suspect(self, mode: str) -> bool:
        """Whether requests with ``mode`` got HTTP 500 twice or more and none was answered."""
        return mode != "none" and self._format_500s[mode] >= 2 and mode not in self._format_ok

    def _answered(self, mode: str, refused: Mapping[str, Exception]) -> None:
        """The server answered a request asked with ``mode``: every format above it is refused."""
        if mode != "none":
            self._format_ok.add(mode)
        label = "no response_format" if mode == "none" else mode
        for above in JSON_MODES[: JSON_MODES.index(mode)]:
            n = self._format_500s[above]
            self._degrade(above, refused.get(above) or f"HTTP 500 for {n} requests with it, 200 with {label}")

    def _degrade(self, mode: str, exc: Exception | str) -> None:
        """Step the JSON mode down from ``mode`` (once, whichever request saw the refusal first)."""
        if self._json_mode != mode:
            return
        self._json_mode = _below(mode)
        log.warning(
            "%s: the server refused response_format=%s (%s); asking with %s from now on",
            self.name,
            mode,
            exc,
            "response_format=json_object" if self._json_mode == "json_object" else "no response_format (plain text)",
        )

    # -- log-likelihood ------------------------------------------------------------------------
    def _key_extra(self, req: GenerationRequest | LoglikelihoodRequest) -> JSONObject:
        """Log-likelihoods are keyed by whether letter picking may stand in for them: a run that does not
        allow it never gets letters from the cache (nor the silent letters of earlier versions)."""
        if not isinstance(req, LoglikelihoodRequest):
            return {}
        letters = self.letter_fallback or self.loglikelihood_mode in ("chat-logprobs", "letter-choice")
        return {"scores": "letters allowed" if letters else "log-likelihood"}

    def loglikelihood_budget(self, req: LoglikelihoodRequest) -> float:
        """Seconds one log-likelihood attempt may take: one request timeout per request it may need."""
        mode = self.loglikelihood_mode
        if (mode == "echo" and self.echo_batched) or mode in ("chat-logprobs", "letter-choice"):
            return self.limits.timeout
        requests = 2 + len(req.continuations) + sum(max(1, len(c) // 2) for c in req.continuations)
        return self.limits.timeout * requests

    def prompt_logprobs_method(self) -> str:
        """How this server gives prompt log-probabilities: echo-batched, echo, forced-token, none (or unknown)."""
        mode = self.loglikelihood_mode
        if mode == "echo":
            return "echo-batched" if self.echo_batched else "echo"
        if mode == "forced-token":
            return mode
        return "unknown" if mode is None else "none"

    async def _loglikelihood_batch(self, reqs: Sequence[LoglikelihoodRequest]) -> list[LoglikelihoodResult]:
        async with self.batch_session():
            failed: list[LoglikelihoodResult] = []  # requests whose detection attempt failed
            if self.loglikelihood_mode is None and reqs:
                from ragrade.llm.capabilities import detect_loglikelihood

                loop = asyncio.get_running_loop()
                lock = self._probe_locks.setdefault(loop, asyncio.Lock())
                async with lock:
                    while self.loglikelihood_mode is None and len(failed) < len(reqs):
                        error = await detect_loglikelihood(self)
                        if self.loglikelihood_mode is None:
                            failed.append(LoglikelihoodResult(logprobs=None, error=error))
            rest = await asyncio.gather(*(self._score(r) for r in reqs[len(failed) :]))
            return failed + list(rest)

    async def _score(self, req: LoglikelihoodRequest) -> LoglikelihoodResult:
        if self.loglikelihood_mode == "none":  # settled: no request could help
            # stored with each request: the settings in words (``marked`` restores them where a tally raises)
            return LoglikelihoodResult(logprobs=None, error=stored(self.no_loglikelihood or ""), attempts=0)
        call = self.limiter.call(partial(self._loglikelihood_one, req), timeout=self.loglikelihood_budget(req))
        result = self.loglik_result(await self.loglik_cost.watch(call, self.prompt_logprobs_method))
        writer = _WRITER.get()
        if writer is not None:
            writer.add(req, result)
        return result

    async def _loglikelihood_one(self, req: LoglikelihoodRequest) -> LoglikelihoodResult:
        mode = self.loglikelihood_mode
        try:
            if mode == "echo":
                return await echo_scores(self, req)
            if mode == "forced-token":
                return await forced_scores(self, req)
            if mode in ("chat-logprobs", "letter-choice"):
                return await letter_choice(self, req)
        except (TypeError, ValueError, KeyError, IndexError) as exc:  # odd values in a well-formed reply
            raise TransientError(f"unreadable response: {type(exc).__name__}: {str(exc)[:200]}") from exc
        raise PermanentError(stored(self.no_loglikelihood or f"{self.name}: log-likelihood support not detected"))

    def describe(self) -> JSONObject:
        """Arguments for the run manifest (no API key)."""
        out = super().describe()
        out["loglikelihood_mode"] = self.loglikelihood_mode or "auto (not yet probed)"
        if self.loglikelihood_mode == "echo":
            out["echo_batched"] = self.echo_batched
        if self.letter_fallback:
            out["letter_fallback"] = True
        if self._json_mode != "json_schema":
            out["json_mode"] = self._json_mode
        if self.slots is not None:
            out["server_slots"] = self.slots
        out["transport"] = self.transport
        if self.extra_body:
            out["extra_body"] = self.extra_body
        return out

    def close(self) -> None:
        """Drop the HTTP clients (those of finished batches are closed already)."""
        self._sessions = {}


def _below(mode: str) -> str:
    """The JSON mode one step weaker than ``mode`` ("none" stays)."""
    return JSON_MODES[min(JSON_MODES.index(mode) + 1, len(JSON_MODES) - 1)]


def _with_format(body: JSONObject, mode: str, schema: JSONObject) -> JSONObject:
    """``body`` asking for ``mode``'s response format (as it is for "none")."""
    if mode == "none":
        return body
    fmt: JSONObject = {"type": "json_object"}
    if mode == "json_schema":
        fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": False}}
    return {**body, "response_format": fmt}


def _error_message(exc: object) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


def _load_prompt(value: str) -> str:
    path = Path(value)
    if "\n" not in value and path.suffix in (".txt", ".md", ".j2") and path.exists():
        return path.read_text(encoding="utf-8")
    return value


__all__ = ["FALLBACK_PROMPT", "LOGLIKELIHOOD_MODES", "OpenAILLM", "redact_url", "unsupported"]
