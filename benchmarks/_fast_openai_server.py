"""A minimal, fast OpenAI-compatible server for client benchmarks (not for tests: no faults, no scripting).

It answers ``POST /v1/chat/completions`` and ``POST /v1/completions`` after a fixed
latency with a small valid response, and ``GET /stats`` with the number of POST
requests served. It is a raw asyncio protocol (uvloop when installed) with
HTTP/1.1 keep-alive and no per-request task: a response is written by a
``call_later`` timer, so 64 concurrent 50 ms "model calls" cost the server
almost nothing and the client under test is what the benchmark measures.

Run it in its own process (it prints ``PORT <n>`` on stdout when ready)::

    python benchmarks/_fast_openai_server.py --latency 0.05
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
_NOT_FOUND_BODY = b'{"error": {"message": "no route"}}'
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(_NOT_FOUND_BODY),
    _NOT_FOUND_BODY,
)
_BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _Stats:
    served = 0
    connections = 0


def _chat_body(n: int) -> bytes:
    return json.dumps(
        {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"Answer {n}: the benchmark reply."},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
        },
        separators=(",", ":"),
    ).encode()


def _completion_body(n: int) -> bytes:
    return json.dumps(
        {
            "id": f"cmpl-{n}",
            "object": "text_completion",
            "created": 1700000000,
            "model": "test-model",
            "choices": [{"index": 0, "text": f"Answer {n}.", "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        },
        separators=(",", ":"),
    ).encode()


class _Http(asyncio.Protocol):
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.buf = b""
        self.transport: Any = None  # uvloop's transports are not asyncio.Transport subclasses
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        _Stats.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        self._write(_BAD)
                        return
            if len(self.buf) < end + 4 + length:
                return  # wait for the rest of the body
            self.buf = self.buf[end + 4 + length :]
            self._route(head.split(b"\r\n", 1)[0])

    def _route(self, request_line: bytes) -> None:
        parts = request_line.split()
        method, path = (parts[0], parts[1].split(b"?")[0].rstrip(b"/")) if len(parts) >= 2 else (b"", b"")
        if method == b"POST" and path in (b"/v1/chat/completions", b"/v1/completions"):
            _Stats.served += 1
            body = (_chat_body if path.endswith(b"chat/completions") else _completion_body)(_Stats.served)
            payload = _OK % len(body) + body
            if self.latency > 0:
                self.loop.call_later(self.latency, self._write, payload)
            else:
                self._write(payload)
        elif method == b"GET" and path == b"/stats":
            body = json.dumps({"served": _Stats.served, "connections": _Stats.connections}).encode()
            self._write(_OK % len(body) + body)
        else:
            self._write(_NOT_FOUND)

    def _write(self, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(payload)


async def serve(latency: float, port: int = 0) -> None:
    """Serve until the process is killed; print ``PORT <n>`` once listening."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Http(latency), "127.0.0.1", port, backlog=1024)
    sock: Any = server.sockets[0]
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(serve(args.latency, args.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
