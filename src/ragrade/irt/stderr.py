"""Standard errors of a fit: observed information (items profiled out) and a sandwich for factor effects.

* Items: the inverse of each item's observed 3x3 block (priors included).
* Abilities (flat model): the test information at the estimate, items held fixed.
* Factor effects (hierarchical model): the observed information of the effects with every item's
  parameters profiled out by a Schur complement (:func:`ragrade.irt.hierarchical.observed_information`).
* ``sandwich`` (robust): ``S^-1 M S^-1`` with ``S`` that profiled information and ``M = sum_i u_i u_i'``
  the outer products of each question's score for the effects, i.e. questions are the independent
  units. It does not rely on the model's variance being right, and it counts the spread between
  questions that the observed information misses when items vary more than the model allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragrade.irt.hierarchical import effects_cov, observed_information
from ragrade.irt.io import Responses
from ragrade.irt.model import block_slices, fisher_theta, sig_pair
from ragrade.irt.problem import FitConfig, Problem

F64 = npt.NDArray[np.float64]


@dataclass
class StandardErrors:
    """SEs of one fit; ``cov_z`` (and ``cov_z_robust``) are covariances of the effect coordinates."""

    theta_se: F64
    item_se: F64  # (n_items, 3): d, b, g
    cov_z: F64 | None
    cov_z_robust: F64 | None
    method: str


def item_prior_hess(prob: Problem, d: F64, b: F64, g: F64) -> F64:
    """Per item, the diagonal of the prior's negative log-density Hessian in (d, b, g)."""
    pr = prob.cfg.priors
    out = np.zeros((len(d), 3))
    if pr.log_discrimination_sd is not None and prob.free_d:
        s2 = pr.log_discrimination_sd**2
        out[:, 0] = (1.0 - np.log(d)) / (s2 * d**2)
    if pr.difficulty_sd is not None:
        out[:, 1] = 1.0 / pr.difficulty_sd**2
    if pr.guessing_beta is not None and prob.free_g:
        a, c = pr.guessing_beta
        gg = np.maximum(g, 1e-6)
        out[:, 2] = (a - 1.0) / gg**2 + (c - 1.0) / (1.0 - gg) ** 2
    return out


def item_ses(H: F64, prior: F64, free: list[int]) -> F64:
    """SEs of (d, b, g) from each item's observed block plus its prior (NaN where fixed or singular)."""
    se = np.full((H.shape[0], 3), np.nan)
    B = H[:, free][:, :, free] + np.stack([np.diag(v) for v in prior[:, free]])
    with np.errstate(invalid="ignore"):
        try:
            cov = np.linalg.inv(B)
        except np.linalg.LinAlgError:
            cov = np.linalg.pinv(B, hermitian=True)
        diag = np.diagonal(cov, axis1=1, axis2=2)
        se[:, free] = np.where(diag > 0, np.sqrt(np.abs(diag)), np.nan)
    return se


def item_scores(R: npt.NDArray[np.int8], theta: F64, d: F64, b: F64, g: F64, X: F64) -> F64:
    """Per question, the score of its responses for the effect coordinates: ``sum_p dl_ip/dtheta_p X_p``."""
    U = np.zeros((R.shape[0], X.shape[1]))
    for sl in block_slices(*R.shape):
        r = R[sl]
        dd, gg = d[sl, None], g[sl, None]
        s, sc = sig_pair(dd * (theta[None, :] - b[sl, None]))
        p = gg + (1.0 - gg) * s
        lz = np.where(r == 1, (1.0 - gg) * s * sc / p, -s) * (r >= 0)
        U[sl] = (lz * dd) @ X
    return U


def sandwich_cov(cov_z: F64, U: F64) -> F64:
    """``S^-1 (sum_i u_i u_i') S^-1`` with ``cov_z = S^-1`` and the per-question scores ``U`` (n, k)."""
    M = U.T @ U
    out = cov_z @ M @ cov_z
    return np.asarray(0.5 * (out + out.T))


def _fused_flat(prob: Problem, R: npt.NDArray[np.int8], theta: F64, d: F64, b: F64, g: F64) -> tuple[F64, F64]:
    """Items' observed (d, b, g) blocks without priors and each ability's Fisher information, in one pass."""
    from ragrade.irt.newton import pick_newton_kernels, sym_blocks

    pass_fn, _ = pick_newton_kernels("numba")
    A = np.empty(R.shape, dtype=np.float32)  # per-response weights the pass stores (unused here)
    Bg = np.empty(R.shape, dtype=np.float32) if prob.free_g else np.zeros((1, R.shape[1]), dtype=np.float32)
    _, _, _, H6, _, fisher = pass_fn(R, theta, d, b, g, A, Bg, prob.free_g)
    return sym_blocks(H6), fisher


def standard_errors(
    prob: Problem, data: Responses, cfg: FitConfig, theta: F64, d: F64, b: F64, g: F64
) -> StandardErrors:
    """Observed-information SEs of every parameter, and the sandwich covariance of the effects."""
    pr = cfg.priors
    R = data.R
    prior_prec = 0.0 if pr.theta_sd is None else 1.0 / pr.theta_sd**2
    free = [i for i, on in enumerate((prob.free_d, True, prob.free_g)) if on]
    ph = item_prior_hess(prob, d, b, g)
    nuisance = [i for i in free if not (i == 0 and pr.log_discrimination_sd is None and pr.theta_sd is None)]
    X = prob.design.X if prob.design is not None else None
    if X is None and prob.backend == "numba":
        # one fused parallel pass gives both the items' observed blocks and the abilities' information
        H, fisher = _fused_flat(prob, R, theta, d, b, g)
        item_se = item_ses(H, ph, free)
        theta_se = 1.0 / np.sqrt(fisher + prior_prec)
        method = "abilities: test information at the estimate (items fixed); items: observed 3x3 blocks"
        return StandardErrors(theta_se, item_se, None, None, method)
    H, h_tt, red = observed_information(R, theta, (d, b, g), ph, X, nuisance)
    item_se = item_ses(H, ph, free)
    if X is None:
        theta_se = 1.0 / np.sqrt(fisher_theta(R, theta, d, b, g) + prior_prec)
        method = "abilities: test information at the estimate (items fixed); items: observed 3x3 blocks"
        return StandardErrors(theta_se, item_se, None, None, method)
    cov_z = effects_cov(X, h_tt, red, prior_prec)
    cov_rob = sandwich_cov(cov_z, item_scores(R, theta, d, b, g, X))
    use = cov_rob if cfg.se == "sandwich" else cov_z
    theta_se = np.sqrt(np.maximum(np.einsum("pk,kl,pl->p", X, use, X), 0.0))
    if cfg.se == "sandwich":
        method = "sandwich (robust, questions as independent units) around the observed information, items profiled out"
    else:
        method = "observed information, item parameters profiled out (Schur complement)"
    if len(nuisance) < len(free):
        method += "; conditional on discriminations (scale anchor, no priors)"
    return StandardErrors(theta_se, item_se, cov_z, cov_rob, method)


__all__ = ["StandardErrors", "item_prior_hess", "item_scores", "item_ses", "sandwich_cov", "standard_errors"]
