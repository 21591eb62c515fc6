"""Adaptive, IRT-driven evaluation of a pipeline grid: the scheduler (no I/O).

Each round, every pipeline still running gets the ``batch`` items with the
highest Fisher information at its current ability estimate (chosen at random
among near-ties, optionally balanced over topics or Bloom levels); the answers
update its ability (EAP or MAP, with a standard error), pooled across the grid
under the additive model (:mod:`ragrade.run.adaptive_pool`). A pipeline stops
when its SE reaches ``target_se`` (after at least ``min_items`` answers and ``min_share`` of the exam), at
its item cap, or when the global request budget runs out; successive
elimination drops a pipeline once it is worse than the current best by more
than ``margin`` at the stated confidence (Bonferroni over the pipelines still
running), never on fewer than ``min_items`` answers. With the factorial
shortcut only a designed subset of the grid is measured; the others are
*predicted* from the additive model.

Every pipeline gets a full-exam accuracy estimate in the manner of gp-IRT: its
observed answers plus the IRT-expected score on the items it was not asked,
with a 95% interval (ability uncertainty and the binomial spread of the unseen
answers; the item parameters are taken as known).

A failed request is missing data: the item counts as spent (never asked again
for that pipeline) and adds nothing to the estimates. The scheduler is
deterministic for a fixed seed and the same answers, which is what makes a run
resumable: replaying the journal's answers round by round gives the same plan.
:mod:`ragrade.run.adaptive_run` drives it on a run directory; the benchmark
drives it on simulated answers.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.irt import cat
from ragrade.run.adaptive_config import AdaptiveConfig
from ragrade.run.adaptive_pool import design_matrix, design_subset, pooled_prior

F64 = npt.NDArray[np.float64]

MEASURED, ELIMINATED, PREDICTED, FAILED = "measured", "eliminated", "predicted", "failed"
_WIDE_SD = 3.0  # prior SD of the answers-only estimates that feed the pooled model


@dataclass
class ItemParams:
    """Calibrated 3PL parameters of the exam's items (aligned with ``items``)."""

    items: list[str]
    d: F64
    b: F64
    g: F64
    source: str


def _rng(seed: int, *parts: object) -> np.random.Generator:
    digest = hashlib.sha256("\0".join(map(str, (seed, *parts))).encode()).hexdigest()
    return np.random.default_rng(int(digest[:16], 16))


class Scheduler:
    """The adaptive scheduler over ``pipelines`` x ``params.items`` (see the module docstring).

    ``factors`` gives each pipeline's factor levels (for pooling and the factorial shortcut);
    ``groups`` each item's topic / Bloom group (for balance); ``fixed`` pipelines are measured
    on every item before round 1 (calibration references) and never scheduled.
    """

    def __init__(
        self,
        params: ItemParams,
        pipelines: Sequence[str],
        cfg: AdaptiveConfig,
        *,
        factors: Sequence[Mapping[str, object]] | None = None,
        groups: Sequence[str] | None = None,
        seed: int = 0,
        refit: Callable[[Scheduler], ItemParams] | None = None,
    ) -> None:
        self.cfg, self.seed, self.refit = cfg, seed, refit
        self.pipelines = list(pipelines)
        self.set_params(params)
        n_p, n_i = len(self.pipelines), len(params.items)
        self.grid = cat.theta_points()
        self.loglik = np.zeros((n_p, len(self.grid)))
        self.y = np.full((n_p, n_i), -1, dtype=np.int8)  # 1 / 0 answered, -1 not
        # expected number right on the unanswered items, and its binomial variance, per grid point
        self._S = np.tile(self.P.sum(axis=0), (n_p, 1))
        self._V = np.tile(self.Q.sum(axis=0), (n_p, 1))
        self.asked = np.zeros((n_p, n_i), dtype=bool)
        self.n_failed = np.zeros(n_p, dtype=np.int64)
        self.status = np.array(["active"] * n_p, dtype=object)
        self.reason = np.array([""] * n_p, dtype=object)
        self.X, _ = design_matrix(factors or [{} for _ in self.pipelines])
        self.cap = min(n_i, cfg.max_items or n_i)
        self.min_items = min(self.cap, max(cfg.min_items, math.ceil(cfg.min_share * n_i)))
        self.groups = np.asarray(groups) if groups is not None and cfg.balance != "none" else None
        self.round = 0
        self.spent = 0
        self.refit_seconds = 0.0  # time spent re-fitting items (calibration, not scheduling)
        self.prior_mean, self.prior_sd = np.zeros(n_p), np.ones(n_p)
        self.pool_info: dict[str, float] = {}
        if cfg.factorial is not None and n_p > 1:
            keep = set(design_subset(self.X, math.ceil(cfg.factorial * n_p), seed))
            for p in range(n_p):
                if p not in keep:
                    self.status[p], self.reason[p] = PREDICTED, "factorial shortcut"
        self.reestimate()

    # ------------------------------------------------------------------ data
    def set_params(self, params: ItemParams) -> None:
        """Use (new) item parameters: recompute the grid tables and every running log-likelihood."""
        self.params = params
        self.grid = cat.theta_points()
        self.P, self.Q = cat.grid_probabilities(self.grid, params.d, params.b, params.g)
        self._logP = np.log(np.clip(self.P, 1e-12, 1 - 1e-12))
        self._logQ = np.log(np.clip(1 - self.P, 1e-12, 1 - 1e-12))
        if hasattr(self, "y"):
            right, wrong = (self.y == 1).astype(float), (self.y == 0).astype(float)
            self.loglik = right @ self._logP + wrong @ self._logQ
            unseen = (self.y < 0).astype(float)
            self._S, self._V = unseen @ self.P, unseen @ self.Q

    def record(self, p: int, items: Sequence[int], answers: Sequence[int | None]) -> None:
        """Record answers of pipeline ``p`` (1 right, 0 wrong, None: the request failed; missing)."""
        for i, a in zip(items, answers, strict=True):
            if self.asked[p, i]:
                continue
            self.asked[p, i] = True
            self.spent += 1
            if a is None:
                self.n_failed[p] += 1
                continue
            self.y[p, i] = 1 if a else 0
            self._S[p] -= self.P[i]
            self._V[p] -= self.Q[i]
            self.loglik[p] += self._logP[i] if a else self._logQ[i]

    @property
    def n_answered(self) -> npt.NDArray[np.int64]:
        """Answers (not failed) per pipeline."""
        return np.asarray((self.y >= 0).sum(axis=1))

    @property
    def n_asked(self) -> npt.NDArray[np.int64]:
        """Requests spent per pipeline."""
        return np.asarray(self.asked.sum(axis=1))

    # ------------------------------------------------------------------ estimation
    def reestimate(self) -> None:
        """Abilities, SEs and posterior weights of every pipeline (pooled prior when on)."""
        have = self.n_answered > 0
        if self.cfg.pooling and have.any():
            m0, s0, _ = cat.eap(self.grid, self.loglik, np.zeros(len(have)), np.full(len(have), _WIDE_SD))
            self.prior_mean, self.prior_sd, self.pool_info = pooled_prior(
                self.X, have, m0, s0**2, min_tau=self.cfg.min_tau
            )
        theta, se, w = cat.eap(self.grid, self.loglik, self.prior_mean, self.prior_sd)
        if self.cfg.estimator == "map":
            theta = cat.map_estimate(self.grid, self.loglik, self.prior_mean, self.prior_sd)
            d, b, g = self.params.d, self.params.b, self.params.g
            info = (cat.information_at(theta, d, b, g).T * (self.y >= 0)).sum(axis=1)
            se = cat.map_se(info, self.prior_sd)
        self.theta, self.se, self.weights = theta, se, w

    @property
    def model_error(self) -> float:
        """The calibration-error allowance (accuracy SD on unasked items): configured, or 0.015 with a
        calibration file and 0.03 with items calibrated in the run."""
        if self.cfg.model_error is not None:
            return self.cfg.model_error
        return 0.03 if self.refit is not None else 0.015

    def accuracy(self, *, sampling_only: bool = False) -> tuple[F64, F64]:
        """Full-exam accuracy estimates and their SDs: observed answers + expected score on the rest.

        The SD adds the calibration-error allowance on the unasked share unless ``sampling_only``.
        """
        n = self.y.shape[1]
        exp_sum, var = cat.sum_moments(self.weights, self._S, self._V)
        observed = (self.y == 1).sum(axis=1)
        unseen = (self.y < 0).sum(axis=1) / n
        allowance = 0.0 if sampling_only else self.model_error
        return (observed + exp_sum) / n, np.sqrt(var / n**2 + (allowance * unseen) ** 2)

    # ------------------------------------------------------------------ planning
    def plan(self) -> dict[int, list[int]]:
        """The items each running pipeline is asked this round (empty: the run is over)."""
        cfg = self.cfg
        active = [p for p in range(len(self.pipelines)) if self.status[p] == "active"]
        left = None if cfg.budget is None else cfg.budget - self.spent
        if left is not None and left <= 0:
            for p in active:
                self._stop(p, "budget")
            return {}
        n_asked = self.n_asked
        want = {p: min(cfg.batch, self.cap - int(n_asked[p])) for p in active}
        if left is not None and sum(want.values()) > left:  # the last round: most uncertain first
            for p in sorted(active, key=lambda q: (-self.se[q], q)):
                want[p] = min(want[p], left)
                left -= want[p]
        info = cat.information_at(self.theta[active], self.params.d, self.params.b, self.params.g) if active else None
        out: dict[int, list[int]] = {}
        for col, p in enumerate(active):
            if want[p] <= 0:
                continue
            assert info is not None
            picked = self._select(p, info[:, col], want[p])
            if picked:
                out[p] = picked
        return out

    def _select(self, p: int, info: F64, k: int) -> list[int]:
        score = np.where(self.asked[p], -np.inf, info)
        n_free = int(np.isfinite(score).sum())
        k = min(k, n_free)
        if k <= 0:
            return []
        rng = _rng(self.seed, "select", self.round, self.pipelines[p])
        if self.groups is None:
            return self._near_ties(score, k, rng)
        picked: list[int] = []
        counts = {gname: int((self.groups[self.asked[p]] == gname).sum()) for gname in np.unique(self.groups)}
        share = {gname: float((self.groups == gname).mean()) for gname in counts}
        total = int(self.asked[p].sum())
        for _ in range(k):
            open_groups = [gname for gname in counts if np.isfinite(score[self.groups == gname]).any()]
            gname = max(open_groups, key=lambda x: (share[x] * (total + 1) - counts[x], x))
            masked = np.where(self.groups == gname, score, -np.inf)
            i = self._near_ties(masked, 1, rng)[0]
            picked.append(i)
            score[i] = -np.inf
            counts[gname] += 1
            total += 1
        return picked

    def _near_ties(self, score: F64, k: int, rng: np.random.Generator) -> list[int]:
        order = np.argsort(-score, kind="stable")
        kth = score[order[k - 1]]
        pool = order[: max(k, int((score >= kth * (1.0 - self.cfg.near_tie)).sum()))]
        pool = pool[np.isfinite(score[pool])]
        return sorted(int(i) for i in rng.choice(pool, size=k, replace=False))

    # ------------------------------------------------------------------ between rounds
    def finish_round(self) -> dict[str, Any]:
        """Re-estimate, stop and eliminate; returns this round's log record."""
        self.round += 1
        if self.refit is not None and self.round % self.cfg.refit_every == 0:
            self._refit()
        self.reestimate()
        _, sd = self.accuracy(sampling_only=True)
        batch_floor = min(self.cfg.batch, self.cap)
        n_answered, n_asked = self.n_answered, self.n_asked
        racing = self._contenders(*self.accuracy())
        race_cap = min(self.cap, self.cfg.race_items or self.cap)
        for p in range(len(self.pipelines)):
            if self.status[p] != "active":
                continue
            precise = self.se[p] <= self.cfg.target_se or sd[p] <= (self.cfg.target_accuracy_se or -1.0)
            if n_answered[p] == 0 and n_asked[p] >= batch_floor:
                self.status[p], self.reason[p] = FAILED, "every request failed"
            elif n_answered[p] >= self.min_items and precise and (p not in racing or n_asked[p] >= race_cap):
                self._stop(p, "target SE")
            elif n_asked[p] >= self.cap:
                self._stop(p, "item cap")
        eliminated = self._eliminate(*self.accuracy()) if self.cfg.eliminate else []
        alive = [p for p in range(len(self.pipelines)) if self.status[p] == "active"]
        if not alive and self.refit is not None and self.round % self.cfg.refit_every != 0:
            self._refit()  # the final estimates use every answer
            self.reestimate()
        return {
            "round": self.round,
            "requests": self.spent,
            "asked_this_round": None,
            "alive": len(alive),
            "eliminated": [self.pipelines[p] for p in eliminated],
            "max_se": float(self.se[alive].max()) if alive else None,
            "median_se": float(np.median(self.se[alive])) if alive else None,
            "se": {self.pipelines[p]: round(float(self.se[p]), 4) for p in alive},
            "tau": self.pool_info.get("tau"),
        }

    def _refit(self) -> None:
        import time

        assert self.refit is not None
        t0 = time.perf_counter()
        self.set_params(self.refit(self))
        self.refit_seconds += time.perf_counter() - t0

    def _contenders(self, acc: F64, sd: F64) -> set[int]:
        """Pipelines (running) whose 95% interval overlaps the current best's: candidates for the top."""
        if not self.cfg.race:
            return set()
        live = np.isin(self.status, ["active", "stopped"]) & (self.n_answered > 0)
        if live.sum() < 2:
            return set()
        best = int(np.flatnonzero(live)[np.argmax(acc[live])])
        floor = acc[best] - 1.96 * sd[best]
        return {int(p) for p in np.flatnonzero(live & (acc + 1.96 * sd >= floor)) if self.status[p] == "active"}

    def _stop(self, p: int, why: str) -> None:
        self.status[p], self.reason[p] = "stopped", why

    def _eliminate(self, acc: F64, sd: F64) -> list[int]:
        cfg = self.cfg
        ok = (self.n_answered >= self.min_items) & np.isin(self.status, ["active", "stopped"])
        if ok.sum() < 2:
            return []
        best = int(np.flatnonzero(ok)[np.argmax(acc[ok])])
        cands = [p for p in np.flatnonzero(ok) if self.status[p] == "active" and p != best]
        if not cands:
            return []
        z = NormalDist().inv_cdf(1.0 - (1.0 - cfg.confidence) / len(cands))
        out = []
        for p in cands:
            gap = acc[best] - acc[p] - cfg.margin
            if gap > z * math.hypot(sd[best], sd[p]):
                self.status[p], self.reason[p] = ELIMINATED, f"worse than {self.pipelines[best]}"
                out.append(int(p))
        return out

    @property
    def done(self) -> bool:
        """True when no pipeline is running."""
        return not (self.status == "active").any()

    def results(self) -> list[dict[str, Any]]:
        """One record per pipeline: status, ability, SE, full-exam accuracy estimate with its 95% interval."""
        acc, sd = self.accuracy()
        out = []
        for p, pid in enumerate(self.pipelines):
            st = str(self.status[p])
            status = st if st in (ELIMINATED, PREDICTED, FAILED) else MEASURED
            if status == MEASURED and self.n_asked[p] == 0:  # never asked (e.g. the budget ran out first)
                status = PREDICTED
            ok = status != FAILED
            out.append(
                {
                    "pipeline": pid,
                    "status": status,
                    "stop_reason": str(self.reason[p]),
                    "n_asked": int(self.n_asked[p]),
                    "n_answered": int(self.n_answered[p]),
                    "n_failed": int(self.n_failed[p]),
                    "theta": float(self.theta[p]) if ok else math.nan,
                    "theta_se": float(self.se[p]) if ok else math.nan,
                    "accuracy_estimate": float(acc[p]) if ok else math.nan,
                    "accuracy_estimate_low": float(max(0.0, acc[p] - 1.96 * sd[p])) if ok else math.nan,
                    "accuracy_estimate_high": float(min(1.0, acc[p] + 1.96 * sd[p])) if ok else math.nan,
                }
            )
        return out


def run_rounds(sched: Scheduler, ask: Any, on_round: Any = None, max_rounds: int = 100_000) -> list[dict[str, Any]]:
    """Drive ``sched`` to the end: ``ask(plan) -> {p: answers}`` per round; returns the round log.

    ``answers`` are aligned with the plan's items (1, 0, or None for a failed request).
    """
    log = []
    for _ in range(max_rounds):
        plan = sched.plan()
        if not plan:
            break
        answers = ask(plan)
        for p, items in plan.items():
            sched.record(p, items, answers[p])
        rec = sched.finish_round()
        rec["asked_this_round"] = sum(len(v) for v in plan.values())
        log.append(rec)
        if on_round is not None:
            on_round(rec)
        if sched.done:
            break
    return log


__all__ = [
    "ELIMINATED",
    "FAILED",
    "MEASURED",
    "PREDICTED",
    "AdaptiveConfig",
    "ItemParams",
    "Scheduler",
    "run_rounds",
]
