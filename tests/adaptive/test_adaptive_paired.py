"""Paired comparisons in sample mode and the leaders' intervals (no I/O; reference values worked by hand)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest
from tests.support.adaptive_sim import adaptive_on_matrix, simulate_grid

from ragrade.adaptive import AdaptiveConfig, ItemParams, Scheduler
from ragrade.adaptive.estimate import additive_shrink, leader_sd, pair_gaps, paired_corr, prob_best


def test_paired_correlation_of_nested_samples_by_hand() -> None:
    # 10 questions, one random order (here 0..9); pipeline 0 answered the first 4, pipeline 1 the first 8
    y = np.array([[1, 0, 1, 1, -1, -1, -1, -1, -1, -1], [1, 0, 0, 1, 1, 0, 1, 1, -1, -1]], dtype=np.int8)
    use = y >= 0
    a, b = np.array([1.0, 0, 1, 1]), np.array([1.0, 0, 0, 1])  # the four questions both answered
    rho = np.corrcoef(a, b)[0, 1]  # 1 / sqrt(3)
    assert rho == pytest.approx(1 / np.sqrt(3))
    # Cov(means) = S_pq (1/8 - 1/10); Var = S_p^2 (1/4 - 1/10), S_q^2 (1/8 - 1/10)
    want = rho * np.sqrt((1 / 8 - 1 / 10) / (1 / 4 - 1 / 10))
    corr = paired_corr(y, use, np.array([4, 8]), 10)
    assert corr[0, 1] == pytest.approx(want) and corr[1, 0] == corr[0, 1] and corr[0, 0] == 1.0
    same = paired_corr(y, use, np.array([4, 4]), 10)  # equal prefixes: the plain correlation
    assert same[0, 1] == pytest.approx(rho)
    flat = paired_corr(
        np.array([[1, 1, 1, 1], [1, 0, 1, 0]], dtype=np.int8), np.ones((2, 4), bool), np.array([4, 4]), 8
    )
    assert flat[0, 1] == 0.0  # no spread: nothing to correlate


def _paired_corr_loop(y: np.ndarray, use: np.ndarray, prefix: np.ndarray, population: int) -> np.ndarray:
    """The reference: the nested-sample correlation of every pair, one pair at a time (plain numpy per pair)."""
    out = np.eye(len(y))
    for p in range(len(y)):
        for q in range(p + 1, len(y)):
            both = use[p] & use[q]
            if both.sum() < 3:
                continue
            a, b = y[p, both].astype(float), y[q, both].astype(float)
            if a.std() <= 0 or b.std() <= 0:
                continue
            rho = float(np.corrcoef(a, b)[0, 1])
            small, big = sorted((max(int(prefix[p]), 1), max(int(prefix[q]), 1)))
            nest = (1 / big - 1 / population) / (1 / small - 1 / population)
            out[p, q] = out[q, p] = rho * np.sqrt(min(1.0, max(0.0, nest)))
    return out


def test_paired_correlation_matrix_equals_the_pair_by_pair_reference() -> None:
    # 12 pipelines on one random order of 60 questions, prefixes of different lengths (some under 3 or
    # constant), a few failed requests inside the prefixes
    rng = np.random.default_rng(5)
    n_p, n_i = 12, 60
    prefix = rng.integers(0, n_i + 1, n_p)
    prefix[:3] = (2, 0, n_i)
    y = (rng.random((n_p, n_i)) < rng.uniform(0.2, 0.9, (n_p, 1))).astype(np.int8)
    y[3, :] = 1  # answers all right: no spread
    use = np.arange(n_i)[None, :] < prefix[:, None]
    use &= rng.random((n_p, n_i)) > 0.05
    y = np.where(use, y, -1).astype(np.int8)
    want = _paired_corr_loop(y, use, prefix, n_i)
    got = paired_corr(y, use, prefix, n_i)
    assert np.allclose(got, want, atol=1e-12)
    assert (want[3] == np.eye(n_p)[3]).all() and (want[0] == np.eye(n_p)[0]).all()  # the edge cases were hit
    assert np.abs(want - np.eye(n_p)).max() > 0.3  # and real correlations too


def test_probability_of_the_best_uses_the_pairing() -> None:
    est, sd = np.array([0.70, 0.69]), np.array([0.05, 0.05])
    # independent: P(first) = Phi(0.01 / (0.05 sqrt 2)); correlation 0.9: Phi(0.01 / (0.05 sqrt 0.2))
    indep = prob_best(est, sd, seed=1, draws=200_000)
    paired = prob_best(est, sd, seed=1, draws=200_000, corr=np.array([[1.0, 0.9], [0.9, 1.0]]))
    assert indep[0] == pytest.approx(NormalDist().cdf(0.01 / (0.05 * np.sqrt(2))), abs=0.005)
    assert paired[0] == pytest.approx(NormalDist().cdf(0.01 / (0.05 * np.sqrt(0.2))), abs=0.005)


def _sample_run(R: np.ndarray, cfg: AdaptiveConfig) -> Scheduler:
    items = [f"q{i}" for i in range(R.shape[1])]
    zero = np.zeros(R.shape[1])
    sched = Scheduler(ItemParams(items, zero + 1.0, zero, zero, "none"), ["a", "b"], cfg, seed=3)
    while not sched.done:
        plan = sched.plan()
        if not plan:
            break
        for p, its in plan.items():
            sched.record(p, its, [int(R[p, i]) for i in its])
        sched.finish_round()
    return sched


def test_paired_elimination_separates_what_overlapping_intervals_cannot() -> None:
    # b answers exactly as a except on 20 of 400 questions, where only a is right: a leads by 5 points;
    # each alone has an SD near 0.02, so on 200 questions their bounds overlap, their difference does not
    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.6).astype(np.int8)
    a[:40] = 1
    b = a.copy()
    b[rng.permutation(40)[:20]] = 0
    # no pause (stop_p_best 0): a paused b would get no more answers and stop on the budget, not by elimination
    cfg = AdaptiveConfig(
        audit_share=1.0, default_share=None, budget=400, batch=50, min_items=30, margin=0.0, stop_p_best=0.0
    )
    sched = _sample_run(np.array([a, b]), cfg)
    res = {r["pipeline"]: r for r in sched.results()}
    assert res["b"]["status"] == "eliminated" and res["a"]["p_best"] > 0.99
    assert res["b"]["accuracy_estimate_high"] > res["a"]["accuracy_estimate_low"]  # the intervals alone overlap


def test_the_leaders_intervals_hold_their_unshrunk_audit_estimate() -> None:
    est, sd = np.array([0.8, 0.7, 0.6, 0.5]), np.full(4, 0.01)
    est_u, sd_u = np.array([0.85, 0.7, 0.6, 0.4]), np.full(4, 0.02)
    out = leader_sd(est, sd, np.ones(4, bool), est_u, sd_u, 2)
    # the two leaders: wide enough to hold est_u +- 1.96 sd_u; the others keep the shrunk SD
    assert out == pytest.approx([(0.05 + 1.96 * 0.02) / 1.96, 0.02, 0.01, 0.01])
    assert leader_sd(est, sd, np.ones(4, bool), est_u, sd_u, 0) == pytest.approx(sd)


def test_pair_gaps_by_hand() -> None:
    acc, sd = np.array([0.70, 0.65]), np.array([0.02, 0.02])
    indep = pair_gaps(acc, sd, 2.0, None)
    assert indep[1, 0] == pytest.approx((0.70 - 0.04) - (0.65 + 0.04))  # bounds overlap: -0.03
    paired = pair_gaps(acc, sd, 2.0, np.array([[1.0, 0.875], [0.875, 1.0]]))
    assert paired[1, 0] == pytest.approx(0.05 - 2.0 * 0.01)  # SD of the difference: 0.02 sqrt(2 - 1.75) = 0.01


def test_additive_shrinkage_intercept_only_matches_the_closed_form() -> None:
    # one tau, independent errors, intercept only: post = mean + w (est - mean), w = tau^2 / (tau^2 + v), and
    # the error variance is w v + (1 - w)^2 (tau^2 + v) / k (worked by hand from est_p = mu + u_p + e_p)
    est = np.array([0.52, 0.61, 0.47, 0.70, 0.55])
    v, tau, k = 0.05**2, 0.03, 5
    sd = np.full(k, 0.05)
    X = np.ones((k, 1))
    got, got_sd, t = additive_shrink(est, sd, np.ones(k, bool), X, taus=np.array([tau]))
    w = tau**2 / (tau**2 + v)
    assert got == pytest.approx(est.mean() + w * (est - est.mean()))
    assert got_sd == pytest.approx(np.sqrt(w * v + (1 - w) ** 2 * (tau**2 + v) / k))
    assert t == pytest.approx(tau)
    # no more pipelines than the design's rank: nothing to pool, returned as they were
    same, same_sd, nan = additive_shrink(est[:2], sd[:2], np.ones(2, bool), np.array([[1.0, 0.0], [1.0, 1.0]]))
    assert (same == est[:2]).all() and (same_sd == sd[:2]).all() and np.isnan(nan)


def test_additive_shrinkage_with_too_few_residual_df_puts_a_flat_prior_on_tau() -> None:
    # intercept only, two pipelines: one residual df (below 3), so tau's prior is flat. Worked by hand: with equal
    # SDs s the restricted log-likelihood is -(log v + log 2 + d^2 / (2 v)) / 2 (v = s^2 + tau^2, d = y1 - y2);
    # on the log-spaced grid a flat prior weighs each point by tau, so the weights are tau v^(-1/2) exp(-d^2 / 4v):
    # s = 0.05, d = -0.2, tau 0.05 and 0.1: v = 0.005 and 0.0125, weights 0.0957 and 0.4019 -> 0.1923 and 0.8077;
    # given tau, y1 -> mean + w (y1 - mean), w = tau^2 / v = 0.5 and 0.8: 0.55 and 0.52, mixed: 0.5258; its error
    # variance given tau is w s^2 + (1 - w)^2 v / 2, plus the spread of the conditional means over tau
    est, sd, X, taus = np.array([0.5, 0.7]), np.full(2, 0.05), np.ones((2, 1)), np.array([0.05, 0.1])
    got, got_sd, t = additive_shrink(est, sd, np.ones(2, bool), X, taus=taus)
    v = 0.05**2 + taus**2
    wt = taus * v**-0.5 * np.exp(-0.04 / (4 * v))
    wt /= wt.sum()
    assert wt == pytest.approx([0.19232, 0.80768], abs=1e-5)
    cond = 0.6 + np.outer(taus**2 / v, [-0.1, 0.1])  # given tau
    assert got == pytest.approx(wt @ cond)
    assert got[0] == pytest.approx(0.52577, abs=1e-5)
    cond_var = taus**2 / v * 0.05**2 + (1 - taus**2 / v) ** 2 * v / 2
    assert got_sd == pytest.approx(np.full(2, np.sqrt(wt @ cond_var + wt @ (cond[:, 0] - got[0]) ** 2)))
    assert t == pytest.approx(wt @ taus)
    # the scale-free prior (min_df 0: every grid counts as large enough) weighs the points equally: more on
    # the small tau, more pooling
    scale_free, _, t_sf = additive_shrink(est, sd, np.ones(2, bool), X, taus=taus, min_df=0)
    wt_sf = v**-0.5 * np.exp(-0.04 / (4 * v))
    assert scale_free == pytest.approx((wt_sf / wt_sf.sum()) @ cond)
    assert scale_free[0] > got[0] and t_sf < t


def test_two_by_two_grids_pool_less_than_under_the_scale_free_prior() -> None:
    # 2 x 2 grid (rank 3, one residual df) with a large interaction: on the default tau grid the flat prior
    # leaves the estimates nearer their own values than the scale-free one, which pools them onto the additive fit
    X = np.array([[1, a, b] for a in (0, 1) for b in (0, 1)], dtype=float)
    est, sd = np.array([0.60, 0.70, 0.70, 0.60]), np.full(4, 0.04)
    flat, _, t_flat = additive_shrink(est, sd, np.ones(4, bool), X)
    pooled, _, t_sf = additive_shrink(est, sd, np.ones(4, bool), X, min_df=0)
    assert np.abs(flat - est).max() < np.abs(pooled - est).max()
    assert t_flat > t_sf


def test_additive_shrinkage_error_variance_holds_under_correlated_errors() -> None:
    # 2 x 3 factors, correlated sampling errors (paired questions): the stated SD is the root mean square error
    # of the shrunk estimate over draws from the model itself
    rng = np.random.default_rng(7)
    X = np.array([[1, a, b == 1, b == 2] for a in (0, 1) for b in range(3)], dtype=float)
    beta, tau = np.array([0.55, 0.10, -0.05, 0.08]), 0.02
    sd = np.array([0.05, 0.04, 0.05, 0.045, 0.05, 0.04])
    corr = np.full((6, 6), 0.3) + 0.7 * np.eye(6)
    L = np.linalg.cholesky(corr * np.outer(sd, sd))
    errs, sds = [], []
    for _ in range(3000):
        truth = X @ beta + rng.normal(0.0, tau, 6)
        est = truth + L @ rng.standard_normal(6)
        got, got_sd, _ = additive_shrink(est, sd, np.ones(6, bool), X, corr, taus=np.array([tau]))
        errs.append(got - truth)
        sds.append(got_sd)
    rmse = np.sqrt(np.mean(np.square(errs), axis=0))
    assert rmse == pytest.approx(sds[0], rel=0.08)
    assert (np.array(sds[0]) < sd).all()  # and pooling paid: every SD below the sample mean's


def test_sampled_runs_report_estimates_pooled_over_the_grid_factors() -> None:
    cfg = AdaptiveConfig(audit_share=1.0)
    gains = []
    for seed in range(4, 10):  # pooling pays on average (paused pipelines have fewer answers: unequal samples)
        sim = simulate_grid({"llm": 2, "retriever": 5}, 300, seed=seed, effect_sd={"llm": 1.0, "retriever": 0.8})
        sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, cfg, factors=sim.factors, seed=seed)
        raw, _ = sched.accuracy()  # what the run decided on: each pipeline's own sample mean
        res = sched.results()
        est = np.array([r["accuracy_estimate"] for r in res])
        low = np.array([r["accuracy_estimate_low"] for r in res])
        high = np.array([r["accuracy_estimate_high"] for r in res])
        assert not np.allclose(est, raw)  # pooled toward the additive model
        gains.append(np.abs(raw - sim.accuracy).mean() - np.abs(est - sim.accuracy).mean())
        top = np.argsort(-est)[:3]  # the leaders' intervals also hold their own sample mean
        assert ((low[top] <= raw[top] + 1e-12) & (raw[top] <= high[top] + 1e-12)).all()
    assert np.mean(gains) > 0 and np.mean(np.array(gains) > 0) >= 0.5
    # without factors there is nothing to pool over: the report is the sample means
    plain, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, cfg, seed=seed)  # the last grid of the loop
    assert np.allclose([r["accuracy_estimate"] for r in plain.results()], plain.accuracy()[0])
