"""Paired comparisons in sample mode and the leaders' intervals (no I/O; reference values worked by hand)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from ragrade.adaptive import AdaptiveConfig, ItemParams, Scheduler
from ragrade.adaptive.estimate import leader_sd, pair_gaps, paired_corr, prob_best


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
    cfg = AdaptiveConfig(audit_share=1.0, default_share=None, budget=400, batch=50, min_items=30, margin=0.0)
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
