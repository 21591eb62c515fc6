"""The defaults of the request limits, in one place: the field defaults of :class:`~ragrade.llm.options.LLMOptions`
(what users see and set) and of :class:`~ragrade.llm.limits.LimitConfig` (what the limiter enforces) read them here,
so that neither module imports the other at load time."""

from __future__ import annotations

CONCURRENCY = 16  # requests in flight at most (the ceiling of the adaptive cap)
TIMEOUT = 60.0  # seconds per attempt; left at this default, learned from the replies
RETRIES = 5  # retries of a failed request
BACKOFF_S = 0.5  # first backoff delay before a retry (doubling, jittered)
#: the most retries of one request (``max_retries``, ``--max-retries``); every retry is one more attempt of up to
#: ``timeout`` seconds after a backoff of up to 30 s, so a larger number is a typo (``1e9`` would wait for ever)
MAX_RETRIES = 100

__all__ = ["BACKOFF_S", "CONCURRENCY", "MAX_RETRIES", "RETRIES", "TIMEOUT"]
