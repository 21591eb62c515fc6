"""Reference tests of the audit bias with its spread integrated out (:func:`shrunk_bias_marginal`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragrade.adaptive.estimate import shrunk_bias_marginal


def test_one_tau_is_the_plug_in_posterior_by_hand() -> None:
    # tau = 0.1: weights 1 / (v + tau^2) = 50, 50, 33.3; mu = 10 / 133.3 = 0.075 with variance 0.0075;
    # shrinkage factors tau^2 / (tau^2 + v) = 1/2, 1/2, 1/3
    x, v = np.array([0.1, -0.1, 0.3]), np.array([0.01, 0.01, 0.02])
    post, var, tau = shrunk_bias_marginal(x, v, np.ones(3, bool), taus=np.array([0.1]))
    assert post == pytest.approx([0.075 + 0.5 * 0.025, 0.075 - 0.5 * 0.175, 0.075 + 0.225 / 3])
    assert var == pytest.approx([0.005 + 0.25 * 0.0075, 0.005 + 0.25 * 0.0075, 0.02 / 3 + 4 / 9 * 0.0075])
    assert tau == pytest.approx(0.1)


def test_two_taus_are_weighted_by_the_restricted_likelihood_by_hand() -> None:
    # x = +-0.1, v = 0.01; mu = 0 at every tau. tau = 0: weights 100, 100, all pooled (0, variance 1/200);
    # tau = 0.1: weights 50, 50, halfway (+-0.05, variance 0.5 * 0.01 + 0.25 / 100). Likelihood ratio:
    # sqrt(50 * 50 / (100 * 100)) * sqrt(200 / 100) * exp(-(50 - 100) * 0.02 / 2) = exp((1 - ln 2) / 2)
    x, v = np.array([0.1, -0.1]), np.array([0.01, 0.01])
    post, var, tau = shrunk_bias_marginal(x, v, np.ones(2, bool), taus=np.array([0.0, 0.1]))
    e = math.exp((1 - math.log(2)) / 2)
    q = e / (1 + e)  # the posterior weight of tau = 0.1
    assert post == pytest.approx([0.05 * q, -0.05 * q])
    assert var == pytest.approx(np.full(2, (1 - q) * 0.005 + q * 0.0075 + q * (1 - q) * 0.05**2))
    assert tau == pytest.approx(0.1 * q)


def test_equals_numerical_integration_over_the_grid_mean_and_spread() -> None:
    # the same posterior by brute force: flat prior on beta (a fine grid), equal weights on the tau points
    x, v = np.array([0.12, -0.05, 0.02, 0.3, -0.2]), np.array([0.004, 0.01, 0.02, 0.008, 0.015])
    ok = np.array([True, True, True, True, False])  # the last one has too few audit answers: gets the prior
    taus = np.geomspace(0.01, 0.5, 40)
    post, var, tau = shrunk_bias_marginal(x, v, ok, taus=taus)
    beta = np.linspace(-2.0, 2.0, 8_001)[:, None, None]
    t2 = (taus**2)[None, :, None]
    s2 = v[ok][None, None, :] + t2
    logw = (-0.5 * np.log(s2) - 0.5 * (x[ok][None, None, :] - beta) ** 2 / s2).sum(axis=-1)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    shrink = np.where(ok, t2 / (t2 + v), 0.0)  # (1, T, P)
    cond_mean = beta + shrink * (x - beta)
    cond_var = np.where(ok, shrink * v, t2)
    mean = np.einsum("bt,btp->p", w, cond_mean)
    second = np.einsum("bt,btp->p", w, cond_var + cond_mean**2)
    assert post == pytest.approx(mean, abs=1e-6)
    assert var == pytest.approx(second - mean**2, rel=1e-4)
    assert tau == pytest.approx(float(w.sum(axis=0) @ taus), rel=1e-6)


def test_real_differences_are_kept_and_a_common_bias_is_pooled() -> None:
    ok = np.ones(6, bool)
    spread = np.array([-0.3, 0.3, -0.3, 0.3, -0.3, 0.3])
    post, var, tau = shrunk_bias_marginal(spread, np.full(6, 0.001), ok, 0.01)
    assert tau > 0.2 and np.abs(post - spread).max() < 0.01 and var.max() < 0.0015
    common = np.full(6, 0.05)
    post, var, tau = shrunk_bias_marginal(common, np.full(6, 0.01), ok, 0.01)
    assert post == pytest.approx(common) and tau < 0.05 and var.max() < 0.01 / 2  # pooled: tighter than one audit
    # few noisy audits cannot rule out a spread: the integrated posterior is wider than the plug-in at the floor
    x = np.array([0.13, 0.21, -0.2, 0.07, -0.35, 0.09])
    _, var_int, _ = shrunk_bias_marginal(x, np.full(6, 0.03), ok, 0.01)
    _, var_floor, _ = shrunk_bias_marginal(x, np.full(6, 0.03), ok, 0.01, taus=np.array([0.01]))
    assert (var_int > var_floor).all()
