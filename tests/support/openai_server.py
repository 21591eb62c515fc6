"""A local OpenAI-compatible HTTP server for tests: deterministic, scriptable, with fault injection.

It is a real HTTP server (stdlib ``ThreadingHTTPServer`` in a background thread)
bound to 127.0.0.1 on a random port; it never contacts anything but loopback.

Endpoints::

    POST /v1/chat/completions   reply from ``responder`` (or a deterministic default)
    POST /v1/completions        same; with ``echo`` + ``logprobs`` it returns per-token
                                logprobs for prompt and continuation (vLLM style)
    POST /v1/embeddings         deterministic hash-based unit vectors of ``embedding_dim``
    GET  /v1/models             one model, ``test-model``

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

Shapes of a broken server the failure tests use: :func:`always` (every POST gets one
fault: ``always("500")``, ``always("401")``, ``always("malformed")`` for garbage,
``always("hang", hang_s=5)``), :func:`recovers_after` (the first N POSTs fail, then
every one succeeds), :func:`dead_base_url` (nothing listens: connection refused),
and assigning ``server.faults`` while it runs (a server that comes back).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS = ("429", "500", "hang", "malformed", "truncated")
EXTRA_KINDS = ("400", "401")  # permanent errors, only when asked for explicitly
MODEL_ID = "test-model"

Responder = Callable[[dict[str, Any]], "str | dict[str, Any]"]

_TOKEN_RE = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^\sA-Za-z0-9_]|\s+")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into tokens whose concatenation equals ``text`` (words and punctuation, with leading space)."""
    return _TOKEN_RE.findall(text)


def token_logprob(prev: str, tok: str) -> float:
    """A deterministic log-probability in (-6, -0.01] for ``tok`` following ``prev``."""
    digest = hashlib.sha256(f"{prev}\x00{tok}".encode()).digest()
    return -0.01 - (int.from_bytes(digest[:4], "big") % 5990) / 1000.0


def embed_text(text: str, dim: int) -> list[float]:
    """A deterministic L2-normalised vector for ``text`` (hash based)."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        digest = hashlib.sha256(f"{counter}\x00{text}".encode()).digest()
        for i in range(0, len(digest), 2):
            out.append(int.from_bytes(digest[i : i + 2], "big") / 65535.0 - 0.5)
        counter += 1
    vec = out[:dim]
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def default_reply(body: dict[str, Any]) -> str:
    """The default deterministic reply: a short sentence derived from the prompt."""
    text = _prompt_text(body)
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    words = text.split()
    tail = " ".join(words[-6:]) if words else ""
    return f"Answer {digest}: {tail}".strip()


def _prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        parts = []
        for m in body.get("messages") or []:
            content = m.get("content", "")
            if isinstance(content, list):  # content parts
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(f"{m.get('role', 'user')}: {content}")
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        return str(prompt[0]) if prompt else ""
    return str(prompt)


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


class OpenAIServer:
    """A deterministic OpenAI-compatible server on 127.0.0.1 (random port), in a background thread."""

    def __init__(
        self,
        responder: Responder | None = None,
        latency_s: float = 0.0,
        faults: Faults | dict[str, Any] | Sequence[str] | None = None,
        prompt_logprobs: bool = True,
        embedding_dim: int = 32,
        lifetime_s: float = 900.0,
        max_log: int = 100_000,
    ) -> None:
        self.responder = responder
        self.latency_s = latency_s
        self.faults = _as_faults(faults)
        self.prompt_logprobs = prompt_logprobs
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
        httpd = _Server(("127.0.0.1", 0), handler)
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

    def _reply_text(self, body: dict[str, Any]) -> str | dict[str, Any]:
        if self.responder is not None:
            return self.responder(body)
        return default_reply(body)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """Build a chat.completion response."""
        reply = self._reply_text(body)
        if isinstance(reply, dict):
            return reply
        text, finish = _limit(reply, body)
        prompt_toks = len(tokenize(_prompt_text(body)))
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
            "usage": _usage(prompt_toks, len(tokenize(text))),
        }

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        """Build a text_completion response: one choice per prompt (``prompt`` may be a list).

        With ``echo`` and ``logprobs`` (and ``prompt_logprobs=True``) the prompt is echoed with per-token
        logprobs (the first prompt token's is null, as in vLLM); the responder is not asked for echo requests.
        """
        prompts = body.get("prompt", "")
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
                text, finish = _limit(reply, one)
            p_toks, c_toks = tokenize(prompt), tokenize(text)
            n_prompt += len(p_toks)
            n_completion += len(c_toks)
            logprobs = _logprobs(p_toks, c_toks, echo) if body.get("logprobs") is not None else None
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
            "usage": _usage(n_prompt, n_completion),
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


def _logprobs(p_toks: list[str], c_toks: list[str], echo: bool) -> dict[str, Any]:
    """Legacy completions ``logprobs`` object for the (echoed) prompt and continuation tokens."""
    toks = (p_toks if echo else []) + c_toks
    context = ["", *p_toks, *c_toks] if echo else [(p_toks or [""])[-1], *c_toks]
    lps: list[float | None] = [token_logprob(p, t) for p, t in zip(context, toks, strict=False)]
    if echo and lps:
        lps[0] = None  # like vLLM/OpenAI: the first prompt token has no logprob
    offsets, pos = [], 0
    for t in toks:
        offsets.append(pos)
        pos += len(t)
    return {
        "tokens": toks,
        "token_logprobs": lps,
        "text_offset": offsets,
        "top_logprobs": [None if lp is None else {t: lp} for t, lp in zip(toks, lps, strict=True)],
    }


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _limit(text: str, body: dict[str, Any]) -> tuple[str, str]:
    """Apply ``stop`` and ``max_tokens`` to a reply; return (text, finish_reason)."""
    stop = body.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    for s in stop:
        if s and s in text:
            text = text[: text.index(s)]
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    toks = tokenize(text)
    if isinstance(max_tokens, int) and 0 < max_tokens < len(toks):
        return "".join(toks[:max_tokens]), "length"
    return text, "stop"


def _make_handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
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
            server._record(path, None, "authorization" in {k.lower() for k in self.headers})
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
                server._record(path, None, False)
                self._json(400, {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}})
                return
            auth = (self.headers.get("Authorization") or "").startswith("Bearer ")
            kind = server._record(path, body, auth)
            st = server._state
            with st.lock:
                st.in_flight += 1
                st.max_in_flight = max(st.max_in_flight, st.in_flight)
            try:
                self._answer(path, body, kind)
            finally:
                with st.lock:
                    st.in_flight -= 1

        def _answer(self, path: str, body: dict[str, Any], kind: str) -> None:
            if server.latency_s > 0:
                time.sleep(server.latency_s)
            if kind != "ok":
                self._fault(kind)
                return
            routes = {
                "/v1/chat/completions": server.chat,
                "/v1/completions": server.completion,
                "/v1/embeddings": server.embeddings,
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
            f = server.faults
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
                server._stopping.wait(f.hang_s)
                self.close_connection = True
            elif kind == "malformed":
                self._send(200, b'{"id": "x", "choices": [ {"text": oops')
            elif kind == "truncated":
                payload = b'{"id": "cmpl-trunc", "object": "text_completion", "choices": [{"index": 0, "te'
                self._send(200, payload, length=len(payload) + 200)
                self.close_connection = True

    return Handler


__all__ = [
    "EXTRA_KINDS",
    "FAULT_KINDS",
    "MODEL_ID",
    "Faults",
    "OpenAIServer",
    "always",
    "dead_base_url",
    "default_reply",
    "embed_text",
    "recovers_after",
    "token_logprob",
    "tokenize",
]
