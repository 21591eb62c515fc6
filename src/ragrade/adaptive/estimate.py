"""Honest estimates of an adaptive run: the audit sample, misfit checks, selection-adjusted bounds.

The IRT model chooses the items; it does not get the last word on the accuracy.
Each pipeline also answers an *audit sample*: items drawn uniformly at random
from those it has not been asked (a share of every batch; :mod:`ragrade.adaptive.scheduler`).
The full-grid accuracy of a pipeline is ``(sum of its observed answers + sum of
its unobserved answers) / N``; only the unobserved part ``U`` is estimated:

* model-based: the IRT-expected score on ``U`` (posterior mean, with the
  posterior and binomial variance), corrected by the *audit bias*: the mean
  residual ``y - p`` of the audit answers, shrunk across pipelines by
  hierarchical Bayes (:func:`shrunk_bias_marginal`: the spread of the biases
  integrated out, not plugged in). With a model that fits, the between-pipeline
  spread of the audit means is what their sampling noise explains, the
  correction shrinks to 0 and the interval is the model's; with one that
  does not, the correction approaches the plain audit mean and the interval
  widens by its uncertainty;
* design-based: the difference estimator ``sum_U p + |U| * mean_audit(y - p)``,
  whose error is ``M (mean_M(r) - mean_audit(r))`` with the finite-population
  variance ``M^2 (1 - m / M) s^2 / m`` (``M = |U| + m``), valid whatever the model
  (the audit is a uniform sample of the items not chosen by the model).
  It is what a ``sample`` run (no model: ``p = 0``) always reports, and a run
  whose calibration data misfit (it samples at random instead). A misfit found
  in the run's own answers keeps the model-based estimate: the integrated
  spread of the audit biases already widens its intervals by what the audits
  cannot rule out, where the audit sample alone discards every answer the
  model chose.

:func:`misfit_check` tests the audit residuals (standardised, centred per item)
for structure the model leaves out, with a parametric bootstrap of the model
itself: the largest eigenvalue of their pipeline x pipeline cross-product (a
second ability shows up as a rank-one pattern; a biased accuracy as a shifted
row); :func:`component_bias_check` tests whether the audit biases differ between the grid's components
(what a second ability does to the estimates). :func:`elimination_z` gives the anytime-valid, selection-adjusted width
used to drop pipelines; :func:`prob_best` the probability that each pipeline
is the best. :func:`additive_shrink` pools design-based estimates (``sample`` runs) over the grid's
factors for the final report; :func:`paired_corr` gives their correlations (paired questions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
B8 = npt.NDArray[np.bool_]


@dataclass
class AuditStats:
    """Per pipeline: audit answers ``m``, mean residual, its design variance, and the model's variance of it."""

    m: npt.NDArray[np.int64]
    mean_resid: F64
    var_design: F64  # of the audit mean residual around that of the audit's population (fpc applied)
    var_model: F64  # the same if the model were right (binomial only)
    population: npt.NDArray[np.int64]  # items the audit is a simple random sample of


def audit_stats(y: npt.NDArray[np.int8], audit: B8, phat: F64, population: npt.NDArray[np.int64]) -> AuditStats:
    """Audit residual statistics of every pipeline (``y``: 1/0/-1; ``audit``: audit items; ``phat``: predictions).

    ``population``: the number of items the audit is a simple random sample of (the exam).
    """
    use = audit & (y >= 0)
    m = use.sum(axis=1)
    r = np.where(use, y - phat, 0.0)
    mm = np.maximum(m, 1)
    mean = r.sum(axis=1) / mm
    ss = np.where(use, (r - mean[:, None]) ** 2, 0.0).sum(axis=1)
    s2 = np.where(m >= 2, ss / np.maximum(m - 1, 1), 0.25)
    # never below what the answers' own spread allows: the model's binomial variance of a residual, or (no
    # model) the Bernoulli variance at the plus-two mean; a few identical answers do not prove precision
    right = np.where(use, y == 1, False).sum(axis=1)
    smooth = (right + 1.0) / (m + 2.0)
    pq_mean = np.where(use, phat * (1.0 - phat), 0.0).sum(axis=1) / mm
    no_model = ~np.where(use, phat > 0, False).any(axis=1)
    s2 = np.maximum(s2, np.where(no_model, smooth * (1.0 - smooth), pq_mean))
    fpc = 1.0 - m / np.maximum(population, 1)
    var_design = np.where(m > 0, s2 / mm * fpc, 0.25)
    var_model = np.where(m > 0, pq_mean / mm * fpc, 0.25)
    return AuditStats(m, np.where(m > 0, mean, 0.0), var_design, var_model, population)


def shrunk_bias(
    mean: F64, var: F64, ok: B8, floor: float = 0.0, covariate: F64 | None = None
) -> tuple[F64, F64, float]:
    """Empirical-Bayes audit bias per pipeline: ``N(mu, tau^2)`` prior, mu and tau by the method of moments.

    ``mu`` is the grid-wide bias (e.g. a calibration from another grid that under-predicts every
    pipeline), linear in ``covariate`` when given (the ability: calibration error weighs most in the
    tails); ``tau`` the spread around it (at least ``floor``). Returns the posterior means, their
    variances (including the uncertainty of ``mu``) and tau. Pipelines outside ``ok`` (too few audit
    answers) get the prior.
    """
    k = int(ok.sum())
    if k < 2:
        return np.zeros_like(mean), np.full(len(mean), floor**2), floor
    cols = [np.ones(len(mean))] + ([covariate] if covariate is not None and k >= 4 else [])
    X = np.column_stack(cols)
    tau2 = floor**2
    for _ in range(4):  # weighted least squares for mu, moments for tau, alternately
        w0 = 1.0 / (np.maximum(var[ok], 1e-9) + tau2)
        A = X[ok].T @ (w0[:, None] * X[ok])
        cov = np.linalg.pinv(A)
        beta = cov @ (X[ok].T @ (w0 * mean[ok]))
        resid = mean[ok] - X[ok] @ beta
        tau2 = max(floor**2, float((resid**2 - var[ok]).sum()) / max(1, k - X.shape[1]))
    mu = X @ beta
    var_mu = np.einsum("ij,jk,ik->i", X, cov, X)
    w = np.where(ok, tau2 / (tau2 + var), 0.0) if tau2 > 0 else np.zeros(len(mean))
    post = mu + w * (mean - mu)
    post_var = np.where(ok, w * var, tau2) + (1.0 - w) ** 2 * var_mu
    return post, post_var, float(np.sqrt(tau2))


def shrunk_bias_marginal(
    mean: F64,
    var: F64,
    ok: B8,
    floor: float = 0.0,
    covariate: F64 | None = None,
    taus: F64 | None = None,
) -> tuple[F64, F64, float]:
    """:func:`shrunk_bias` with ``tau`` integrated out instead of plugged in (hierarchical Bayes).

    The same model (``mean_p ~ N(x_p' beta, var_p + tau^2)``, flat prior on ``beta``) with equal prior weights
    on the points ``taus`` (default: 100 points spaced evenly in ``log tau`` from ``floor`` (at least 1e-4) to
    the spread of the means plus two typical SDs: the scale-free prior ``1 / tau``; a flat prior on ``tau``
    widened 20 x 300 file-calibrated intervals by 18% in ``bench_adaptive.py``, this one by 3%). Given
    ``tau``, each pipeline's posterior is that of :func:`shrunk_bias`; its weight is the
    restricted likelihood ``prod w_p^(1/2) |X'WX|^(-1/2) exp(-sum w_p e_p^2 / 2)`` (``w_p = 1 / (var_p +
    tau^2)``, ``e`` the GLS residuals). The posterior variance adds the spread of the conditional means
    over ``tau``: with few pipelines and noisy audits a moment estimate of ``tau`` is often at its floor and
    shrinks real per-pipeline biases (a cold-start calibration errs differently for different abilities)
    into the grid-wide one, so every interval of a seed misses together; the integrated ``tau`` keeps what
    the audits cannot rule out. Returns the posterior means, variances and the posterior mean of ``tau``.
    """
    k = int(ok.sum())
    if k < 2:
        return np.zeros_like(mean), np.full(len(mean), floor**2), floor
    cols = [np.ones(len(mean))] + ([covariate] if covariate is not None and k >= 4 else [])
    X = np.column_stack(cols)
    x, v, Xo = mean[ok], np.maximum(var[ok], 1e-12), X[ok]
    if taus is None:
        top = max(2 * floor, float(np.ptp(x)) + 2 * float(np.sqrt(np.median(v))), 1e-3)
        lo = max(floor, 1e-4)
        taus = np.geomspace(lo, max(top, 2 * lo), 100)
    logl = np.empty(len(taus))
    post = np.empty((len(taus), len(mean)))
    post_var = np.empty((len(taus), len(mean)))
    for j, tau in enumerate(taus):
        w0 = 1.0 / (v + tau**2)
        A = Xo.T @ (w0[:, None] * Xo)
        cov = np.linalg.pinv(A)
        beta = cov @ (Xo.T @ (w0 * x))
        logl[j] = 0.5 * (np.log(w0).sum() - np.linalg.slogdet(A)[1] - (w0 * (x - Xo @ beta) ** 2).sum())
        mu, var_mu = X @ beta, np.einsum("ij,jk,ik->i", X, cov, X)
        w = np.where(ok, tau**2 / (tau**2 + var), 0.0) if tau > 0 else np.zeros(len(mean))
        post[j] = mu + w * (mean - mu)
        post_var[j] = np.where(ok, w * var, tau**2) + (1.0 - w) ** 2 * var_mu
    pw = np.exp(logl - logl.max())
    pw /= pw.sum()
    m = pw @ post
    return m, pw @ post_var + pw @ (post - m) ** 2, float(pw @ taus)


MIN_POOL_DF = 3  # residual degrees of freedom below which the interactions' spread gets a flat prior (Stein)


def additive_shrink(
    est: F64,
    sd: F64,
    ok: B8,
    X: F64,
    corr: F64 | None = None,
    taus: F64 | None = None,
    min_df: int = MIN_POOL_DF,
) -> tuple[F64, F64, float]:
    """Design-based estimates shrunk toward the grid's additive model, ``tau`` integrated out.

    The model: ``est = X beta + u + e`` with ``u ~ N(0, tau^2 I)`` (a pipeline's deviation from the sum of
    its factor levels' effects) and ``e ~ N(0, S)``, ``S = D corr D`` (``D = diag(sd)``; paired questions
    make the sampling errors correlated). Given ``tau``, the best linear unbiased predictor of each
    pipeline's accuracy ``X beta + u`` is ``M est`` with ``M = X (X'V^-1 X)^-1 X'V^-1 + tau^2 P``
    (``V = S + tau^2 I``, ``P = V^-1 - V^-1 X (X'V^-1 X)^-1 X'V^-1``), and its error ``(M - I) u + M e``
    has the covariance ``tau^2 (M - I)(M - I)' + M S M'``, exact under the model whatever ``corr``. ``tau``
    is weighted on a grid (default: 60 points spaced evenly in ``log tau`` from 1e-3 to the spread of the
    estimates plus two SDs) by the restricted likelihood times its prior (given ``taus``: equal prior weights
    on them, times ``tau`` where the prior is flat); the result is the mixture's mean and variance. Only the
    pipelines in ``ok`` enter (the others are returned unchanged); with no more of them than the rank of their
    design there is nothing to shrink toward (returned unchanged, tau NaN).

    How far to pool is the data's call through ``tau`` (the interactions' spread), which the residuals of the
    additive fit estimate with ``n - rank`` degrees of freedom. From ``min_df`` of them on, ``tau`` gets the
    scale-free prior ``1 / tau`` of :func:`shrunk_bias_marginal`. With fewer, the restricted likelihood is
    nearly flat below the sampling SD, so the posterior is mostly the prior, and ``1 / tau`` keeps most of
    its mass near 0: every pipeline pooled onto the additive fit whatever the interactions. There ``tau``
    gets a flat prior instead (no scale favoured; the pooling is what the residuals support, averaged over
    the interaction spreads they cannot rule out). Three is Stein's bound: for normal estimates of known,
    equal variance, shrinking ``n`` means toward a fitted subspace of rank ``r`` lowers their total squared
    error whatever the truth only when ``n - r >= 3``; a 2 x 2 grid leaves one. In ``bench_adaptive.py``
    (4 x 300, ``sample``, 40 seeds) the mean regret under the two-ability truth was 0.21 points with the
    scale-free prior, 0.03 with this one (and with no pooling); under the one-ability truth 0.73, 0.98 and
    1.27 (pooling the additive fit is right there, and the data cannot tell the two apart). A flat prior
    on larger grids did not help (2 x 5, one- and two-ability: mean regret 0.81 and 0.70 with the scale-free
    prior, 0.80 and 0.80 with the flat one). Returns the estimates, their SDs and the posterior mean of ``tau``.
    """
    idx = np.flatnonzero(ok)
    Xo = X[idx]
    rank = int(np.linalg.matrix_rank(Xo)) if len(idx) else 0
    if len(idx) <= rank or rank == 0:
        return est.copy(), sd.copy(), float("nan")
    flat = len(idx) - rank < min_df  # too few residual df to estimate tau: a flat prior on it, not 1 / tau
    y, d = est[idx], np.maximum(sd[idx], 1e-6)
    C = np.eye(len(idx)) if corr is None else corr[np.ix_(idx, idx)]
    if corr is not None:  # pairwise estimates need not form a valid correlation matrix: its nearest PSD one
        vals, vecs = np.linalg.eigh((C + C.T) / 2.0)
        C = (vecs * np.clip(vals, 1e-6, None)) @ vecs.T
        C = C / np.sqrt(np.outer(np.diag(C), np.diag(C)))
    S = C * np.outer(d, d)
    if taus is None:
        taus = np.geomspace(1e-3, max(2e-3, float(np.ptp(y)) + 2.0 * float(np.median(d))), 60)
    eye = np.eye(len(idx))
    logl = np.empty(len(taus))
    post = np.empty((len(taus), len(idx)))
    var = np.empty((len(taus), len(idx)))
    for j, tau in enumerate(taus):
        V = S + tau**2 * eye
        Vi = np.linalg.pinv(V)
        A = Xo.T @ Vi @ Xo
        Ai = np.linalg.pinv(A)
        H = Xo @ Ai @ Xo.T @ Vi  # the GLS fit: H y = X beta_hat
        P = Vi - Vi @ Xo @ Ai @ Xo.T @ Vi
        M = H + tau**2 * P
        post[j] = M @ y
        E = M - eye
        var[j] = np.diag(tau**2 * E @ E.T + M @ S @ M.T)
        (sv, ldv), (sa, lda) = np.linalg.slogdet(V), np.linalg.slogdet(A)
        ll = -0.5 * (ldv + lda + float(y @ P @ y))
        ll += float(np.log(tau)) if flat else 0.0  # the grid is even in log tau: d tau = tau d log tau
        logl[j] = ll if sv > 0 and sa > 0 and np.isfinite(ll) and np.isfinite(post[j]).all() else -np.inf
    if not np.isfinite(logl).any():  # degenerate (e.g. singular covariances): nothing trustworthy to pool with
        return est.copy(), sd.copy(), float("nan")
    w = np.exp(logl - logl.max())
    w /= w.sum()
    mean = w @ post
    out_est, out_sd = est.copy(), sd.copy()
    out_est[idx] = mean
    out_sd[idx] = np.sqrt(np.maximum(w @ var + w @ (post - mean) ** 2, 0.0))
    return out_est, out_sd, float(w @ taus)


@dataclass
class MisfitResult:
    """The audit misfit check: statistic, bootstrap p-value, whether to warn, standardised audit bias.

    ``parts``: where the check combines several tests (a run's own answers: :func:`misfit_check` and
    :func:`component_bias_check`), each one's p-value by name; ``p_value`` is then their Bonferroni minimum.
    """

    statistic: float
    p_value: float
    warn: bool
    n_audit: int
    z: F64  # per pipeline: mean audit residual / its model SD
    parts: dict[str, float] = field(default_factory=dict)
    # the factor level whose audits depart most from the model: label, mean residual, z (:func:`largest_level_bias`)
    largest: tuple[str, float, float] | None = None


def _top_eig(Z: F64, mask: B8, theta: F64 | None, share: bool = False) -> F64:
    """Largest eigenvalue of ``Zc Zc' / n`` per replicate (``Z``: (B, P, I)); ``share``: over the mean eigenvalue.

    ``Zc``: each item's standardised residuals with their regression on ``[1, theta]`` over the pipelines
    that answered it removed: what a mis-estimated difficulty or discrimination leaves (an item-wide shift,
    a slope along the one ability) is taken out; a second ability is not.
    """
    m = mask.astype(np.float64)
    t = np.zeros((mask.shape[0], 1)) if theta is None else theta[:, None]
    s0, s1, s2 = m.sum(axis=0), (m * t).sum(axis=0), (m * t * t).sum(axis=0)
    sy, sty = (Z * m).sum(axis=-2), (Z * m * t).sum(axis=-2)
    det = s0 * s2 - s1**2
    safe = np.where(det > 1e-9, det, 1.0)
    slope = np.where(det > 1e-9, (s0 * sty - s1 * sy) / safe, 0.0)
    icpt = (sy - slope * s1) / np.maximum(s0, 1.0)
    Zc = np.where(mask, Z - icpt[..., None, :] - slope[..., None, :] * t, 0.0)
    C = Zc @ np.swapaxes(Zc, -1, -2) / max(1, int(mask.any(axis=0).sum()))
    eig = np.linalg.eigvalsh(C)
    if share:  # the top eigenvalue against the average one: a uniform shrinkage of the residuals cancels
        return np.asarray(eig[..., -1] / np.maximum(eig.mean(axis=-1), 1e-12))
    return np.asarray(eig[..., -1])


def misfit_check(
    y: npt.NDArray[np.int8],
    audit: B8,
    phat: F64,
    theta: F64,
    *,
    alpha: float,
    seed: int = 0,
    n_boot: int = 200,
    min_per_item: int = 4,
    slope: bool = True,
    share: bool = False,
) -> MisfitResult:
    """Do the answers look like draws from the fitted one-dimensional model? (parametric bootstrap).

    Uses every answered item that at least ``min_per_item`` pipelines answered (audit or not); the
    per-pipeline ``z`` is the standardised mean residual of the audit answers alone. ``slope``: also
    remove each item's residual slope along ``theta`` (items calibrated elsewhere; not needed on the data
    that calibrated them, where it would only cost power). ``n_boot = 0``: the statistic and ``z`` only (p-value
    NaN, no warning). ``share``: the statistic is the top eigenvalue
    over the mean eigenvalue (for data that also fitted the items: the fit shrinks every residual
    direction, which makes the plain top eigenvalue conservative, but leaves their ratio alone).
    """
    answered = y >= 0
    cols = answered.sum(axis=0) >= min_per_item
    rows = answered[:, cols].sum(axis=1) >= 2
    use = answered
    z = np.zeros(len(y))
    if rows.sum() < 3 or cols.sum() < 2:
        return MisfitResult(float("nan"), float("nan"), False, int((audit & answered).sum()), z)
    mask = use[np.ix_(rows, cols)]
    p = np.clip(phat[np.ix_(rows, cols)], 0.02, 0.98)
    sd = np.sqrt(p * (1.0 - p))
    obs = np.where(mask, (y[np.ix_(rows, cols)] - p) / sd, 0.0)
    th = theta[rows] if slope else None
    stat = float(_top_eig(obs[None], mask, th, share)[0])
    rng = np.random.default_rng(seed)
    boot = []
    for start in range(0, n_boot, 25):  # bounded temporaries on large grids
        sims = (rng.random((min(25, n_boot - start), *p.shape)) < p).astype(np.float64)
        boot.append(_top_eig(np.where(mask, (sims - p) / sd, 0.0), mask, th, share))
    pval = float((1 + (np.concatenate(boot) >= stat).sum()) / (n_boot + 1)) if boot else float("nan")
    aud = audit & answered
    pa = np.clip(phat, 0.02, 0.98)
    num = np.where(aud, y - pa, 0.0).sum(axis=1)
    den = np.sqrt(np.maximum(np.where(aud, pa * (1 - pa), 0.0).sum(axis=1), 1e-9))
    z = np.where(aud.any(axis=1), num / den, 0.0)
    return MisfitResult(stat, pval, bool(pval < alpha), int(aud.sum()), z)


def calibration_check(
    R: npt.NDArray[np.int8], d: F64, b: F64, g: F64, *, alpha: float, seed: int = 0, n_boot: int = 400
) -> MisfitResult:
    """The misfit check on calibration data (pipelines x items, -1 missing) under the calibrated items.

    Abilities are EAP estimates under N(0, 1) with the given items; a second ability in the data that
    calibrated the items shows here far more clearly than in a run's sparse answers. The statistic is
    the top eigenvalue's share (``share=True`` of :func:`misfit_check`): these answers also fitted the
    items, which shrinks the plain top eigenvalue below the bootstrap's (in ``bench_adaptive.py`` on
    63 x 300 calibration data with a one-dimensional truth its p-values were 0.54 to 1.0, the share's
    0.27 to 1.0; with a two-dimensional truth the share is below 0.02 in 18 of 20 seeds, the plain
    eigenvalue in 16).
    """
    from ragrade.irt import cat

    grid = cat.theta_points()
    P, _ = cat.grid_probabilities(grid, d, b, g)
    logp, logq = np.log(np.clip(P, 1e-12, 1.0)), np.log(np.clip(1.0 - P, 1e-12, 1.0))
    ll = (R == 1).astype(np.float64) @ logp + (R == 0).astype(np.float64) @ logq
    theta, _, w = cat.eap(grid, ll, np.zeros(len(R)), np.ones(len(R)))
    phat = w @ P.T
    return misfit_check(R, R >= 0, phat, theta, alpha=alpha, seed=seed, n_boot=n_boot, slope=False, share=True)


MIN_AUDIT_TEST = 5  # audit answers a pipeline needs to enter the component-bias test


def component_bias_check(mean: F64, var: F64, ok: B8, X: F64, theta: F64) -> tuple[float, float, int]:
    """Do the model's audit biases differ between the grid's components beyond what the abilities explain?

    ``mean``, ``var``: each pipeline's mean audit residual (answer minus the model's held-out prediction) and its
    design variance; ``X``: the grid's design (intercept and factor levels,
    :func:`~ragrade.adaptive.pool.design_matrix`); only the pipelines in ``ok`` enter. Null model: the bias is
    ``a + b theta`` (a grid-wide bias, e.g. items calibrated on another grid, and a calibration error that grows
    toward the tails of the ability scale); alternative: plus an effect per factor level. The statistic is the drop
    in the weighted residual sum of squares (weights ``1 / var``), chi-square with the difference in rank as degrees
    of freedom under the null. Returns the statistic, its p-value and the degrees of freedom (NaN, NaN, 0 where the
    grid has no factors or too few pipelines).

    Why: a second ability can bias the estimates by component (an LLM strong on the questions the one ability does
    not describe is mispredicted in every pipeline it is part of), and the audit pools the answers of every pipeline
    that shares the component. It looks at what matters: a second ability that leaves the audits unbiased (the
    ability estimate averages it out) changes no estimate and is not flagged here. In ``bench_adaptive.py`` (40 seeds
    per scenario), two-ability 63 x 1,000 grids without a calibration file warned in 13 of 40 seeds (none before this
    test; the one seed whose intervals covered under 90% with no warning now warns), one-ability runs in 4 of 320 over
    every scenario (1 of 40 cold 63 x 1,000). On 300-question grids of 4 to 20 pipelines neither test finds a second
    ability without a calibration file (it averages out over the few questions a pipeline is asked).
    """
    idx = np.flatnonzero(ok & np.isfinite(mean) & (var > 0))
    if X.shape[1] < 2 or len(idx) < 4:
        return float("nan"), float("nan"), 0
    w, y = 1.0 / var[idx], mean[idx]
    h0 = np.column_stack([np.ones(len(idx)), theta[idx]])
    h1 = np.column_stack([X[idx], theta[idx]])
    e0, e1 = _wls_residuals(h0, y, w), _wls_residuals(h1, y, w)
    r0, r1 = float((w * e0 * e0).sum()), float((w * e1 * e1).sum())
    k0, k1 = int(np.linalg.matrix_rank(h0)), int(np.linalg.matrix_rank(h1))
    df = k1 - k0
    if df < 1 or len(idx) <= k1:
        return float("nan"), float("nan"), 0
    from scipy.stats import chi2

    stat = max(0.0, r0 - r1)
    return stat, float(chi2.sf(stat, df)), df


def _wls_residuals(D: F64, y: F64, w: F64) -> F64:
    """Residuals of the weighted least-squares fit of ``y`` on the columns of ``D`` (weights ``w``)."""
    return np.asarray(y - D @ (np.linalg.pinv(D.T @ (w[:, None] * D)) @ (D.T @ (w * y))))


def largest_level_bias(
    mean: F64, var: F64, ok: B8, theta: F64, factors: Sequence[Mapping[str, object]]
) -> tuple[str, float, float]:
    """The factor level whose pipelines' audit biases depart most from the null model ``a + b theta``.

    Per level ``name=value``: the weighted mean (weights ``1 / var``) of its pipelines' residuals from the null fit
    of :func:`component_bias_check`, and that mean over its SD. Returns the label, the mean and the z of the level
    with the largest ``|z|`` (``"", nan, nan`` when there is nothing to compare).
    """
    idx = np.flatnonzero(ok & np.isfinite(mean) & (var > 0))
    if len(idx) < 3 or not factors:
        return "", float("nan"), float("nan")
    w = 1.0 / var[idx]
    r = _wls_residuals(np.column_stack([np.ones(len(idx)), theta[idx]]), mean[idx], w)
    best = ("", float("nan"), 0.0)
    for name in sorted({k for f in factors for k in f}):
        values = np.array([str(factors[int(i)].get(name, "")) for i in idx])
        if len(set(values)) < 2:
            continue
        for value in sorted(set(values)):
            sel = values == value
            m = float((w[sel] * r[sel]).sum() / w[sel].sum())
            z = m * float(np.sqrt(w[sel].sum()))
            if abs(z) > abs(best[2]):
                best = (f"{name}={value}", m, z)
    return best if best[0] else ("", float("nan"), float("nan"))


def sig4(x: float) -> float | None:
    """``x`` to four significant digits for a file (a p-value of 6e-06 stays 6e-06, not 0.0); None for NaN."""
    return None if not np.isfinite(x) else float(f"{x:.4g}")


def combine_checks(res: MisfitResult, parts: dict[str, float], alpha: float) -> MisfitResult:
    """``res`` with the p-values of ``parts`` (NaN ones left out) joined by Bonferroni: warn when the minimum
    p-value times the number of tests is below ``alpha``."""
    known = {k: v for k, v in parts.items() if np.isfinite(v)}
    if not known:
        return res
    p = min(1.0, len(known) * min(known.values()))
    return MisfitResult(res.statistic, p, p < alpha, res.n_audit, res.z, known, res.largest)


def elimination_z(alpha: float, n_pipelines: int, round_no: int) -> float:
    """One-sided normal quantile for eliminating at round ``round_no``: Bonferroni over pipelines, union over rounds.

    Every pipeline's interval holds at every round with probability at least ``1 - alpha``
    (``alpha_r = alpha / (K r (r + 1))`` sums to ``alpha / K`` over rounds), so a pipeline whose upper
    bound falls below another's lower bound is worse, and the best is never dropped, whatever the
    stopping times and whichever pipeline leads.
    """
    a = alpha / (max(1, n_pipelines) * round_no * (round_no + 1))
    return NormalDist().inv_cdf(1.0 - a)


def prob_best(est: F64, sd: F64, seed: int = 0, draws: int = 20_000, corr: F64 | None = None) -> F64:
    """Probability that each pipeline has the highest full-grid accuracy (normal estimates).

    Independent unless ``corr`` (their correlation matrix, e.g. :func:`paired_corr`) is given.
    """
    ok = np.isfinite(est) & np.isfinite(sd)
    out = np.full(len(est), np.nan)
    if not ok.any():
        return out
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((draws, int(ok.sum())))
    if corr is not None:
        vals, vecs = np.linalg.eigh(corr[np.ix_(ok, ok)])
        z = z @ (vecs * np.sqrt(np.clip(vals, 0.0, None))).T  # a positive semi-definite square root
    x = est[ok] + np.maximum(sd[ok], 1e-9) * z
    out[ok] = np.bincount(x.argmax(axis=1), minlength=int(ok.sum())) / draws
    return out


def paired_corr(y: npt.NDArray[np.int8], use: B8, prefix: npt.NDArray[np.int64], population: int) -> F64:
    """Correlation of the sample means of pipelines whose samples are prefixes of one random order.

    ``use``: the answers in each pipeline's sample; ``prefix``: each sample's length along the common order
    (nested simple random samples). For nested samples ``A`` in ``B`` the means' covariance is
    ``S_pq (1/|B| - 1/N)`` against the variances ``S_p^2 (1/|A| - 1/N)``, ``S_q^2 (1/|B| - 1/N)``; ``S_pq``
    and the ``S`` are estimated on the items both answered. Paired questions make the differences between
    pipelines far more precise than their intervals alone suggest.
    """
    U = use.astype(np.float64)
    Y = np.where(use, y, 0).astype(np.float64)
    # over the items both answered, per pair: count, sums, sums of squares and cross-products (matrix products)
    k = U @ U.T
    kk = np.maximum(k, 1.0)
    mean_a, mean_b = (Y @ U.T) / kk, (U @ Y.T) / kk  # [p, q]: p's (resp. q's) mean on the common items
    var_a = np.maximum((Y * Y) @ U.T / kk - mean_a**2, 0.0)
    var_b = np.maximum(U @ (Y * Y).T / kk - mean_b**2, 0.0)
    cov = (Y @ Y.T) / kk - mean_a * mean_b
    ok = (k >= 3) & (var_a > 1e-12) & (var_b > 1e-12)
    rho = np.where(ok, cov / np.sqrt(np.where(ok, var_a * var_b, 1.0)), 0.0)
    n = np.maximum(prefix.astype(np.float64), 1.0)
    small, big = np.minimum.outer(n, n), np.maximum.outer(n, n)
    nest = (1 / big - 1 / population) / np.maximum(1 / small - 1 / population, 1e-12)
    out = rho * np.sqrt(np.clip(nest, 0.0, 1.0))
    np.fill_diagonal(out, 1.0)
    return np.asarray(out)


def leader_sd(est: F64, sd: F64, ok: B8, est_u: F64, sd_u: F64, top: int) -> F64:
    """SDs whose 95% interval around the shrunk ``est`` also holds the unshrunk one, for the ``top`` leaders.

    Shrinking the audit bias toward the grid-wide one pulls the extremes in, so the leaders (the
    pipelines a user acts on) would be covered least; their interval also holds the unshrunk,
    design-unbiased one (``est_u +- 1.96 sd_u``: their own audit correction), whatever the model.
    """
    k = min(int(ok.sum()), top)
    if k <= 0:
        return sd
    lead = ok & (est >= np.sort(np.where(ok, est, -np.inf))[-k])
    reach = (np.abs(est_u - est) + 1.96 * sd_u) / 1.96
    return np.where(lead, np.maximum(sd, reach), sd)


def pair_gaps(acc: F64, sd: F64, z: float, corr: F64 | None) -> F64:
    """``[p, q]``: the lower bound of ``acc[q] - acc[p]`` (elimination drops ``p`` when it is above the margin).

    Independent estimates: ``q``'s lower bound minus ``p``'s upper bound. Paired ones (``corr``): the
    one-sided bound of the difference itself, so a pipeline's comparisons share its ``alpha``.
    """
    if corr is None:
        return (acc - z * sd)[None, :] - (acc + z * sd)[:, None]
    sd_diff = np.sqrt(np.maximum(sd[:, None] ** 2 + sd[None, :] ** 2 - 2 * corr * np.outer(sd, sd), 0.0))
    return np.asarray(acc[None, :] - acc[:, None] - z * sd_diff)


def smallest_useful_budget(n_pipelines: int, per_pipeline: int = 2) -> int:
    """The fewest requests that give every pipeline an estimate with an interval (two answers each)."""
    return n_pipelines * per_pipeline


__all__ = [
    "MIN_AUDIT_TEST",
    "MIN_POOL_DF",
    "AuditStats",
    "MisfitResult",
    "additive_shrink",
    "audit_stats",
    "calibration_check",
    "combine_checks",
    "component_bias_check",
    "elimination_z",
    "largest_level_bias",
    "leader_sd",
    "misfit_check",
    "pair_gaps",
    "paired_corr",
    "prob_best",
    "shrunk_bias",
    "shrunk_bias_marginal",
    "sig4",
    "smallest_useful_budget",
]
