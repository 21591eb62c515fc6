"""Adaptive, IRT-driven evaluation of a pipeline grid: the scheduler (no I/O).

Each round, every pipeline still running gets the ``batch`` items with the
highest Fisher information at its current ability estimate (chosen at random
among near-ties, optionally balanced over topics or Bloom levels); the answers
update its ability (EAP or MAP, with a standard error), pooled across the grid
under the additive model (:mod:`ragrade.run.adaptive_pool`). A pipeline stops
when its SE reaches ``target_se`` (after at least ``min_items`` answers and ``min_share`` of the exam), at
its item cap, when the global request budget (by default a share of the full
grid) runs out, or, under a budget, once it is very unlikely to be the best;
elimination drops a pipeline once its upper bound plus ``margin`` is below
another's lower bound (paired questions: once the difference's bound is), with bounds simultaneous over
pipelines and rounds
(:func:`~ragrade.run.adaptive_estimate.elimination_z`), never on fewer than
``min_items`` answers and ``min_audit`` audit answers. With the factorial
shortcut only a designed subset of the grid is measured; the others are
*predicted* from the additive model.

A share of every batch (``audit_share``) is the *audit sample*: items drawn
uniformly from those the pipeline was not asked. Every pipeline gets a
full-grid accuracy estimate: its observed answers plus an estimate of the
rest, the IRT-expected score corrected by the audit residuals, or the audit
sample alone when the model misfits or there is no model (``audit_share = 1``,
the ``sample`` mode); see :mod:`ragrade.run.adaptive_estimate`.

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
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.irt import cat
from ragrade.run.adaptive_config import AdaptiveConfig
from ragrade.run.adaptive_estimate import (
    MisfitResult,
    audit_stats,
    elimination_z,
    leader_sd,
    misfit_check,
    pair_gaps,
    paired_corr,
    prob_best,
    shrunk_bias,
)
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
    negative: npt.NDArray[np.bool_] | None = None  # items with negative discrimination (mis-keyed?)


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
        calibration_fit: MisfitResult | None = None,
    ) -> None:
        self.cfg, self.seed, self.refit = cfg, seed, refit
        self.calibration_fit = calibration_fit  # the misfit check on the calibration data, when it was run
        self.pipelines = list(pipelines)
        self.set_params(params)
        n_p, n_i = len(self.pipelines), len(params.items)
        self.grid = cat.theta_points()
        self.loglik = np.zeros((n_p, len(self.grid)))
        self._ll_audit = np.zeros((n_p, len(self.grid)))  # the audit answers' share of ``loglik``
        self.y = np.full((n_p, n_i), -1, dtype=np.int8)  # 1 / 0 answered, -1 not
        # expected number right on the unanswered items, and its binomial variance, per grid point
        self._S = np.tile(self.P.sum(axis=0), (n_p, 1))
        self._V = np.tile(self.Q.sum(axis=0), (n_p, 1))
        self.asked = np.zeros((n_p, n_i), dtype=bool)
        self.audit = np.zeros((n_p, n_i), dtype=bool)  # in the audit sample (a prefix of the pipeline's order)
        self.audit_pos = np.zeros(n_p, dtype=np.int64)  # how far along its order each audit has come
        self.use_model = cfg.audit_share < 1.0  # audit_share 1: plain random sampling, design-based only
        # the audit orders: one per pipeline (independent audits, pooled across the grid) with a model; one for
        # all without (every pipeline answers the same items: paired comparisons)
        keys = self.pipelines if self.use_model else ["common"] * n_p
        self.order = np.array([_rng(seed, "audit", k).permutation(n_i) for k in keys]).reshape(n_p, n_i)
        self.misfit: MisfitResult | None = None
        self.tau = 0.0  # between-pipeline SD of the audit bias (empirical Bayes)
        full = n_p * n_i
        share_cap = None if cfg.default_share is None else math.ceil(cfg.default_share * full)
        self.budget = cfg.budget if cfg.budget is not None else share_cap
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
        self.__dict__.pop("_acc_cache", None)
        self.params = params
        self.grid = cat.theta_points()
        self.P, self.Q = cat.grid_probabilities(self.grid, params.d, params.b, params.g)
        self._logP = np.log(np.clip(self.P, 1e-12, 1 - 1e-12))
        self._logQ = np.log(np.clip(1 - self.P, 1e-12, 1 - 1e-12))
        if hasattr(self, "y"):
            right, wrong = (self.y == 1).astype(float), (self.y == 0).astype(float)
            self.loglik = right @ self._logP + wrong @ self._logQ
            self._ll_audit = (right * self.audit) @ self._logP + (wrong * self.audit) @ self._logQ
            unseen = (self.y < 0).astype(float)
            self._S, self._V = unseen @ self.P, unseen @ self.Q

    def record(self, p: int, items: Sequence[int], answers: Sequence[int | None]) -> None:
        """Record answers of pipeline ``p`` (1 right, 0 wrong, None: the request failed; missing)."""
        self.__dict__.pop("_acc_cache", None)
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
            if self.audit[p, i]:
                self._ll_audit[p] += self._logP[i] if a else self._logQ[i]

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
        self.__dict__.pop("_acc_cache", None)
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
        """The floor of the audit-bias SD: configured, else 0.01 (a moment estimate of 0 is not proof of none)."""
        return self.cfg.model_error if self.cfg.model_error is not None else 0.01

    @property
    def design_only(self) -> bool:
        """True when the estimates rest on the audit sample alone (no model, or the model misfits)."""
        return not self.use_model or self.misfit_warning

    @property
    def misfit_warning(self) -> bool:
        """The one-dimensional model does not describe the calibration data or this run's answers."""
        calib = self.calibration_fit is not None and self.calibration_fit.warn
        return self.use_model and (calib or (self.misfit is not None and self.misfit.warn))

    def predictions(self, weights: F64 | None = None) -> F64:
        """Posterior-expected probability of a right answer, every pipeline x item (0 without a model)."""
        if not self.use_model:
            return np.zeros(self.y.shape)
        return np.asarray((self.weights if weights is None else weights) @ self.P.T)

    def held_out_weights(self) -> F64:
        """Posterior weights from the answers outside the audit sample (pooled prior likewise).

        The estimates use these: predictions that never saw the audit answers make the audit residuals
        an unbiased check of them.
        """
        ll = self.loglik - self._ll_audit
        # the plain N(0, 1) prior where there are answers (the pooled one would carry the other pipelines'
        # audits); a pipeline never asked keeps the pooled prior, its only source
        asked = self.n_answered > 0
        mean = np.where(asked, 0.0, self.prior_mean)
        sd = np.where(asked, 1.0, self.prior_sd)
        return cat.eap(self.grid, ll, mean, sd)[2]

    def accuracy(self, *, sampling_only: bool = False) -> tuple[F64, F64]:
        """Full-grid accuracy estimates and their SDs: observed answers + an estimate of the unobserved ones.

        ``sampling_only``: the model's own SD (posterior and binomial spread; what the stopping rule uses).
        Otherwise the audit-corrected estimate of :mod:`ragrade.run.adaptive_estimate`: design-based when
        :attr:`design_only`, else the model's expected score plus the shrunk audit bias.
        """
        cache = self.__dict__.setdefault("_acc_cache", {})  # cleared whenever answers, items or abilities change
        if sampling_only not in cache:
            cache[sampling_only] = self._accuracy(sampling_only)
        est, sd = cache[sampling_only]
        return est.copy(), sd.copy()

    def _accuracy(self, sampling_only: bool) -> tuple[F64, F64]:
        n = self.y.shape[1]
        observed = (self.y == 1).sum(axis=1).astype(np.float64)
        unseen = (self.y < 0).sum(axis=1)
        if sampling_only and self.use_model:
            exp_sum, var = cat.sum_moments(self.weights, self._S, self._V)
            return (observed + exp_sum) / n, np.sqrt(var) / n
        w = self.held_out_weights() if self.use_model else None
        if w is not None:
            exp_sum, var = cat.sum_moments(w, self._S, self._V)
        else:
            exp_sum, var = np.zeros(len(observed)), np.zeros(len(observed))
        phat = self.predictions(w)
        st = audit_stats(self.y, self.audit, phat, np.full(len(observed), n))
        if self.design_only:  # the difference estimator over the whole exam: mean prediction + mean audit residual
            exact = unseen == 0  # every question answered: nothing to estimate
            est = np.where(exact, observed / n, phat.mean(axis=1) + st.mean_resid)
            return est, np.where(exact, 0.0, np.sqrt(st.var_design))
        # the mean residual on the unobserved items, design-unbiased: the audit estimates the exam's residual
        # total, the observed part of which is known exactly (it removes the model's bias where it chose items)
        u = np.maximum(unseen, 1)
        known = np.where(self.y >= 0, self.y - phat, 0.0).sum(axis=1)
        bias_u = (n * st.mean_resid - known) / u
        ok = (st.m >= 2) & (unseen > 0)  # a pipeline asked everything is exact: no bias to estimate
        var_u = (n / u) ** 2 * st.var_design
        bias, var_bias, self.tau = shrunk_bias(bias_u, var_u, ok, self.model_error)
        est = (observed + exp_sum + unseen * bias) / n
        sd = np.sqrt(var / n**2 + (unseen / n) ** 2 * var_bias)
        est_u = (observed + exp_sum + unseen * bias_u) / n
        sd_u = np.sqrt(var / n**2 + (unseen / n) ** 2 * var_u)
        return est, leader_sd(est, sd, ok, est_u, sd_u, self.cfg.unshrunk_top)

    def check_fit(self, n_boot: int = 200) -> MisfitResult | None:
        """Run the misfit check on this run's answers (model runs only); a warning makes the estimates design-based."""
        if self.use_model:
            self.__dict__.pop("_acc_cache", None)
            alpha, phat = self.cfg.misfit_alpha, self.predictions()
            self.misfit = misfit_check(self.y, self.audit, phat, self.theta, alpha=alpha, seed=self.seed, n_boot=n_boot)
        return self.misfit

    # ------------------------------------------------------------------ planning
    def plan(self) -> dict[int, list[int]]:
        """The items each running pipeline is asked this round (empty: the run is over)."""
        cfg = self.cfg
        active = [p for p in range(len(self.pipelines)) if self.status[p] == "active"]
        left = None if self.budget is None else self.budget - self.spent
        if left is not None and left <= 0:
            for p in active:
                self._stop(p, "budget")
            if active:  # the run ends here, not in finish_round
                self._wrap_up()
            return {}
        n_asked = self.n_asked
        want = {p: min(cfg.batch, self.cap - int(n_asked[p])) for p in active}
        if left is not None and sum(want.values()) > left:  # the last round: shared out, least asked first
            order = sorted(active, key=lambda q: (int(n_asked[q]), -self.se[q], q))
            share = dict.fromkeys(active, 0)
            while left > 0 and any(share[p] < want[p] for p in order):
                for p in order:
                    if left > 0 and share[p] < want[p]:
                        share[p] += 1
                        left -= 1
            want = share
        info = None
        if active and self.use_model:
            info = cat.information_at(self.theta[active], self.params.d, self.params.b, self.params.g)
        out: dict[int, list[int]] = {}
        for col, p in enumerate(active):
            if want[p] <= 0:
                continue
            audit = self._audit_pick(p, self._n_audit(p, want[p], int(n_asked[p])))
            picked = list(audit)
            if info is not None and want[p] > len(audit):
                picked += self._select(p, info[:, col], want[p] - len(audit), audit)
            if picked:
                out[p] = sorted(picked)
        return out

    def _n_audit(self, p: int, k: int, n_asked: int) -> int:
        """Audit items of this batch: the audit share of everything asked, front-loaded to ``min_audit``."""
        if not self.use_model:
            return k
        m = int(self.audit[p].sum())
        share = math.ceil(self.cfg.audit_share * (n_asked + k)) - m
        return max(0, min(k, max(share, self.cfg.min_audit - m)))

    def _audit_pick(self, p: int, k: int) -> list[int]:
        """Extend ``p``'s audit along its random order by ``k`` new requests.

        The audit is always a prefix of the order, i.e. a simple random sample of the whole exam: an item
        on the way that the model already chose joins the audit at no cost (its answer is known), and its
        share of the log-likelihood moves to the audit's (the held-out abilities never see audit answers).
        """
        self.__dict__.pop("_acc_cache", None)
        picked: list[int] = []
        order, pos = self.order[p], int(self.audit_pos[p])
        while len(picked) < k and pos < len(order):
            i = int(order[pos])
            pos += 1
            self.audit[p, i] = True
            if not self.asked[p, i]:
                picked.append(i)
            elif self.y[p, i] >= 0:
                self._ll_audit[p] += self._logP[i] if self.y[p, i] == 1 else self._logQ[i]
        self.audit_pos[p] = pos
        return picked

    @property
    def excluded(self) -> npt.NDArray[np.bool_]:
        """Items the model never chooses (negative discrimination, when excluded); the audit may still draw them."""
        neg = self.params.negative
        if neg is None or not self.cfg.exclude_negative:
            return np.zeros(len(self.params.items), dtype=bool)
        return np.asarray(neg, dtype=bool)

    def _select(self, p: int, info: F64, k: int, taken: Sequence[int] = ()) -> list[int]:
        score = np.where(self.asked[p] | self.excluded, -np.inf, info)
        score[list(taken)] = -np.inf
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
        acc, sd_all = self.accuracy()
        eliminated = self._eliminate(acc, sd_all) if self.cfg.eliminate else []
        self._stop_unlikely(acc, sd_all)
        self._stop_if_decided()
        alive = [p for p in range(len(self.pipelines)) if self.status[p] == "active"]
        if not alive:
            self._wrap_up()
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
            "audit_bias_sd": round(self.tau, 5),
            "misfit_p": None if self.misfit is None else round(self.misfit.p_value, 4),
        }

    def _wrap_up(self) -> None:
        """At the end of the run: the last re-fit (the final estimates use every answer) and the misfit check."""
        if self.refit is not None and self.round % self.cfg.refit_every != 0:
            self._refit()
            self.reestimate()
        self.check_fit()  # at the end (the bootstrap is the costly part); the calibration check runs first

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
        """Drop a pipeline whose upper bound (plus the margin) is below another's lower bound.

        The bounds are simultaneous over pipelines and rounds (:func:`elimination_z`), so neither
        choosing the leader nor looking after every round can drop the best but with probability
        ``1 - confidence``.
        """
        cfg = self.cfg
        m_audit = (self.audit & (self.y >= 0)).sum(axis=1)
        ok = (self.n_answered >= self.min_items) & (m_audit >= cfg.min_audit)
        ok &= np.isin(self.status, ["active", "stopped"])
        if ok.sum() < 2:
            return []
        z = elimination_z(1.0 - cfg.confidence, len(self.pipelines), max(1, self.round))
        gap = pair_gaps(acc, sd, z, self.paired_corr())  # [p, q]: how far q is surely above p
        gap = np.where(ok[None, :] & ~np.eye(len(acc), dtype=bool), gap, -np.inf)
        out = []
        for p in np.flatnonzero(ok):
            q = int(np.argmax(gap[p]))
            if self.status[p] == "active" and gap[p, q] > cfg.margin:
                self.status[p], self.reason[p] = ELIMINATED, f"worse than {self.pipelines[q]}"
                out.append(int(p))
        return out

    def paired_corr(self) -> F64 | None:
        """Correlations of the estimates when they rest on paired questions (``sample`` mode), else None."""
        if self.use_model:
            return None
        use = self.audit & (self.y >= 0)
        return paired_corr(self.y, use, self.audit_pos, self.y.shape[1])

    def _stop_unlikely(self, acc: F64, sd: F64) -> None:
        """Under a budget, stop asking pipelines that are very unlikely to be the best (they keep their
        estimate and interval; the requests go to the contenders)."""
        if self.budget is None or self.cfg.stop_p_best <= 0:
            return
        live = np.isin(self.status, ["active", "stopped"]) & (self.n_answered > 0)
        if live.sum() < 2:
            return
        pb = prob_best(
            np.where(live, acc, np.nan), sd, seed=self.seed + self.round, draws=4000, corr=self.paired_corr()
        )
        m_audit = (self.audit & (self.y >= 0)).sum(axis=1)
        for p in np.flatnonzero(live & (self.status == "active")):
            enough = self.n_answered[p] >= self.min_items and m_audit[p] >= self.cfg.min_audit
            if enough and pb[p] < self.cfg.stop_p_best:
                self._stop(int(p), f"unlikely to be the best (P < {self.cfg.stop_p_best:g})")

    def _stop_if_decided(self) -> None:
        """Stop the last pipeline standing once every other measured one is eliminated."""
        if not self.cfg.eliminate:
            return
        standing = np.flatnonzero(np.isin(self.status, ["active", "stopped"]))
        if not (self.status == ELIMINATED).any() or len(standing) != 1:
            return
        last = int(standing[0])
        if self.status[last] == "active" and self.n_answered[last] >= self.min_items:
            self._stop(last, "the others are eliminated")

    @property
    def done(self) -> bool:
        """True when no pipeline is running."""
        return not (self.status == "active").any()

    def results(self) -> list[dict[str, Any]]:
        """One record per pipeline: status, ability, SE, full-exam accuracy estimate with its 95% interval."""
        acc, sd = self.accuracy()
        live = np.array(
            [
                self.status[p] != FAILED and self.n_answered[p] + (self.status[p] == PREDICTED) > 0
                for p in range(len(self.pipelines))
            ]
        )
        best = prob_best(np.where(live, acc, np.nan), sd, seed=self.seed, corr=self.paired_corr())
        m_audit = (self.audit & (self.y >= 0)).sum(axis=1)
        z = self.misfit.z if self.misfit is not None else np.zeros(len(self.pipelines))
        out = []
        for p, pid in enumerate(self.pipelines):
            st = str(self.status[p])
            status = st if st in (ELIMINATED, PREDICTED, FAILED) else MEASURED
            if status == MEASURED and self.n_asked[p] == 0:  # never asked (e.g. the budget ran out first)
                status = PREDICTED
            if status != FAILED and self.n_answered[p] == 0 and self.n_failed[p] > 0:  # asked, never answered
                status = FAILED
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
                    "p_best": float(best[p]) if ok and np.isfinite(best[p]) else math.nan,
                    "n_audit": int(m_audit[p]),
                    "audit_z": float(z[p]),
                    "estimate_basis": "audit" if self.design_only else "model+audit",
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
