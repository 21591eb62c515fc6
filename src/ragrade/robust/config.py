"""The settings of ``ragrade robust run`` (CLI flags and config files fill them)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict


class RobustRunConfig(BaseModel):
    """Everything ``ragrade robust run`` needs (CLI flags and config files fill it)."""

    model_config = ConfigDict(extra="forbid")

    data: Path
    testbed: str
    llm: list[str]
    out: Path
    base_url: str | None = None
    noise_ratios: list[float] | None = None
    docs: int = 5
    lang: Literal["auto", "en", "zh"] = "auto"
    scoring: Literal["default", "rgb"] = "default"
    construction: Literal["ragrade", "rgb"] = "ragrade"
    shortfall: Literal["pad", "skip"] = "pad"
    seed: int = 0
    correct_ratio: float = 0.0
    min_positives: int = 0
    closed_book: bool = True
    judge: str | None = None
    judge_base_url: str | None = None
    prompts: Path | None = None
    rejection_phrases: list[str] | None = None
    error_phrases: list[str] | None = None
    max_tokens: int = 256
    temperature: float = 0.0
    limit: int | None = None
    batch_size: int = 32
    concurrency: int = 16
    cache: bool = True
    timeout: float = 60.0
    max_retries: int = 5
    dry_run: bool = False  # count the requests, send none (`ragrade --dry-run robust run`)


__all__ = ["RobustRunConfig"]
