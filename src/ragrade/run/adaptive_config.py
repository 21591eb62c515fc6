"""Settings of adaptive evaluation (the ``[adaptive]`` table of ``sweep.toml`` and ``ragrade run`` configs).

Light on purpose (pydantic only): the sweep config embeds it. What each setting
does is described in :mod:`ragrade.adaptive.scheduler`. It lives in ``ragrade.run``, not
:mod:`ragrade.adaptive`: ``run.spec.SweepConfig`` embeds it (the ``[adaptive]`` table of the sweep
settings), and the adaptive package sits above ``ragrade.run``.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ragrade.errors import ConfigError


class AdaptiveConfig(BaseModel):
    """Settings of an adaptive run (the ``[adaptive]`` table; flags override)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=False,
        description="run adaptively: exam take with this file as with --adaptive; in a job, the adaptive stage "
        "(into adaptive/, needs an exam)",
    )
    calibration: str | None = None  # an irt.json of an earlier run on the same exam
    # auto: file if given, else cold on grids of >= 20 pipelines (enough answers to calibrate), else sample
    # (no model: every pipeline answers the same uniformly random items; design-based estimates)
    calibration_mode: Literal["auto", "file", "reference", "cold", "sample"] = Field(
        default="auto",
        description="where the items' IRT parameters come from: file (calibration), reference (reference "
        "pipelines take the whole exam first and their answers are fitted), cold (uninformed items re-fitted on "
        "the run's answers every refit_every rounds), sample (no model: the same random questions for every "
        "pipeline); auto: file when calibration is given, else cold on grids of 20 pipelines or more, else sample",
    )
    reference: list[str] | None = None  # calibration pipelines (ids or unique parts); default: see run module
    n_reference: int = Field(
        default=5,
        ge=1,
        description="reference mode without reference: the size of the D-optimal subset picked when the default "
        "references (closed book, oracle, one per retriever) are fewer than 2 or over half the grid (at most half)",
    )
    calibration_model: Literal["1pl", "2pl", "3pl"] = "3pl"  # in-run fits (reference, cold)
    batch: int = Field(default=10, ge=1)  # items per pipeline per round
    target_se: float = 0.2  # on the ability scale
    target_accuracy_se: float | None = Field(default=0.015, gt=0.0)  # or: the full-exam estimate's SD
    min_items: int = Field(
        default=30,
        ge=1,
        description="answers a pipeline needs before it may stop on its target SE, be eliminated or be stopped "
        "on the others' estimates (the larger of this and min_share of the exam, at most the item cap)",
    )
    min_share: float = Field(default=0.1, ge=0.0, le=1.0)  # and at least this share of the exam
    max_items: int | None = Field(default=None, ge=1)  # per-pipeline cap
    budget: int | None = None  # global cap on requests (calibration included)
    # without --budget, at most this share of the full grid (None: no cap beyond the stopping rules)
    default_share: float | None = Field(
        default=0.25,
        gt=0.0,
        le=1.0,
        description="without budget: the run's cap on requests as a share of the full grid (pipelines x questions); "
        "with default_items the smaller cap holds (both None: no cap beyond the stopping rules)",
    )
    # ... and at most this many requests per pipeline on average (the smaller cap holds; None: the share alone):
    # a long exam needs no more answers per pipeline than a short one to rank the grid
    default_items: int | None = Field(
        default=200,
        ge=2,
        description="without budget: at most this many requests per pipeline on average (a cap of this x "
        "pipelines); with default_share the smaller cap holds (None: the share alone)",
    )
    # share of every batch drawn uniformly at random from the items not asked (the audit sample)
    audit_share: float = Field(
        default=0.3,
        gt=0.0,
        le=1.0,
        description="share of a pipeline's requests drawn uniformly at random from the questions it was not asked "
        "(the audit sample that corrects the model's estimate of the rest); 1: no model, random questions only",
    )
    min_audit: int = Field(default=8, ge=2)  # audit answers a pipeline needs before it can be eliminated
    # level of the misfit check on the run's own answers (residual pattern and audit bias by component, joined by
    # Bonferroni; on items fitted in the run, cold, the component test alone)
    misfit_alpha: float = Field(
        default=0.01,
        gt=0.0,
        lt=0.5,
        description="significance level of the misfit check on the run's own answers at its end (a p-value below "
        "it: a MISFIT warning)",
    )
    # level of the misfit check on the calibration file's answers (its statistic is the top residual eigenvalue's
    # share; in bench_adaptive.py with one-dimensional truth its p-values were 0.27-1.0 on 63 x 300 calibration
    # data and 0.05-0.99 on 63 x 1,000, so 0.02 finds more two-dimensional exams at few false alarms)
    calibration_misfit_alpha: float = Field(
        default=0.02,
        gt=0.0,
        lt=0.5,
        description="significance level of the check on the calibration file's answers, before the first request; "
        "below it the run asks random questions (as audit_share = 1) instead of trusting the file's items",
    )
    # under a budget, pause (serve last) a pipeline whose probability of being the best is below this; it stops
    # only when the simultaneous bounds of elimination also rule it out
    stop_p_best: float = Field(
        default=0.01,
        ge=0.0,
        lt=1.0,
        description="under a budget (default caps included): a pipeline whose probability of being the best is "
        "below this is paused (asked last) once its accuracy SD is at most pause_max_sd, and stopped once the "
        "simultaneous bounds rule it out too; 0: neither",
    )
    # ... once its accuracy SD is at most this (a pause is no decision; stopping needs an SD of 0.04): lower keeps
    # the pipelines out of the race more precise, higher spends more of the budget on the race
    pause_max_sd: float = Field(
        default=0.08,
        gt=0.0,
        le=0.5,
        description="the largest accuracy SD (0.08: 8 points) at which a pipeline below stop_p_best is paused; "
        "lower: paused pipelines more precise, higher: more of the budget for the contenders",
    )
    exclude_negative: bool = True  # items with negative discrimination are never chosen by the model
    estimator: Literal["eap", "map"] = Field(
        default="eap",
        description="ability estimate: eap (posterior mean over a grid of abilities) or map (posterior mode, its "
        "SE from the information of the answered questions)",
    )
    near_tie: float = Field(default=0.05, ge=0.0, lt=1.0)  # items within this share of the best are ties
    balance: Literal["none", "topic", "bloom"] = Field(
        default="none",
        description="spread the questions the model chooses for a pipeline over the exam's topic or Bloom tags, "
        "in the exam's proportions (none: by information alone)",
    )
    eliminate: bool = Field(
        default=True,
        description="drop a pipeline surely worse than another (by more than margin) and stop the run once it is "
        "decided; false: pipelines stop only on their target SE, the caps, the budget or as surely not the best",
    )
    margin: float = Field(default=0.02, ge=0.0)  # accuracy points
    confidence: float = Field(
        default=0.95,
        gt=0.5,
        lt=1.0,
        description="joint level of the bounds (simultaneous over pipelines and rounds) behind elimination and the "
        "stops: the best pipeline is dropped with probability at most 1 - this",
    )
    race: bool = True  # pipelines not separated from the best keep going past the target SE
    race_items: int | None = Field(default=None, ge=1)  # their cap (default: the item cap)
    # floor of the audit-bias SD (accuracy, on the unasked share); None: 0.01 (the rest is estimated from the audit)
    model_error: float | None = Field(
        default=None,
        ge=0.0,
        description="floor of the between-pipeline SD of the model's bias on the questions not asked, as the audit "
        "estimates it (accuracy: 0.01 is 1 point; None: 0.01); higher widens the intervals",
    )
    unshrunk_top: int = Field(default=3, ge=0)  # leaders whose interval also holds their unshrunk audit estimate
    pooling: bool = Field(
        default=True,
        description="each pipeline's ability prior is predicted by the additive model over the grid's factors, "
        "fitted on the pipelines' estimates (empirical Bayes); false: a standard normal prior for every pipeline",
    )
    min_tau: float = Field(
        default=0.1,
        ge=0.0,
        description="pooling: floor of the SD of abilities around the additive model's prediction (ability "
        "scale); higher pools less",
    )
    factorial: float | None = Field(default=None, gt=0.0, le=1.0)  # share of the grid measured
    refit_every: int = Field(default=5, ge=1)  # in-run calibration: re-fit the items every N rounds

    def check(self) -> AdaptiveConfig:
        """ConfigError on values no run can use."""
        if not math.isfinite(self.target_se) or self.target_se <= 0:
            raise ConfigError(f"$target_se must be positive, got {self.target_se}")
        if self.budget is not None and self.budget < 1:
            raise ConfigError(f"$budget must be positive, got {self.budget}")
        if self.audit_share >= 1.0 and self.calibration_mode not in ("auto", "sample"):
            raise ConfigError("$audit_share 1 leaves nothing for the model to choose: use $calibration_mode sample")
        return self


__all__ = ["AdaptiveConfig"]
