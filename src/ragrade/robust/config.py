"""The settings of ``ragrade robust run`` (CLI flags and config files fill them).

:class:`RobustSettings` are how the testbeds are run, shared by ``robust run`` (:class:`RobustRunConfig`,
which adds the data, the testbed, the LLMs, the output folder and how the LLMs are reached) and by the
``[robust]`` table of a ``ragrade run`` job config: a key means the same in both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragrade.llm.options import LLMOptions, lift_flat_options


class RobustSettings(BaseModel):
    """How testbeds are run: documents per question, noise ratios, scoring, prompts, the question cap."""

    model_config = ConfigDict(extra="forbid")

    noise_ratios: list[float] | None = None  # None: the testbed's own ratios
    docs: int = 5
    lang: Literal["auto", "en", "zh"] = "auto"
    scoring: Literal["default", "rgb"] = "default"
    construction: Literal["ragrade", "rgb"] = "ragrade"
    # None: "fewer" for testbeds built from a corpus (`robust build`, whose questions often have fewer supporting
    # passages than docs), "pad" for other data (see ragrade.robust.run.resolve_shortfall)
    shortfall: Literal["pad", "skip", "fewer"] | None = None
    seed: int = 0
    correct_ratio: float = 0.0
    min_positives: int = 0  # questions with fewer supporting passages are left out (0: keep all)
    closed_book: bool = True
    judge: str | None = None
    judge_base_url: str | None = None
    prompts: Path | None = None
    rejection_phrases: list[str] | None = None
    error_phrases: list[str] | None = None
    max_tokens: int = 256
    temperature: float = Field(
        default=0.0, description="sampling temperature of the answering LLMs (the judge always asks at 0)"
    )
    limit: int | None = None  # the first questions of the data at most (None: all)
    batch_size: int = Field(
        default=32,
        description="requests sent together to an answering LLM or the judge; each finished batch is saved, so a "
        "rerun keeps it",
    )


class RobustRunConfig(RobustSettings):
    """Everything ``ragrade robust run`` needs (CLI flags and config files fill it)."""

    data: Path
    testbed: str
    llm: list[str]
    out: Path
    # how the LLMs are reached (the judge's too, at judge_base_url when given); `ragrade --dry-run` sets dry_run
    llm_options: LLMOptions = Field(default_factory=LLMOptions)

    @model_validator(mode="before")
    @classmethod
    def _old_spellings(cls, data: object) -> object:
        return lift_flat_options(data, "[robust]")


__all__ = ["RobustRunConfig", "RobustSettings"]
