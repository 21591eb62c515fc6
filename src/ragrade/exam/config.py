"""Configuration of exam generation (merged defaults < file ``[exam]`` table < CLI flags)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class FilterConfig(BaseModel):
    """Thresholds of one similarity filter.

    ``quantile``: thresholds are set on the candidate pool so that about
    ``share`` of the questions reaching the filter are removed (as in the
    method's paper). ``fixed``: the given ``jaccard``/``cosine`` thresholds are
    used as they are (a missing one disables that metric). ``off``: the filter
    removes nothing. The chosen thresholds are recorded in the funnel.
    """

    model_config = ConfigDict(extra="forbid")

    mode: Literal["quantile", "fixed", "off"] = Field(
        default="quantile",
        description="how the thresholds are set: quantile (from the scores, to remove about share of the questions "
        "reaching the filter), fixed (jaccard and cosine as given), off (removes nothing; near_duplicate still "
        "removes exact repeats)",
    )
    share: float = Field(
        default=0.05,
        ge=0.0,
        le=0.5,
        description="quantile mode: about this share of the questions reaching the filter is removed",
    )
    jaccard: float | None = Field(
        default=None,
        description="fixed mode: a question whose word-Jaccard score is above this is removed (None: no Jaccard "
        "check; near_duplicate has no Jaccard score)",
    )
    cosine: float | None = Field(
        default=None,
        description="fixed mode: a question whose embedding-cosine score is above this is removed (None: no cosine "
        "check)",
    )


class ExamConfig(BaseModel):
    """Everything that shapes a generated exam; recorded in the exam header."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(default=100, ge=1, description="questions wanted in the exam")
    seed: int = 0
    topic_field: str | None = Field(default=None, description="stratify sampling by this chunk metadata field")
    oversample: float = Field(
        default=1.3, ge=1.0, le=10.0, description="chunks asked per wanted question in the first round"
    )
    max_rounds: int = Field(
        default=3, ge=1, le=10, description="LLM generation rounds to top up a short exam (offline: no limit)"
    )
    max_requests: int | None = Field(
        default=None,
        ge=1,
        description="LLM requests at most in all rounds (None: n x oversample x max_rounds); the offline "
        "generator may ask every eligible chunk",
    )
    min_chunk_chars: int = Field(default=200, ge=0, description="chunks shorter than this are not asked about")
    min_question_chars: int = Field(
        default=20, ge=1, description="questions shorter than this many characters are rejected (question_too_short)"
    )
    # LLM generator
    prompt_file: str | None = Field(
        default=None,
        description="LLM generator: a file with the user prompt template, holding {document} ({domain} and "
        "{title} optional); None: the built-in prompt",
    )
    system_prompt_file: str | None = Field(
        default=None,
        description="LLM generator: a file with the system prompt template (placeholders {document}, {domain}, "
        "{title} optional); None: the built-in one",
    )
    domain: str | None = Field(default=None, description="a few words naming the corpus, used in the prompt")
    temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    max_tokens: int = Field(default=400, ge=64, description="reply budget: a question, four choices and a letter")
    json_output: bool = Field(default=True, description="ask the model for structured JSON (text layout still parsed)")
    batch_size: int = Field(
        default=32,
        ge=1,
        description="chunks per generation batch: the LLM generator sends this many requests together and reports "
        "progress after each batch (the offline generator takes at least 64 at a time)",
    )
    # offline generator
    distractor_pool: int = Field(default=3000, ge=10, description="most chunks embedded as distractor sources")
    stem_window: int | None = Field(
        default=None,
        ge=1,
        description="keep at most this many words on each side of the blank (None: the whole sentence); a "
        "shorter stem copies less of the source, so retrieval has to find it rather than match it verbatim",
    )
    stem_subject: Literal["title", "topic", "none"] = Field(
        default="title",
        description="what names the question's subject: the document title (e.g. a qualified name), "
        "the topic field, or nothing",
    )
    # post-processing
    shuffle: Literal["balanced", "random"] = "balanced"
    absurd: bool = False
    # filters
    self_containment: bool = Field(
        default=True,
        description="remove questions whose text or choices point at their source (the passage, according to the "
        "text, a quoted title) by regex, with extra_patterns; false: neither is checked",
    )
    extra_patterns: list[str] = Field(default_factory=list, description="more regexes a question must not match")
    intra_candidate: FilterConfig = Field(default_factory=lambda: FilterConfig())
    extra_candidate: FilterConfig = Field(default_factory=lambda: FilterConfig())
    near_duplicate: FilterConfig = Field(default_factory=lambda: FilterConfig(mode="fixed", cosine=0.95))

    @model_validator(mode="after")
    def _check_fixed(self) -> ExamConfig:
        for name in ("intra_candidate", "extra_candidate", "near_duplicate"):
            f: FilterConfig = getattr(self, name)
            if f.mode == "fixed" and f.jaccard is None and f.cosine is None:
                raise ValueError(f"{name}: mode 'fixed' needs a jaccard and/or cosine threshold")
        return self


__all__ = ["ExamConfig", "FilterConfig"]
