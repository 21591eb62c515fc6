"""A local OpenAI-compatible HTTP server for tests: deterministic, scriptable, with fault injection.

It is a real HTTP server (stdlib ``ThreadingHTTPServer`` in a background thread)
bound to 127.0.0.1 on a random port; it never contacts anything but loopback.

Endpoints::

    POST /v1/chat/completions   reply from ``responder`` (or a deterministic default)
    POST /v1/completions        same; with ``echo`` + ``logprobs`` it returns per-token
                                logprobs for prompt and continuation (vLLM style)
    POST /v1/embeddings         deterministic hash-based unit vectors of ``embedding_dim``
    GET  /v1/models             one model, ``test-model``
    GET  /props, /slots         llama.cpp's slot endpoints, with ``slots=N, advertise_slots=True``
                                (404 otherwise); counted in ``probes``, not in ``requests_total``

Usage::

    with OpenAIServer(responder=lambda body: "Paris") as srv:
        llm = create_llm("openai/test-model", base_url=srv.base_url, api_key="sk-test")
        ...
        assert srv.requests_total == 1

Faults (``faults=``) are injected either by rate (seeded, decided from a hash of
the request body and how often that body was seen, so that the decision does not
depend on thread scheduling) or by a per-request script (the n-th request that
reaches a POST endpoint gets the n-th entry). Kinds: ``"429"`` (with
``Retry-After``), ``"500"``, ``"hang"`` (no answer for ``hang_s`` or until the
server stops), ``"malformed"`` (HTTP 200 with invalid JSON), ``"truncated"``
(Content-Length larger than the body, then the connection closes), ``"ok"``;
``"400"`` and ``"401"`` (the key rejected) only when asked for explicitly.

Shapes of real servers: ``slots=1`` handles one POST at a time (each after ``latency_s``, or a
time drawn per request from a ``(low, high)`` range; a request whose client hung up while queued
is dropped, as llama.cpp does; one whose client hung up while it ran is counted in ``abandoned``:
work thrown away), :func:`throttled` is that on a slow CPU without advertised slots, and
``reject=("prompt-list", "json_schema", "json_object")`` answers HTTP ``reject_status``
(default 500) to a list of text prompts on ``/v1/completions`` or to that
``response_format`` (what llama-cpp-python's server does). Like llama.cpp's server,
``POST /tokenize`` gives ids of the word tokens, and a prompt of token ids gets one token,
the one ``logit_bias`` forces (not with ``logit_bias=False``), with its log-probability.

Shapes of a broken server the failure tests use: :func:`always` (every POST gets one
fault: ``always("500")``, ``always("401")``, ``always("malformed")`` for garbage,
``always("hang", hang_s=5)``), :func:`recovers_after` (the first N POSTs fail, then
every one succeeds), :func:`dead_base_url` (nothing listens: connection refused),
and assigning ``server.faults`` while it runs (a server that comes back).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.openai_replies import (
    Vocab,
    default_reply,
    embed_text,
    limit,
    logprobs_object,
    prompt_text,
    token_logprob,
    tokenize,
    usage,
)

FAULT_KINDS = ("429", "500", "hang", "malformed", "truncated")
REJECT_KINDS = ("prompt-list", "json_schema", "json_object")
PROBE_PATHS = ("/props", "/slots")
EXTRA_KINDS = ("400", "401")  # permanent errors, only when asked for explicitly
MODEL_ID = "test-model"

Responder = Callable[[dict[str, Any]], "str | dict[str, Any]"]


@dataclass
class Faults:
    """Fault-injection plan.

    ``rate``: probability of a fault on each POST request (kinds drawn uniformly
    from ``kinds``), seeded by ``seed``; ``script``: explicit kinds for the first
    requests in arrival order (then ``"ok"``), overriding ``rate`` for those;
    ``paths``: only inject on these paths (default: every POST endpoint).
    """

    rate: float = 0.0
    kinds: Sequence[str] = FAULT_KINDS
    seed: int = 0
    script: Sequence[str] | None = None
    retry_after_s: float = 0.05
    hang_s: float = 30.0
    paths: Sequence[str] | None = None

    def __post_init__(self) -> None:
        for kind in list(self.kinds) + list(self.script or []):
            if kind not in (*FAULT_KINDS, *EXTRA_KINDS, "ok"):
                valid = ", ".join((*FAULT_KINDS, *EXTRA_KINDS, "ok"))
                raise ValueError(f"unknown fault kind {kind!r}; valid: {valid}")


def always(kind: str, **kw: Any) -> Faults:
    """Every POST request gets the fault ``kind``."""
    return Faults(rate=1.0, kinds=[kind], **kw)


def recovers_after(n: int, kind: str = "500", **kw: Any) -> Faults:
    """The first ``n`` POST requests get the fault ``kind``, every later one succeeds."""
    return Faults(script=[kind] * n, **kw)


def dead_base_url() -> str:
    """The base URL of a loopback port nothing listens on (connections are refused)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _as_faults(faults: Faults | dict[str, Any] | Sequence[str] | None) -> Faults:
    if faults is None:
        return Faults()
    if isinstance(faults, Faults):
        return faults
    if isinstance(faults, dict):
        return Faults(**faults)
    return Faults(script=list(faults))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # listen() backlog: many clients connect at once
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):  # clients that time out hang up; not an error
            return
        super().handle_error(request, client_address)


@dataclass
class _State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests_total: int = 0
    requests_by_path: Counter[str] = field(default_factory=Counter)
    faults_injected: Counter[str] = field(default_factory=Counter)
    log: list[dict[str, Any]] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)
    post_index: int = 0
    auth_headers: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    probes: Counter[str] = field(default_factory=Counter)
    dropped: int = 0
    abandoned: int = 0
    draws: int = 0


class OpenAIServer:
    """A deterministic OpenAI-compatible server on 127.0.0.1 (random port), in a background thread."""

    def __init__(
        self,
        responder: Responder | None = None,
        latency_s: float | tuple[float, float] = 0.0,
        faults: Faults | dict[str, Any] | Sequence[str] | None = None,
        prompt_logprobs: bool = True,
        embedding_dim: int = 32,
        lifetime_s: float = 900.0,
        max_log: int = 100_000,
        slots: int | None = None,
        advertise_slots: bool = False,
        reject: Sequence[str] = (),
        reject_status: int = 500,
        logit_bias: bool = True,
        port: int = 0,
    ) -> None:
        unknown = set(reject) - set(REJECT_KINDS)
        if unknown:
            raise ValueError(f"unknown reject kinds {sorted(unknown)}; valid: {', '.join(REJECT_KINDS)}")
        self._port = port  # 0: a free one; a given one serves a "restarted" server at the address it had
        self.slots, self.advertise_slots = slots, advertise_slots
        self.reject, self.reject_status = tuple(reject), reject_status
        self._slot = threading.Semaphore(slots) if slots else None
        self.responder = responder
        self.latency_s = latency_s
        self.faults = _as_faults(faults)
        self.prompt_logprobs = prompt_logprobs
        self.vocab, self.logit_bias = Vocab(), logit_bias
        self.embedding_dim = embedding_dim
        self.lifetime_s = lifetime_s
        self.max_log = max_log
        self._state = _State()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> OpenAIServer:
        """Bind to a free loopback port and serve in a daemon thread; stops by itself after ``lifetime_s``."""
        handler = _make_handler(self)
        httpd = _Server(("127.0.0.1", self._port), handler)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving (hanging handlers are released) and close the socket."""
        self._stopping.set()
        if self._timer is not None:
            self._timer.cancel()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- introspection -----------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests_total(self) -> int:
        """Every request received (all paths, faults included)."""
        return self._state.requests_total

    @property
    def requests_by_path(self) -> Counter[str]:
        """Requests received per path, e.g. ``{"/v1/chat/completions": 3}``."""
        return self._state.requests_by_path

    @property
    def faults_injected(self) -> Counter[str]:
        """Injected faults per kind."""
        return self._state.faults_injected

    @property
    def log(self) -> list[dict[str, Any]]:
        """Parsed JSON bodies received (POST requests), in arrival order."""
        return self._state.log

    @property
    def max_in_flight(self) -> int:
        """The largest number of POST requests handled at the same time."""
        return self._state.max_in_flight

    @property
    def probes(self) -> Counter[str]:
        """GET requests to llama.cpp's slot endpoints (``/props``, ``/slots``), per path."""
        return self._state.probes

    @property
    def dropped(self) -> int:
        """Requests of a ``slots`` server dropped because their client hung up while they waited."""
        return self._state.dropped

    @property
    def abandoned(self) -> int:
        """Requests that ran to the end after their client had hung up (the server's work thrown away)."""
        return self._state.abandoned

    def _delay(self) -> float:
        """Seconds the next request takes: ``latency_s``, or drawn from its ``(low, high)`` range (seeded)."""
        if not isinstance(self.latency_s, tuple):
            return self.latency_s
        with self._state.lock:
            self._state.draws += 1
            n = self._state.draws
        u = int.from_bytes(hashlib.sha256(f"latency\x00{n}".encode()).digest()[:8], "big") / 2**64
        low, high = self.latency_s
        return low + (high - low) * u

    @property
    def auth_headers_seen(self) -> int:
        """How many requests carried an ``Authorization: Bearer`` header (the key itself is not kept)."""
        return self._state.auth_headers

    def reset_counters(self) -> None:
        """Zero the counters and the log (the fault script position is kept)."""
        with self._state.lock:
            self._state.requests_total = 0
            self._state.requests_by_path.clear()
            self._state.faults_injected.clear()
            self._state.log.clear()

    # -- behaviour ---------------------------------------------------------------------------
    def _record(self, path: str, body: dict[str, Any] | None, has_auth: bool) -> str:
        """Count the request and decide its fault kind ("ok" for none)."""
        st = self._state
        with st.lock:
            st.requests_total += 1
            st.requests_by_path[path] += 1
            st.auth_headers += int(has_auth)
            if body is None:
                return "ok"
            if len(st.log) < self.max_log:
                st.log.append(body)
            f = self.faults
            if f.paths is not None and path not in f.paths:
                return "ok"
            index = st.post_index
            st.post_index += 1
            if f.script is not None and index < len(f.script):
                kind = f.script[index]
            elif f.rate > 0:
                key = json.dumps(body, sort_keys=True)
                nth = st.seen[key]
                st.seen[key] += 1
                digest = hashlib.sha256(f"{f.seed}\x00{nth}\x00{key}".encode()).digest()
                u = int.from_bytes(digest[:8], "big") / 2**64
                kinds = list(f.kinds)
                kind = kinds[int.from_bytes(digest[8:12], "big") % len(kinds)] if u < f.rate and kinds else "ok"
            else:
                kind = "ok"
            if kind != "ok":
                st.faults_injected[kind] += 1
            return kind

    def _rejects(self, path: str, body: dict[str, Any]) -> str | None:
        """The ``reject`` kind that ``body`` sent to ``path`` falls under, if any."""
        prompt = body.get("prompt")
        text_list = isinstance(prompt, list) and any(isinstance(p, str) for p in prompt)
        if "prompt-list" in self.reject and path == "/v1/completions" and text_list:
            return "prompt-list"
        fmt = body.get("response_format")
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        return kind if kind in self.reject else None

    def _props(self, path: str) -> Any:
        """The reply of a slot endpoint, or None (404) when slots are not advertised."""
        if not (self.slots and self.advertise_slots):
            return None
        if path == "/props":
            return {"total_slots": self.slots, "default_generation_settings": {"n_ctx": 4096}}
        return [{"id": i, "n_ctx": 4096, "is_processing": False} for i in range(self.slots)]

    def _reply_text(self, body: dict[str, Any]) -> str | dict[str, Any]:
        if self.responder is not None:
            return self.responder(body)
        return default_reply(body)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """Build a chat.completion response."""
        reply = self._reply_text(body)
        if isinstance(reply, dict):
            return reply
        text, finish = limit(reply, body)
        prompt_toks = len(tokenize(prompt_text(body)))
        return {
            "id": "chatcmpl-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", MODEL_ID),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                    "logprobs": None,
                }
            ],
            "usage": usage(prompt_toks, len(tokenize(text))),
        }

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """Build a text_completion response: one choice per prompt (``prompt`` may be a list).

        With ``echo`` and ``logprobs`` (and ``prompt_logprobs=True``) the prompt is echoed with per-token
        logprobs (the first prompt token's is null, as in vLLM); the responder is not asked for echo requests.
        """
        prompts = body.get("prompt", "")
        if isinstance(prompts, list) and prompts and all(isinstance(p, int) for p in prompts):  # token ids
            choice = self.vocab.forced_choice(prompts, body.get("logit_bias") or {}, self.logit_bias)
            return {"object": "text_completion", "choices": [choice], "usage": usage(len(prompts), 1)}
        prompts = [str(p) for p in prompts] if isinstance(prompts, list) else [str(prompts)]
        echo = bool(body.get("echo")) and self.prompt_logprobs
        choices, n_prompt, n_completion = [], 0, 0
        for index, prompt in enumerate(prompts):
            one = {**body, "prompt": prompt}
            if body.get("max_tokens", 16) == 0:
                text, finish = "", "length"
            else:
                reply = default_reply(one) if body.get("echo") else self._reply_text(one)
                if isinstance(reply, dict):
                    return reply
                text, finish = limit(reply, one)
            p_toks, c_toks = tokenize(prompt), tokenize(text)
            n_prompt += len(p_toks)
            n_completion += len(c_toks)
            logprobs = logprobs_object(p_toks, c_toks, echo) if body.get("logprobs") is not None else None
            choices.append(
                {
                    "index": index,
                    "text": (prompt + text) if echo else text,
                    "finish_reason": finish,
                    "logprobs": logprobs,
                }
            )
        return {
            "id": "cmpl-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12],
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.get("model", MODEL_ID),
            "choices": choices,
            "usage": usage(n_prompt, n_completion),
        }

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        """Build an embeddings response."""
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        data = [
            {"object": "embedding", "index": i, "embedding": embed_text(str(t), self.embedding_dim)}
            for i, t in enumerate(inputs)
        ]
        n = sum(len(tokenize(str(t))) for t in inputs)
        return {
            "object": "list",
            "data": data,
            "model": body.get("model", MODEL_ID),
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }


class _Handler(BaseHTTPRequestHandler):
    """The request handler of one :class:`OpenAIServer` (``srv``, set per server by :func:`_make_handler`)."""

    srv: OpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        return

    def _send(
        self, status: int, payload: bytes, headers: dict[str, str] | None = None, length: int | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload) if length is None else length))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path in PROBE_PATHS:
            with self.srv._state.lock:
                self.srv._state.probes[path] += 1
            props = self.srv._props(path)
            if props is not None:
                self._json(200, props)
            else:
                self._json(404, {"error": {"message": "File Not Found", "type": "not_found_error"}})
            return
        self.srv._record(path, None, "authorization" in {k.lower() for k in self.headers})
        if path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "test"}]})
        else:
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self.srv._record(path, None, False)
            self._json(400, {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}})
            return
        auth = (self.headers.get("Authorization") or "").startswith("Bearer ")
        kind = self.srv._record(path, body, auth)
        st = self.srv._state
        with st.lock:
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
        try:
            if self.srv._slot is None:
                self._answer(path, body, kind)
            else:
                with self.srv._slot:  # one request per slot, the others queue
                    if self._hung_up():
                        with st.lock:
                            st.dropped += 1
                        self.close_connection = True
                    else:
                        self._answer(path, body, kind)
        finally:
            with st.lock:
                st.in_flight -= 1

    def _hung_up(self) -> bool:
        """True when the client closed the connection (it timed out while the request queued)."""
        import select
        import socket

        readable, _, _ = select.select([self.connection], [], [], 0)
        return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""

    def _answer(self, path: str, body: dict[str, Any], kind: str) -> None:
        delay = self.srv._delay()
        if delay > 0:
            time.sleep(delay)
            if self._hung_up():  # the client gave up while this ran: the work is thrown away
                with self.srv._state.lock:
                    self.srv._state.abandoned += 1
        if kind != "ok":
            self._fault(kind)
            return
        rejected = self.srv._rejects(path, body)
        if rejected is not None:
            error = {"message": f"cannot handle {rejected}", "type": "server_error"}
            self._json(self.srv.reject_status, {"error": error})
            return
        routes: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "/v1/chat/completions": self.srv.chat,
            "/v1/completions": self.srv.completion,
            "/v1/embeddings": self.srv.embeddings,
            "/tokenize": lambda b: {"tokens": self.srv.vocab.encode(str(b["content"]), bool(b.get("add_special")))},
        }
        fn = routes.get(path)
        if fn is None:
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        try:
            self._json(200, fn(body))
        except Exception as exc:  # a responder bug shows as a 500 with its message
            self._json(500, {"error": {"message": f"responder failed: {exc}", "type": "server_error"}})

    def _fault(self, kind: str) -> None:
        f = self.srv.faults
        if kind == "429":
            self._json(
                429,
                {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                {"Retry-After": f"{f.retry_after_s:g}"},
            )
        elif kind == "400":
            self._json(400, {"error": {"message": "injected bad request", "type": "invalid_request_error"}})
        elif kind == "401":
            auth = self.headers.get("Authorization") or ""
            # like some proxies, echo the credential back: clients must not log it
            self._json(401, {"error": {"message": f"invalid credential {auth[7:]}", "type": "auth_error"}})
        elif kind == "500":
            self._json(500, {"error": {"message": "injected server error", "type": "server_error"}})
        elif kind == "hang":
            self.srv._stopping.wait(f.hang_s)
            self.close_connection = True
        elif kind == "malformed":
            self._send(200, b'{"id": "x", "choices": [ {"text": oops')
        elif kind == "truncated":
            payload = b'{"id": "cmpl-trunc", "object": "text_completion", "choices": [{"index": 0, "te'
            self._send(200, payload, length=len(payload) + 200)
            self.close_connection = True


def _make_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"srv": server})


def throttled(latency_s: float | tuple[float, float] = (5.0, 50.0), **kw: Any) -> OpenAIServer:
    """llama-cpp-python's server on a slow CPU: one request at a time, each taking ``latency_s`` (a range: drawn
    per request), and no slots advertised (404 on ``/props`` and ``/slots``)."""
    return OpenAIServer(latency_s=latency_s, slots=1, advertise_slots=False, **kw)


__all__ = [
    "EXTRA_KINDS",
    "FAULT_KINDS",
    "MODEL_ID",
    "REJECT_KINDS",
    "Faults",
    "OpenAIServer",
    "always",
    "dead_base_url",
    "default_reply",
    "embed_text",
    "recovers_after",
    "throttled",
    "token_logprob",
    "tokenize",
]
