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

    def row_columns(self) -> dict[str, object]:
        """The columns an answer row starts with: why these passages are missing or fell back, and the cost of a
        question not asked yet (an exam's and a QA run's rows alike)."""
        return {"error": self.error, "transform_error": self.transform_error, "latency_s": 0.0, "prompt_tokens": 0,
                "completion_tokens": 0, "cached": False}  # fmt: skip


__all__ = ["Contexts"]
