"""The state of an adaptive run and the estimates it gives (no I/O, no scheduling decisions).

:class:`RunState` holds every pipeline's answers so far, its audit sample, its ability posterior
(EAP or MAP on a theta grid, pooled across the grid under the additive model of
:mod:`ragrade.adaptive.pool`) and its status; it turns them into full-exam accuracy estimates
(:meth:`RunState.accuracy`: observed answers plus the audit-corrected estimate of the rest, see
:mod:`ragrade.adaptive.estimate`) and the per-pipeline records of :meth:`RunState.results`.
:class:`~ragrade.adaptive.scheduler.Scheduler` adds what to ask next and when to stop.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.adaptive.estimate import (
    MIN_AUDIT_TEST,
    MisfitResult,
    additive_shrink,
    audit_stats,
    combine_checks,
    component_bias_check,
    largest_level_bias,
    leader_sd,
    misfit_check,
    paired_corr,
    prob_best,
    shrunk_bias_marginal,
)
from ragrade.adaptive.pool import design_matrix, design_subset, pooled_prior
from ragrade.irt import cat
from ragrade.run.adaptive_config import AdaptiveConfig

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


def stable_rng(seed: int, *parts: object) -> np.random.Generator:
    """A generator seeded by ``seed`` and ``parts`` (stable across processes and Python versions)."""
    digest = hashlib.sha256("\0".join(map(str, (seed, *parts))).encode()).hexdigest()
    return np.random.default_rng(int(digest[:16], 16))


class RunState:
    """Answers, audits, abilities and statuses of ``pipelines`` x ``params.items`` (see the module docstring).

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
        calibration_fit: MisfitResult | None = None,
    ) -> None:
        self.cfg, self.seed = cfg, seed
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
        self.order = np.array([stable_rng(seed, "audit", k).permutation(n_i) for k in keys]).reshape(n_p, n_i)
        self.misfit: MisfitResult | None = None
        self.tau = 0.0  # between-pipeline SD of the audit bias (empirical Bayes)
        full = n_p * n_i
        caps = [math.ceil(cfg.default_share * full)] if cfg.default_share is not None else []
        caps += [cfg.default_items * n_p] if cfg.default_items is not None else []
        self.budget = cfg.budget if cfg.budget is not None else min(caps, default=None)
        self.n_failed = np.zeros(n_p, dtype=np.int64)
        self.status = np.array(["active"] * n_p, dtype=object)
        self.reason = np.array([""] * n_p, dtype=object)
        self.factors = [dict(f) for f in factors] if factors else [{} for _ in self.pipelines]
        self.X, _ = design_matrix(self.factors)
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
        """True when the estimates rest on the sampled answers alone (no model).

        That is ``sample`` mode, or a run that fell back to sampling because its calibration data misfit
        (:func:`~ragrade.adaptive.calibration.misfit_fallback`).

        A misfit found in the run's own answers at the end keeps the model+audit estimate: its audit biases are
        shrunk with their spread integrated out (:func:`~ragrade.adaptive.estimate.shrunk_bias_marginal`), so a
        model that is wrong in different ways for different pipelines gets wide bias intervals, not a false
        precision; the audit-only estimate throws away every model-chosen answer (its interval is that of a
        random sample of 30% of the requests) and ranked worse than random sampling of the whole budget in
        ``bench_adaptive.py`` (two-ability truth, 10 and 20 pipelines: mean regret 2.9 and 2.2 points against
        0.7 and 1.1; with the model+audit estimate 1.4 and 0.5, coverage 0.94 and 0.96).
        """
        return not self.use_model

    @property
    def misfit_warning(self) -> bool:
        """The one-dimensional model does not describe the calibration data or this run's answers (any mode)."""
        calib = self.calibration_fit is not None and self.calibration_fit.warn
        return calib or (self.misfit is not None and self.misfit.warn)

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
        Otherwise the audit-corrected estimate of :mod:`ragrade.adaptive.estimate`: design-based when
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
        bias, var_bias, self.tau = shrunk_bias_marginal(bias_u, var_u, ok, self.model_error)
        est = (observed + exp_sum + unseen * bias) / n
        sd = np.sqrt(var / n**2 + (unseen / n) ** 2 * var_bias)
        est_u = (observed + exp_sum + unseen * bias_u) / n
        sd_u = np.sqrt(var / n**2 + (unseen / n) ** 2 * var_u)
        return est, leader_sd(est, sd, ok, est_u, sd_u, self.cfg.unshrunk_top)

    def check_fit(self, n_boot: int = 200, *, own_fit: bool = False) -> MisfitResult | None:
        """Run the misfit checks on this run's answers (model runs only); their Bonferroni minimum decides the warning.

        Two tests: the residual eigenvalue of :func:`~ragrade.adaptive.estimate.misfit_check` (a second ability as a
        pattern across questions) and :func:`~ragrade.adaptive.estimate.component_bias_check` (audit biases that
        differ between the grid's components: what a second ability does to the estimates). ``own_fit``: the items
        were fitted on this run's own answers (cold); the eigenvalue test is then left out (its statistic is still
        recorded): the fit absorbs the pattern it looks for, and a parametric bootstrap of the fitted model does not
        refit, so its p-values were 0.95 to 1.00 under one- and two-ability truths alike in ``bench_adaptive.py``
        (20 and 63 pipelines), and combining it would only halve the other test's level. The estimates stay
        model+audit either way (:attr:`design_only`).
        """
        if self.use_model:
            self.__dict__.pop("_acc_cache", None)
            alpha, phat = self.cfg.misfit_alpha, self.predictions()
            boots = 0 if own_fit else n_boot
            res = misfit_check(self.y, self.audit, phat, self.theta, alpha=alpha, seed=self.seed, n_boot=boots)
            held = self.predictions(self.held_out_weights())
            st = audit_stats(self.y, self.audit, held, np.full(len(self.pipelines), self.y.shape[1]))
            ok = st.m >= MIN_AUDIT_TEST
            _, p_comp, _ = component_bias_check(st.mean_resid, st.var_design, ok, self.X, self.theta)
            parts = (
                {"component_bias": p_comp}
                if own_fit
                else {"residual_eigenvalue": res.p_value, "component_bias": p_comp}
            )
            largest = largest_level_bias(st.mean_resid, st.var_design, ok, self.theta, self.factors)
            if largest[0] and np.isfinite(p_comp):
                res.largest = largest
            self.misfit = combine_checks(res, parts, alpha)
        return self.misfit

    def paired_corr(self) -> F64 | None:
        """Correlations of the estimates when they rest on paired questions (``sample`` mode), else None."""
        if self.use_model:
            return None
        use = self.audit & (self.y >= 0)
        return paired_corr(self.y, use, self.audit_pos, self.y.shape[1])

    @property
    def done(self) -> bool:
        """True when no pipeline is running."""
        return not (self.status == "active").any()

    def reported_accuracy(self) -> tuple[F64, F64]:
        """The estimates a run reports: :meth:`accuracy`, shrunk toward the additive model when design-based.

        Without a model (``sample``) every pipeline's estimate is its own sample mean, while the grid's factors
        explain most of the differences between pipelines; :func:`~ragrade.adaptive.estimate.additive_shrink`
        pools them (the pipeline-specific deviation's spread integrated out, the paired samples' correlation
        in the error covariance); every interval also holds the pipeline's own sample-mean interval
        (:func:`~ragrade.adaptive.estimate.leader_sd` over all of them), so pooling moves the point estimates
        (smaller errors, a better pick) without costing coverage. Decisions during the run (stopping, elimination) use
        the unshrunk design-based estimates and their simultaneous bounds; only the final report is pooled. A grid
        whose additive fit leaves fewer than :data:`~ragrade.adaptive.estimate.MIN_POOL_DF` residual degrees of
        freedom (a 2 x 2 grid leaves one) cannot estimate its interactions' spread: it is pooled under a flat
        prior on that spread, which does not favour pooling everything onto the additive fit.
        """
        acc, sd = self.accuracy()
        if not self.design_only or self.X.shape[1] < 2:
            return acc, sd
        ok = (self.n_answered >= 2) & (sd > 0) & np.isin(self.status, ["active", "stopped", ELIMINATED])
        est, sd_s, _ = additive_shrink(acc, sd, ok, self.X, self.paired_corr())
        # every interval also holds the pipeline's own sample-mean interval: the additive model need not hold
        # (a two-ability truth), and pooling must not cost coverage (in bench_adaptive.py, 2d-20x300 with a
        # misfitting calibration file, pooled intervals alone covered 0.91 against 0.95 for the sample means)
        return est, leader_sd(est, sd_s, ok, acc, sd, int(ok.sum()))

    def results(self) -> list[dict[str, Any]]:
        """One record per pipeline: status, ability, SE, full-exam accuracy estimate with its 95% interval."""
        acc, sd = self.reported_accuracy()
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


__all__ = ["ELIMINATED", "FAILED", "MEASURED", "PREDICTED", "ItemParams", "RunState", "stable_rng"]
