"""Adaptive estimates that stay honest: the audit sample, misfit checks, budgets, excluded items (no I/O)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests.support.adaptive_sim import SimGrid, adaptive_on_matrix, fit_params, simulate_grid, simulate_grid_2d

from ragrade.adaptive import AdaptiveConfig, ItemParams, Scheduler, run_rounds
from ragrade.adaptive.calibration import misfit_fallback
from ragrade.adaptive.estimate import (
    MisfitResult,
    audit_stats,
    calibration_check,
    elimination_z,
    prob_best,
    shrunk_bias,
    smallest_useful_budget,
)
from ragrade.adaptive.notes import run_notes


def test_audit_statistics_by_hand() -> None:
    # one pipeline, 6 items: items 0-2 audited (answers 1, 0, 1 against predictions .5, .5, .8), 3-5 unseen
    y = np.array([[1, 0, 1, -1, -1, -1]], dtype=np.int8)
    audit = np.array([[True, True, True, False, False, False]])
    phat = np.array([[0.5, 0.5, 0.8, 0.6, 0.6, 0.6]])
    st = audit_stats(y, audit, phat, np.array([6]))  # the audit samples the whole exam
    r = np.array([0.5, -0.5, 0.2])
    assert st.m[0] == 3 and st.population[0] == 6
    assert st.mean_resid[0] == pytest.approx(r.mean())
    s2 = max(r.var(ddof=1), (0.25 + 0.25 + 0.16) / 3)  # floored at the model's own residual variance
    assert st.var_design[0] == pytest.approx(s2 / 3 * (1 - 3 / 6))
    # no model (predictions 0): the plus-two Bernoulli variance is the floor
    st0 = audit_stats(
        np.array([[1, 1, 1, -1]], dtype=np.int8), np.array([[1, 1, 1, 0]], bool), np.zeros((1, 4)), np.array([4])
    )
    assert st0.var_design[0] == pytest.approx(0.8 * 0.2 / 3 * (1 - 3 / 4))


def test_shrunk_bias_pools_towards_the_grid_mean() -> None:
    mean = np.array([0.05, 0.05, 0.05, 0.05])
    b, v, tau = shrunk_bias(mean, np.full(4, 0.01), np.ones(4, bool))
    assert tau == 0.0 and b == pytest.approx(mean) and (v > 0).all()  # a common bias, no spread
    spread = np.array([-0.3, 0.3, -0.3, 0.3])
    b, v, tau = shrunk_bias(spread, np.full(4, 0.001), np.ones(4, bool))
    assert tau > 0.25 and np.abs(b - spread).max() < 0.02  # real differences are kept
    x = np.linspace(-2, 2, 8)
    b, _, tau = shrunk_bias(0.01 + 0.02 * x, np.full(8, 0.01), np.ones(8, bool), covariate=x)
    assert tau == 0.0 and b == pytest.approx(0.01 + 0.02 * x)  # a bias linear in the covariate is the prior mean


def test_selection_adjusted_width_and_probability_of_the_best() -> None:
    # Bonferroni over 10 pipelines and a union over rounds: alpha / (K r (r + 1))
    assert elimination_z(0.05, 10, 1) == pytest.approx(2.8070, abs=1e-3)  # one-sided 0.05 / 20 = 0.0025
    assert elimination_z(0.05, 10, 4) == pytest.approx(3.4808, abs=1e-3)  # 0.05 / 200 = 0.00025
    assert elimination_z(0.05, 10, 3) > elimination_z(0.05, 10, 2)
    pb = prob_best(np.array([0.7, 0.5, 0.7]), np.array([0.01, 0.01, 0.01]), seed=0)
    assert pb[1] == 0.0 and pb[0] == pytest.approx(0.5, abs=0.02) and pb.sum() == pytest.approx(1.0)


@pytest.mark.slow
def test_sampled_intervals_cover_the_full_grid_accuracy() -> None:
    """200 small grids (4 pipelines x 120 items) with random budgets: design-based intervals cover."""
    covered, total = 0, 0
    for seed in range(200):
        sim = simulate_grid({"llm": 2, "retriever": 2}, 120, seed=seed, effect_sd=0.8)
        cfg = AdaptiveConfig(audit_share=1.0, budget=40 + 10 * (seed % 12), batch=20, min_items=10)
        sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, cfg, seed=seed)
        res = sched.results()
        lo = np.array([r["accuracy_estimate_low"] for r in res])
        hi = np.array([r["accuracy_estimate_high"] for r in res])
        covered += int(((lo <= sim.accuracy + 1e-12) & (sim.accuracy <= hi + 1e-12)).sum())
        total += len(res)
    assert covered / total >= 0.92


@pytest.fixture(scope="module")
def earlier_runs() -> list[tuple[SimGrid, ItemParams]]:
    """Calibration data of earlier 63-pipeline runs on 200-item exams: one-dimensional and two-dimensional truth."""
    levels = {"llm": 3, "retriever": 7, "icl": 3}
    sd = {"llm": 1.0, "retriever": 0.8, "icl": 0.4}
    one = simulate_grid(levels, 300, seed=4, effect_sd=sd)
    two = simulate_grid_2d(levels, 300, seed=4, effect_sd=sd)
    return [(s, fit_params(s.R, s.truth.items, "3pl")) for s in (one, two)]


def test_misfit_warning_for_two_abilities_and_not_for_one(earlier_runs: list[tuple[SimGrid, ItemParams]]) -> None:
    (one, p1), (two, p2) = earlier_runs
    res1 = calibration_check(one.R, p1.d, p1.b, p1.g, alpha=0.01, seed=0, n_boot=200)
    res2 = calibration_check(two.R, p2.d, p2.b, p2.g, alpha=0.01, seed=0, n_boot=200)
    assert not res1.warn and res1.p_value > 0.05
    assert res2.warn and res2.p_value < 0.01 and res2.statistic > res1.statistic


def test_calibration_misfit_falls_back_to_random_sampling_and_says_so(
    earlier_runs: list[tuple[SimGrid, ItemParams]],
) -> None:
    earlier, params = earlier_runs[1]
    check = calibration_check(earlier.R, params.d, params.b, params.g, alpha=0.01, seed=0, n_boot=200)
    sim = simulate_grid_2d(
        {"llm": 2, "retriever": 3}, 300, seed=5, effect_sd=1.0, items=earlier.truth, angles=earlier.extra["angles"]
    )
    cfg = misfit_fallback(AdaptiveConfig(), check)
    assert cfg.audit_share == 1.0 and misfit_fallback(AdaptiveConfig(), None).audit_share == 0.3
    sched, _ = adaptive_on_matrix(sim.R, params, sim.pipelines, cfg, seed=0, calibration_fit=check)
    assert sched.misfit_warning and sched.design_only and not sched.use_model
    assert {r["estimate_basis"] for r in sched.results()} == {"audit"}
    # random sampling, paired: every pipeline's questions are a prefix of one common random order
    order = sched.order[0]
    for p in range(len(sim.pipelines)):
        k = int(sched.asked[p].sum())
        assert set(np.flatnonzero(sched.asked[p])) == set(order[:k].tolist())
    diag, warnings = run_notes(sched, params.items, "file", None)
    assert diag["misfit_warning"] and any("MISFIT" in w and "sampled at random" in w for w in warnings)
    assert "not used to choose questions" in diag["calibration_source"]


def test_a_misfit_in_the_run_keeps_the_model_and_audit_estimate() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 3}, 200, seed=3, effect_sd=0.8)
    sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, AdaptiveConfig(), seed=0)
    before = sched.accuracy()
    sched.misfit = MisfitResult(9.0, 0.001, True, 10, np.zeros(len(sim.pipelines)))
    sched.__dict__.pop("_acc_cache", None)
    assert sched.misfit_warning and not sched.design_only
    np.testing.assert_allclose(sched.accuracy()[0], before[0])
    _, warnings = run_notes(sched, sim.truth.items, "file", None)
    assert any("MISFIT" in w and "own audit sample" in w for w in warnings)


def test_small_budgets_are_spent_and_every_pipeline_estimated() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 2}, 300, seed=0, effect_sd=0.8)
    for budget in (smallest_useful_budget(4), 30):
        cfg = AdaptiveConfig(audit_share=1.0, budget=budget)
        sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, cfg, seed=0)
        res = sched.results()
        assert sched.spent == budget
        assert all(r["n_asked"] >= 2 and math.isfinite(r["accuracy_estimate"]) for r in res)
        assert all(r["accuracy_estimate_low"] < r["accuracy_estimate_high"] for r in res)
        assert sum(r["p_best"] for r in res) == pytest.approx(1.0)
    assert smallest_useful_budget(4) == 8


def test_default_budget_is_a_quarter_of_the_grid() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 2}, 200, seed=1, effect_sd=0.8)
    sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, AdaptiveConfig(audit_share=1.0), seed=0)
    assert sched.budget == 200 and sched.spent <= 200


def test_default_budget_is_at_most_200_requests_per_pipeline_on_a_long_exam() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 2}, 1000, seed=1, effect_sd=0.8)
    cfg = AdaptiveConfig(audit_share=1.0)
    # 25% of 4 x 1,000 is 1,000 requests; 200 per pipeline is 800: the smaller cap holds
    assert Scheduler(sim.truth, sim.pipelines, cfg, seed=0).budget == 800
    assert Scheduler(sim.truth, sim.pipelines, cfg.model_copy(update={"default_items": None}), seed=0).budget == 1000
    assert Scheduler(sim.truth, sim.pipelines, cfg.model_copy(update={"default_share": None}), seed=0).budget == 800
    unlimited = cfg.model_copy(update={"default_share": None, "default_items": None})
    assert Scheduler(sim.truth, sim.pipelines, unlimited, seed=0).budget is None
    assert Scheduler(sim.truth, sim.pipelines, cfg.model_copy(update={"budget": 1500}), seed=0).budget == 1500


def test_negative_discrimination_items_are_never_chosen_by_the_model_and_are_listed() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 3}, 100, seed=2, effect_sd=0.8)
    neg = np.zeros(100, dtype=bool)
    neg[np.argsort(-sim.truth.d)[:5]] = True  # the five most informative items
    t = sim.truth
    params = ItemParams(t.items, t.d, t.b, t.g, "test", negative=neg)
    cfg = AdaptiveConfig(default_share=None, default_items=None, audit_share=0.2, min_audit=2)
    sched = Scheduler(params, sim.pipelines, cfg, seed=0)
    run_rounds(sched, lambda plan: {p: [int(sim.R[p, i]) for i in items] for p, items in plan.items()})
    chosen = sched.asked & ~sched.audit
    assert not chosen[:, neg].any() and chosen.any()
    _, warnings = run_notes(sched, params.items, "file", None)
    listed = [w for w in warnings if "negative discrimination" in w]
    assert listed and all(params.items[i] in listed[0] for i in np.flatnonzero(neg))
    keep = Scheduler(params, sim.pipelines, cfg.model_copy(update={"exclude_negative": False}), seed=0)
    assert not keep.excluded.any()
