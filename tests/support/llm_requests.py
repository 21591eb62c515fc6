"""Typed keyword arguments of the LLM requests that tests build with a short helper (``chat(text, **kw)``)."""

from __future__ import annotations

from typing import Any, TypedDict


class GenerationKw(TypedDict, total=False):
    """The optional fields of :class:`ragrade.llm.GenerationRequest` (besides ``messages`` / ``prompt``)."""

    temperature: float
    max_tokens: int
    stop: tuple[str, ...]
    seed: int | None
    json_schema: dict[str, Any] | None  # the request's own type
    question: str | None
    passages: tuple[str, ...]
    choices: tuple[str, ...]
    task: str | None
