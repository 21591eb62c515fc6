"""The misfit test on audit biases shared by the pipelines of a component (:func:`component_bias_check`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2
from tests.support.adaptive_sim import adaptive_on_matrix, simulate_grid_2d

from ragrade.adaptive import AdaptiveConfig
from ragrade.adaptive.calibration import cold_params, refitter
from ragrade.adaptive.estimate import MisfitResult, combine_checks, component_bias_check, largest_level_bias
from ragrade.adaptive.notes import run_notes


def test_component_bias_by_hand() -> None:
    # 4 pipelines: factor level 1 in the last two; abilities 0, 1, 0, 1 (balanced over the levels)
    X = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    theta = np.array([0.0, 1.0, 0.0, 1.0])
    mean = np.array([0.0, 0.0, 0.1, 0.1])  # the level-1 pipelines are under-predicted by 0.1
    var = np.full(4, 0.01)  # weights 100
    stat, p, df = component_bias_check(mean, var, np.ones(4, bool), X, theta)
    # null a + b theta: b = 0 (theta balanced), a = 0.05: RSS 100 * 4 * 0.05^2 = 1.0; the alternative fits exactly
    assert df == 1
    assert stat == pytest.approx(1.0)
    assert p == pytest.approx(chi2.sf(1.0, 1))  # 0.3173
    # a bias linear in the ability alone is the null: nothing left for the components
    stat, p, _ = component_bias_check(0.02 + 0.05 * theta, var, np.ones(4, bool), X, theta)
    assert stat == pytest.approx(0.0, abs=1e-9) and p == pytest.approx(1.0)


def test_the_largest_level_bias_by_hand() -> None:
    # the same 4 pipelines: null fit a = 0.05, b = 0, so the residuals are -0.05, -0.05, 0.05, 0.05
    theta = np.array([0.0, 1.0, 0.0, 1.0])
    factors = [{"llm": "a", "k": "1"}, {"llm": "a", "k": "2"}, {"llm": "b", "k": "1"}, {"llm": "b", "k": "2"}]
    mean = np.array([0.0, 0.0, 0.1, 0.1])
    var = np.array([0.01, 0.01, 0.01, 0.04])  # weights 100, 100, 100, 25: the null fit moves
    label, bias, z = largest_level_bias(mean, var, np.ones(4, bool), theta, factors)
    w = 1 / var
    D = np.column_stack([np.ones(4), theta])
    r = mean - D @ np.linalg.solve(D.T @ (w[:, None] * D), D.T @ (w * mean))
    members = {"llm=a": [0, 1], "llm=b": [2, 3], "k=1": [0, 2], "k=2": [1, 3]}
    mean_of = {k: float(r[i] @ w[i] / w[i].sum()) for k, i in members.items()}
    z_of = {k: mean_of[k] * float(np.sqrt(w[i].sum())) for k, i in members.items()}
    top = max(z_of, key=lambda k: abs(z_of[k]))
    assert top.startswith("llm=")  # the planted bias, not the ability-balanced k
    assert label == top and bias == pytest.approx(mean_of[top]) and z == pytest.approx(z_of[top])
    assert largest_level_bias(mean, var, np.ones(4, bool), theta, [{}] * 4)[0] == ""  # no factors


def test_component_bias_needs_factors_and_pipelines() -> None:
    theta = np.zeros(6)
    _, p, df = component_bias_check(np.zeros(6), np.full(6, 0.01), np.ones(6, bool), np.ones((6, 1)), theta)
    assert math.isnan(p) and df == 0  # no factor: nothing to test
    X = np.column_stack([np.ones(6), [0, 0, 0, 1, 1, 1]])
    ok = np.array([True, True, False, False, False, True])
    assert math.isnan(component_bias_check(np.zeros(6), np.full(6, 0.01), ok, X, theta)[1])  # 3 pipelines


def test_a_strong_component_bias_is_found_and_pure_noise_is_not() -> None:
    rng = np.random.default_rng(0)
    levels = np.repeat(np.arange(3), 7)  # 3 LLMs x 7 pipelines
    X = np.column_stack([np.ones(21), levels == 1, levels == 2]).astype(float)
    theta = rng.normal(size=21)
    var = np.full(21, 0.03**2)
    noise = rng.normal(0, 0.03, 21)
    p_null = [component_bias_check(rng.normal(0, 0.03, 21), var, np.ones(21, bool), X, theta)[1] for _ in range(400)]
    assert 0.02 < float(np.mean(np.array(p_null) < 0.05)) < 0.09  # calibrated: about 5% below 0.05
    biased = noise + np.array([0.0, 0.04, -0.04])[levels]
    assert component_bias_check(biased, var, np.ones(21, bool), X, theta)[1] < 0.01


def test_checks_are_combined_by_bonferroni() -> None:
    base = MisfitResult(3.0, 0.004, True, 50, np.zeros(2))
    one = combine_checks(base, {"residual_eigenvalue": 0.004, "component_bias": float("nan")}, alpha=0.01)
    assert one.p_value == pytest.approx(0.004) and one.warn and one.parts == {"residual_eigenvalue": 0.004}
    two = combine_checks(base, {"residual_eigenvalue": 0.004, "component_bias": 0.5}, alpha=0.01)
    assert two.p_value == pytest.approx(0.008) and two.warn
    three = combine_checks(base, {"residual_eigenvalue": 0.2, "component_bias": 0.006}, alpha=0.01)
    assert three.p_value == pytest.approx(0.012) and not three.warn
    assert three.statistic == 3.0 and three.n_audit == 50  # the eigenvalue test's statistic is kept


def test_a_cold_run_whose_estimates_a_second_ability_biases_warns_by_component() -> None:
    """A 63-pipeline grid, two abilities, no calibration file: the audit biases shared by an LLM's pipelines show
    what the residual eigenvalue cannot (the items fitted on the run's own answers absorb its pattern)."""
    levels = {"llm": 3, "retriever": 7, "icl": 3}
    sim = simulate_grid_2d(levels, 1000, seed=2, effect_sd={"llm": 1.0, "retriever": 0.8, "icl": 0.4})
    cfg = AdaptiveConfig()
    params = cold_params(sim.truth.items, {})
    refit = refitter(sim.pipelines, sim.truth.items, cfg.calibration_model, params)
    sched, _ = adaptive_on_matrix(sim.R, params, sim.pipelines, cfg, factors=sim.factors, seed=2, refit=refit)
    # items fitted on the run's own answers: the eigenvalue test is recorded, not combined
    assert sched.misfit is not None and set(sched.misfit.parts) == {"component_bias"}
    assert np.isfinite(sched.misfit.statistic)
    # below the warning level (p 0.002 at the default 20% budget of a 63 x 1,000 grid; below 0.001 at 25%)
    assert sched.misfit.parts["component_bias"] < cfg.misfit_alpha and sched.misfit_warning
    assert sched.misfit.p_value == sched.misfit.parts["component_bias"]
    assert not sched.design_only  # the estimates stay model+audit
    diag, warnings = run_notes(sched, sim.truth.items, "cold", None)
    p_component = sched.misfit.parts["component_bias"]
    assert diag["misfit_check_run"]["tests"]["component_bias"] == pytest.approx(p_component, rel=1e-3)
    assert "points" in diag["misfit_check_run"]["largest_component_bias"]
    assert any("MISFIT" in w and "audit bias by component p = " in w for w in warnings)


def test_a_calibration_file_run_combines_both_tests() -> None:
    sim = simulate_grid_2d({"llm": 2, "retriever": 3}, 200, seed=1, effect_sd=0.8)
    sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, AdaptiveConfig(), factors=sim.factors, seed=0)
    assert sched.misfit is not None and set(sched.misfit.parts) == {"residual_eigenvalue", "component_bias"}
    parts = sched.misfit.parts
    assert sched.misfit.p_value == pytest.approx(min(1.0, 2 * min(parts.values())))
