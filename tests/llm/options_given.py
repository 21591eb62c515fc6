"""Keyword arguments of LLMOptions from a test helper's optional settings (None: leave the option at its default)."""

from __future__ import annotations

from typing import Any


def given(max_retries: int | None, backoff_s: float | None, timeout: float | None) -> dict[str, Any]:
    """The limits a test set, without the ones it left at None."""
    out = {"max_retries": max_retries, "backoff_s": backoff_s, "timeout": timeout}
    return {k: v for k, v in out.items() if v is not None}
