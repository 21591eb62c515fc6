"""Whether a server's address takes a TCP connection: the cheap check before the first request.

A server that is down (nothing listens, the host does not resolve, a firewall drops the connection) is
found in milliseconds by opening a TCP connection to its host and port and closing it at once: nothing is
sent, so no request is counted or cached. ``ragrade ask`` checks its LLM server this way before the first
question (a request to a server that is down was retried for 15-35 s), and an ``--external`` system's URL
is checked before the run folder is created (:mod:`ragrade.run.external`). A server that takes the
connection but fails its requests is left to the request rules (:mod:`ragrade.llm.limits`).
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

#: seconds to wait for the connection (a server that is up answers a connect in milliseconds)
CONNECT_TIMEOUT_S = 5.0


def unreachable(url: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why ``url``'s host and port take no TCP connection (``"connection refused"``), or None when they do, or
    when the URL names no host to try (its own parser reports that)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return None
    except TimeoutError:
        return f"no connection within {timeout:g} s"
    except OSError as exc:
        return (exc.strerror or str(exc) or type(exc).__name__).lower()


__all__ = ["CONNECT_TIMEOUT_S", "unreachable"]
