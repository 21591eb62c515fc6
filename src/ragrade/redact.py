"""Credentials out of every file written and every line shown: URL user info and secret-looking query parameters.

``http://user:PASS@host/v1?api_key=K&x=1`` becomes ``http://***@host/v1?api_key=***&x=1``. Manifests, JSON
sidecars, error messages of failed requests and the CLI's error line pass through :func:`redact`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/@\s\"'<>]+)@")
_SECRET_PARAM = re.compile(
    r"(?P<key>[?&;](?:[a-z0-9_.-]*(?:api[_-]?key|apikey|token|secret|password|passwd|pwd|signature|sig|auth"
    r"|credential|session)[a-z0-9_.-]*|key|code)=)(?P<value>[^&#;\s\"'<>]*)",
    re.IGNORECASE,
)


def redact_text(text: str) -> str:
    """``text`` with URL user info and secret-looking query parameter values masked."""
    if "://" not in text and "=" not in text:
        return text
    out = _USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
    return _SECRET_PARAM.sub(lambda m: f"{m.group('key')}{MASK}" if m.group("value") else m.group(0), out)


def redact(obj: Any) -> Any:
    """A copy of ``obj`` (JSON-like) with :func:`redact_text` applied to every string, keys included."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, Mapping):
        return {redact(k) if isinstance(k, str) else k: redact(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    return obj


__all__ = ["MASK", "redact", "redact_text"]
