"""The passages a pipeline found for one question: what the workers and the shared-retrieval files carry."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragrade.run.external import ExternalResult


@dataclass
class Contexts:
    """Passages for one question under one pipeline (or why there are none)."""

    passages: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    error: str | None = None
    external: ExternalResult | None = None
    transform_error: str | None = None  # a query rewrite or post-processing step that failed and fell back


__all__ = ["Contexts"]
