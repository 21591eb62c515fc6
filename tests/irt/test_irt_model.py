"""Reference tests of the 3PL math: analytic gradients, Hessian blocks, information formula."""

from __future__ import annotations

import numpy as np
import pytest
from tests.irt.irt_helpers import finite_diff as _fd
from tests.irt.irt_helpers import random_problem as _random_problem

from ragrade.irt import information as info
from ragrade.irt.fit import FitConfig, Problem
from ragrade.irt.hierarchical import Design, helmert
from ragrade.irt.model import Bounds, Priors, item_blocks_numpy, loglik, nll_grad_numpy
from ragrade.irt.simulate import simulate_flat, simulate_hierarchical


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_gradient_matches_finite_differences(seed: int) -> None:
    R, theta, d, b, g = _random_problem(seed)
    nll, gt, gd, gb, gg = nll_grad_numpy(R, theta, d, b, g)
    assert nll == pytest.approx(-loglik(R, theta, d, b, g), rel=1e-12)
    np.testing.assert_allclose(gt, _fd(lambda x: nll_grad_numpy(R, x, d, b, g)[0], theta), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gd, _fd(lambda x: nll_grad_numpy(R, theta, x, b, g)[0], d), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gb, _fd(lambda x: nll_grad_numpy(R, theta, d, x, g)[0], b), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gg, _fd(lambda x: nll_grad_numpy(R, theta, d, b, x)[0], g), rtol=1e-6, atol=1e-7)


def test_numba_kernel_equals_numpy() -> None:
    pytest.importorskip("numba")
    from ragrade.irt._kernels import nll_grad_numba

    R, theta, d, b, g = _random_problem(5, n_items=60, n_persons=33)
    g[:5] = 0.0  # the g == 0 path
    a = nll_grad_numpy(R, theta, d, b, g)
    c = nll_grad_numba(R, theta, d, b, g)
    assert c[0] == pytest.approx(a[0], rel=1e-12)
    for x, y in zip(a[1:], c[1:], strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-10)


def test_extreme_logits_stay_finite() -> None:
    R = np.array([[1, 0], [0, 1]], dtype=np.int8)
    theta = np.array([-6.0, 6.0])
    d, b, g = np.array([5.0, 5.0]), np.array([6.0, -6.0]), np.zeros(2)
    nll, *grads = nll_grad_numpy(R, theta, d, b, g)
    # item 0, person 0: z = 5 * (-12) = -60, correct with g = 0: -log sigmoid(-60) = 60 + log1p(e^-60);
    # item 1, person 1: z = +60 and correct; the two z = 0 wrong answers cost log 2 each
    assert nll == pytest.approx(60 + 2 * np.log1p(np.exp(-60.0)) + 2 * np.log(2.0), rel=1e-12)
    assert all(np.isfinite(x).all() for x in grads)


@pytest.mark.parametrize(
    "model,factors,prior",
    [("3pl", False, "weak"), ("2pl", True, "weak"), ("3pl", True, "none"), ("1pl", False, "none")],
)
def test_full_objective_gradient(model: str, factors: bool, prior: str) -> None:
    if factors:
        data, _ = simulate_hierarchical({"a": 3, "b": 2}, 12, seed=3)
    else:
        data, _ = simulate_flat(8, 12, seed=3, missing=0.1)
    cfg = FitConfig(model=model, factors=("a", "b") if factors else (), priors=Priors.named(prior), backend="numpy")
    prob = Problem(data, cfg, Design(data.factors) if factors else None)
    rng = np.random.default_rng(0)
    lo, hi = np.array(prob.box()).T
    x = lo + (hi - lo) * rng.uniform(0.3, 0.7, lo.size)
    _, grad = prob.objective(x)
    np.testing.assert_allclose(grad, _fd(lambda v: prob.objective(v)[0], x), rtol=1e-5, atol=1e-9)


def test_hessian_blocks_match_gradient_differences() -> None:
    R, theta, d, b, g = _random_problem(7, n_items=4, n_persons=6, missing=0.0)
    H, _, htt = item_blocks_numpy(R, theta, d, b, g, slice(0, 4))
    eps = 1e-6
    for k, arr in enumerate((d, b, g)):
        up, dn = arr.copy(), arr.copy()
        up += eps
        dn -= eps
        args_up = [theta, d, b, g]
        args_dn = [theta, d, b, g]
        args_up[k + 1], args_dn[k + 1] = up, dn
        gu = nll_grad_numpy(R, *args_up)
        gd_ = nll_grad_numpy(R, *args_dn)
        col = np.stack([(gu[j] - gd_[j]) / (2 * eps) for j in (2, 3, 4)], axis=1)  # per item: d/dk of (gd, gb, gg)
        np.testing.assert_allclose(H[:, :, k], col, rtol=1e-5, atol=1e-6)
    # d^2/dtheta^2 per person summed over items
    gu_theta = nll_grad_numpy(R, theta + eps, d, b, g)[1]
    gd_theta = nll_grad_numpy(R, theta - eps, d, b, g)[1]
    np.testing.assert_allclose(htt.sum(0), (gu_theta - gd_theta) / (2 * eps), rtol=1e-5, atol=1e-6)


def test_information_hand_values() -> None:
    # 2PL at its difficulty: p = 1/2, I = d^2 p (1-p) = 0.25
    assert info.item_information(0.0, np.array([1.0]), np.array([0.0]), np.array([0.0]))[0, 0] == pytest.approx(0.25)
    # 3PL d=1.5, b=0, g=0.25 at theta=0: p = 0.625; I = 2.25 * (0.375/0.75)^2 * 0.375/0.625 = 0.3375
    val = info.item_information(0.0, np.array([1.5]), np.array([0.0]), np.array([0.25]))[0, 0]
    assert val == pytest.approx(0.3375, rel=1e-12)
    # the 2PL formula applied to the same p would give 0.52734375: a different number
    assert abs(val - 2.25 * 0.625 * 0.375) > 0.1
    # d=2, b=1, g=0.2 at theta=1+ln(3)/2: s = 3/4, p = 0.8; I = 4 * (0.6/0.8)^2 * 0.2/0.8 = 0.5625
    t = 1 + np.log(3.0) / 2
    assert info.item_information(t, np.array([2.0]), np.array([1.0]), np.array([0.2]))[0, 0] == pytest.approx(0.5625)


def test_information_peak_and_aggregates() -> None:
    d, b, g = np.array([1.2, 0.7, 2.0]), np.array([-0.5, 1.0, 0.3]), np.array([0.0, 0.25, 0.3])
    grid = np.linspace(-6, 6, 120001)
    curves = info.item_information(grid, d, b, g)
    np.testing.assert_allclose(grid[curves.argmax(axis=1)], info.theta_max_information(d, b, g), atol=2e-4)
    np.testing.assert_allclose(info.test_information(grid, d, b, g), curves.sum(0))
    np.testing.assert_allclose(info.mean_information(grid, d, b, g), curves.mean(0))
    groups = {"bloom": {"apply": [0, 2], "remember": [0]}}
    out = info.grouped_information(grid[:5], d, b, g, groups)
    assert out["bloom"]["apply"]["n_items"] == 2
    np.testing.assert_allclose(out["bloom"]["remember"]["mean"], curves[0, :5].round(6))


def test_helmert_is_orthonormal_sum_to_zero() -> None:
    for n in (2, 3, 7):
        C = helmert(n)
        np.testing.assert_allclose(C.sum(axis=0), 0, atol=1e-12)
        np.testing.assert_allclose(C.T @ C, np.eye(n - 1), atol=1e-12)


def test_bounds_parse_and_validate() -> None:
    bd = Bounds.parse("theta=-3:3,d=0.1:4")
    assert bd.theta == (-3.0, 3.0) and bd.discrimination == (0.1, 4.0) and bd.difficulty == (-6.0, 6.0)
    from ragrade.errors import ConfigError

    for bad in ("theta=3:-3", "x=1:2", "d=0:2", "theta"):
        with pytest.raises(ConfigError):
            Bounds.parse(bad)
