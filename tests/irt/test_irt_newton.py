"""The block Newton solver: its kernels against references, and its optimum against L-BFGS-B."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from tests.irt.irt_helpers import random_problem as _random_problem

from ragrade.errors import ConfigError
from ragrade.irt.fit import FitConfig, fit_responses
from ragrade.irt.model import Priors, item_blocks_numpy, loglik, nll_grad_numpy, predict_sq_error
from ragrade.irt.newton import newton_pass_numpy, schur_apply_numpy
from ragrade.irt.result import _item_rest_corr
from ragrade.irt.simulate import simulate_flat, simulate_hierarchical

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
PassFn = Callable[..., tuple[F64, F64, F64, F64, F64, F64]]


def _pass(
    R: npt.NDArray[np.int8], theta: F64, d: F64, b: F64, g: F64, fn: PassFn = newton_pass_numpy
) -> tuple[F64, F64, F64, F64, F64, F64, F32, F32]:
    A = np.zeros(R.shape, np.float32)
    B = np.zeros(R.shape, np.float32)
    L, G, F, H, gth, dth = fn(R, theta, d, b, g, A, B, True)
    return L, G, F, H, gth, dth, A, B


def test_newton_pass_gradient_and_observed_hessian_match_references() -> None:
    R, theta, d, b, g = _random_problem(3)
    L, G, _, H, gth, *_ = _pass(R, theta, d, b, g)
    nll, gt, gd, gb, gg = nll_grad_numpy(R, theta, d, b, g)
    assert L.sum() == pytest.approx(nll, rel=1e-12) and L.sum() == pytest.approx(-loglik(R, theta, d, b, g))
    np.testing.assert_allclose(G, np.stack([gd, gb, gg], 1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gth, gt, rtol=1e-10, atol=1e-12)
    Href, _, _ = item_blocks_numpy(R, theta, d, b, g, slice(0, len(d)))  # observed 3x3 blocks, checked by FD
    packed = np.stack([Href[:, 0, 0], Href[:, 0, 1], Href[:, 1, 1], Href[:, 2, 2], Href[:, 0, 2], Href[:, 1, 2]], 1)
    np.testing.assert_allclose(H, packed, rtol=1e-9, atol=1e-12)


def test_fisher_blocks_are_the_expected_observed_information() -> None:
    # one response per (item, person): F = p H(r=1) + (1 - p) H(r=0), by hand from the observed blocks
    rng = np.random.default_rng(4)
    for _ in range(5):
        theta = rng.normal(0, 1.5, 1)
        d, b, g = rng.uniform(0.3, 2.5, 1), rng.normal(0, 1, 1), rng.uniform(0.05, 0.4, 1)
        p = g + (1 - g) / (1 + np.exp(-d * (theta - b)))
        right = _pass(np.ones((1, 1), np.int8), theta, d, b, g)
        wrong = _pass(np.zeros((1, 1), np.int8), theta, d, b, g)
        np.testing.assert_allclose(right[2], wrong[2], rtol=1e-12)  # F does not depend on the response
        np.testing.assert_allclose(right[2], p * right[3] + (1 - p) * wrong[3], rtol=1e-9, atol=1e-14)
        # theta's Fisher information is the 3PL item information d^2 ((p-g)/(1-g))^2 (1-p)/p
        info = d**2 * ((p - g) / (1 - g)) ** 2 * (1 - p) / p
        np.testing.assert_allclose(right[5], info, rtol=1e-10)


def test_schur_apply_matches_dense_algebra() -> None:
    R, theta, d, b, g = _random_problem(5, n_items=6, n_persons=5)
    *_, A, Bg = _pass(R, theta, d, b, g)
    rng = np.random.default_rng(0)
    Binv = rng.normal(size=(6, 3, 3))
    v, Y = rng.normal(size=5), rng.normal(size=(6, 3))
    out, W = schur_apply_numpy(A, Bg, theta, d, b, Binv, v, Y, True)
    # dense cross block C[j, i, :] = (A d (theta - b), -A d^2, Bg d)
    diff = theta[None, :] - b[:, None]
    C = np.stack([A * d[:, None] * diff, -A * d[:, None] ** 2, Bg * d[:, None]], -1)  # (items, persons, 3)
    W_ref = np.einsum("iab,ib->ia", Binv, np.einsum("ipa,p->ia", C, v) + Y)
    np.testing.assert_allclose(W, W_ref, rtol=1e-6)
    np.testing.assert_allclose(out, np.einsum("ipa,ia->p", C, W_ref), rtol=1e-6)


def test_numba_newton_kernels_equal_numpy() -> None:
    pytest.importorskip("numba")
    from ragrade.irt._kernels import loglik_sse_numba, newton_pass_numba, schur_apply_numba

    R, theta, d, b, g = _random_problem(6, n_items=50, n_persons=37)
    g[:4] = 0.0
    theta[0], b[1], d[1] = 6.0, -6.0, 5.0  # extreme logits: |z| = 60
    ref = _pass(R, theta, d, b, g)
    got = _pass(R, theta, d, b, g, fn=newton_pass_numba)
    assert len(ref) == len(got)
    for i in range(len(ref)):
        np.testing.assert_allclose(got[i], ref[i], rtol=1e-10, atol=1e-10)
    A, Bg = ref[-2:]
    rng = np.random.default_rng(1)
    Binv, v, Y = rng.normal(size=(50, 3, 3)), rng.normal(size=37), rng.normal(size=(50, 3))
    for has_g in (True, False):
        a = schur_apply_numpy(A, Bg, theta, d, b, Binv, v, Y, has_g)
        c = schur_apply_numba(A, Bg, theta, d, b, Binv, v, Y, has_g)
        np.testing.assert_allclose(c[0], a[0], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(c[1], a[1], rtol=1e-10, atol=1e-10)
    ll, sq_item, sq_person = loglik_sse_numba(R, theta, d, b, g)
    _, si, sp = predict_sq_error(R, theta, d, b, g)
    # exact in the tails (|z| = 60 here), like the numpy objective
    assert ll == pytest.approx(loglik(R, theta, d, b, g), rel=1e-12)
    assert ll == pytest.approx(-nll_grad_numpy(R, theta, d, b, g)[0], rel=1e-12)
    np.testing.assert_allclose(sq_item, si, rtol=1e-12)
    np.testing.assert_allclose(sq_person, sp, rtol=1e-12)


@pytest.mark.parametrize("factors", [False, True])
def test_newton_and_lbfgs_reach_the_same_optimum(factors: bool) -> None:
    if factors:
        data, _ = simulate_hierarchical({"llm": 3, "retriever": 4, "icl": 2}, 400, seed=12)
        names: tuple[str, ...] = ("llm", "retriever", "icl")
    else:
        data, _ = simulate_flat(120, 500, seed=12, missing=0.05)
        names = ()
    fits = {
        s: fit_responses(data, FitConfig(solver=s, gtol=0.005, se="none", factors=names), compute_se=False)
        for s in ("newton", "lbfgs")
    }
    new, old = fits["newton"], fits["lbfgs"]
    assert new.converged and old.converged
    assert new.fit["solver"] == "newton" and old.fit["solver"] == "lbfgs"
    # same optimum: Newton's objective is at least as good, and the estimates agree
    assert new.fit["objective_per_response"] <= old.fit["objective_per_response"] + 1e-9
    assert new.fit["log_likelihood"] == pytest.approx(old.fit["log_likelihood"], abs=0.5)
    np.testing.assert_allclose(new.theta, old.theta, atol=0.01)
    np.testing.assert_allclose(new.difficulty, old.difficulty, atol=0.05)
    np.testing.assert_allclose(new.discrimination, old.discrimination, atol=0.05)
    np.testing.assert_allclose(new.guessing, old.guessing, atol=0.02)
    assert new.fit["iterations"] * 3 < old.fit["iterations"]


def test_newton_ml_2pl_anchors_and_agrees_with_lbfgs() -> None:
    data, _ = simulate_flat(150, 120, seed=13)
    cfg = FitConfig(model="2pl", priors=Priors.named("none"), gtol=0.005, se="none")
    new = fit_responses(data, cfg.replace(solver="newton"), compute_se=False)
    old = fit_responses(data, cfg.replace(solver="lbfgs"), compute_se=False)
    assert new.converged and "line search" not in new.fit["message"]
    gm = np.exp(np.log(new.discrimination).mean())
    # anchored to geometric mean 1 unless a bound binds (abilities of all-correct pipelines sit at their
    # bound): then only as far as the bounds allow, and the record says so (nothing is clipped)
    anchoring = str(new.identifiability["anchoring"])
    assert gm == pytest.approx(1.0, abs=1e-9) if "scale: bounds bind" not in anchoring else gm < 1
    assert abs(new.theta.mean()) < 1e-9 or "location: bounds bind" in anchoring
    # joint ML of a 2PL: the likelihood keeps rising as the scale stretches until abilities meet their bounds,
    # so with bounds binding the two solvers stop at nearly equal likelihoods on slightly different scales
    assert new.fit["log_likelihood"] >= old.fit["log_likelihood"] - 0.25
    assert np.corrcoef(new.theta, old.theta)[0, 1] > 0.9999


def test_solver_is_validated() -> None:
    with pytest.raises(ConfigError, match="unknown solver"):
        FitConfig(solver="sgd")


def test_item_rest_correlation_matches_the_loop_definition() -> None:
    rng = np.random.default_rng(0)
    R = (rng.random((120, 30)) < rng.random((120, 1))).astype(np.int8)
    R[rng.random(R.shape) < 0.2] = -1
    R[0] = 1  # constant responses: undefined
    R[1] = -1
    R[1, :2] = 1  # fewer than 3 answers: undefined
    obs = R >= 0
    tot_r, tot_n = (R == 1).sum(0).astype(float), obs.sum(0).astype(float)
    ref = np.full(len(R), np.nan)
    for i in range(len(R)):
        m = obs[i] & (tot_n > 1)
        if m.sum() < 3:
            continue
        x = (R[i, m] == 1).astype(float)
        y = (tot_r[m] - x) / (tot_n[m] - 1)
        if x.std() > 0 and y.std() > 0:
            ref[i] = np.corrcoef(x, y)[0, 1]
    got = _item_rest_corr(R)
    assert np.isnan(got[0]) and np.isnan(got[1])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got[~np.isnan(ref)], ref[~np.isnan(ref)], rtol=1e-10)
