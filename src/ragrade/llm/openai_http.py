"""A direct aiohttp client for OpenAI-compatible servers: the requests the SDK sends, without its request models.

The official SDK builds every request as typed options, an ``httpx`` request and headers, then hands
it to its aiohttp adapter, which converts it again; at tens of requests in flight on one event loop
that costs about three times the CPU of the HTTP exchange itself, and the client, not the server,
sets the pace (``benchmarks/bench_llm_client.py`` measures it). :class:`DirectClient` sends the same
request (URL joined to the base URL as the SDK does, its default query, ``Authorization: Bearer``,
``OpenAI-Organization`` / ``OpenAI-Project`` from the environment, the SDK's connect and read
timeouts) straight through one pooled ``aiohttp`` session and maps failures as
:meth:`ragrade.llm.openai.OpenAILLM._call` maps the SDK's exceptions:

* HTTP 429, 5xx, 408, 409: :class:`~ragrade.llm.limits.TransientError` (with ``Retry-After``);
* HTTP 401/403: :class:`~ragrade.llm.limits.AuthError`; other 4xx: :class:`~ragrade.llm.limits.PermanentError`;
  the message is the server's ``error.message`` (else ``Error code: N``), as the SDK words it;
* no answer within the timeout: a transient timeout (a congestion signal for the adaptive cap);
* connection failures (refused, reset, a truncated body): a transient ``connection error``.

The API key is only ever sent in the ``Authorization`` header and scrubbed from every message.
"""

from __future__ import annotations

import email.utils
import functools
import json
import os
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ragrade._version import __version__
from ragrade.llm.limits import AuthError, PermanentError, TransientError

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's default


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked to wait (``retry-after-ms`` or ``retry-after``, seconds or an HTTP date)."""
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


def scrub(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` replaced by ``***``."""
    return text.replace(secret, "***") if secret else text


def status_message(status: int, content: bytes) -> str:
    """An error answer's ``error.message`` (or ``message``), else ``Error code: N``, as the SDK reads it."""
    msg = f"Error code: {status}"
    try:
        body = json.loads(content.decode("utf-8", "replace").strip())
    except ValueError:
        return msg
    data = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    message = data.get("message") if isinstance(data, dict) else None
    return (msg + f" - {message}" if isinstance(message, str) and message else msg)[:300]


def status_error(status: int, content: bytes, headers: object, secret: str | None) -> Exception:
    """The error an HTTP ``status`` answer is (transient, auth or permanent), with the server's message."""
    msg = scrub(f"HTTP {status}: {status_message(status, content)}", secret)
    if status == 429 or status >= 500 or status in (408, 409):
        return TransientError(msg, retry_after(headers), status=status)
    if status in (401, 403):
        return AuthError(msg, status)
    return PermanentError(msg, status)


def join_url(base: str, path: str, query: dict[str, str]) -> str:
    """``path`` under ``base`` (a full URL stays as it is), with the default ``query``, as the SDK joins them."""
    url = path if path.startswith(("http://", "https://")) else base.rstrip("/") + "/" + path.lstrip("/")
    if query:
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode(query)
    return url


def _ssl_context(url: str) -> Any:
    """The certificate store the SDK's client uses (certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``) for https."""
    if not url.startswith("https://"):
        return True  # aiohttp's default; unused for plain http
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if not cafile and not capath:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:
            return True
    return _context(cafile, capath)


@functools.lru_cache(maxsize=4)
def _context(cafile: str | None, capath: str | None) -> object:
    """One SSL context per certificate store, shared by every session (loading the store takes ~20 ms)."""
    import ssl

    return ssl.create_default_context(cafile=cafile, capath=capath)


class DirectClient:
    """One event loop's pooled aiohttp session speaking the OpenAI HTTP API (see module docstring)."""

    def __init__(
        self, base_url: str | None, api_key: str, query: dict[str, str], concurrency: int, timeout: float
    ) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        self.base = base_url or DEFAULT_BASE_URL
        self.query = dict(query)
        self.timeout = timeout
        self._secret = api_key
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"ragrade/{__version__} aiohttp/{aiohttp.__version__}",
        }
        for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(env):
                self.headers[header] = os.environ[env]
        self._urls: dict[str, str] = {}
        self._client_timeout = self._timeout(timeout)
        connector = aiohttp.TCPConnector(limit=concurrency + 8, keepalive_timeout=5.0, ssl=_ssl_context(self.base))
        # the headers are the session's defaults: aiohttp copies them per request without merging
        self.session = aiohttp.ClientSession(connector=connector, timeout=self._client_timeout, headers=self.headers)

    def _timeout(self, seconds: float) -> object:
        # the SDK's timeout: for the connection (pool wait included) and between reads, not for the whole reply
        return self._aiohttp.ClientTimeout(total=None, connect=seconds, sock_connect=seconds, sock_read=seconds)

    def _url(self, path: str) -> str:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = join_url(self.base, path, self.query)
        return url

    async def post(self, path: str, body: Mapping[str, object], timeout: float | None = None) -> bytes:
        """POST ``body`` as JSON to ``path``; the reply's bytes (2xx), else the mapped error is raised.

        ``timeout``: seconds for this request instead of the session's (a timeout learned from the replies).
        """
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        limit = self._client_timeout if timeout is None or timeout == self.timeout else self._timeout(timeout)
        return await self._send("POST", self._url(path), payload, limit)

    async def get(self, url: str, timeout: float) -> bytes:
        """GET ``url`` (or a path under the base URL) with ``timeout``; the reply's bytes or a mapped error."""
        return await self._send("GET", self._url(url), None, self._timeout(timeout))

    async def _send(self, method: str, url: str, payload: bytes | None, timeout: Any) -> bytes:
        aiohttp = self._aiohttp
        try:
            async with self.session.request(method, url, data=payload, timeout=timeout) as resp:
                content = await resp.read()
                if 200 <= resp.status < 300:
                    return content
                raise status_error(resp.status, content, resp.headers, self._secret)
        except TimeoutError as exc:  # aiohttp's connect and read timeouts
            raise TransientError(f"timed out after {timeout.sock_read:g}s", timeout=True) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise TransientError(scrub(f"connection error: {type(exc).__name__}: {exc}", self._secret)) from exc

    async def close(self) -> None:
        """Close the session and its pooled connections."""
        await self.session.close()


__all__ = ["DEFAULT_BASE_URL", "DirectClient", "join_url", "retry_after", "scrub", "status_error", "status_message"]
