"""Computerized adaptive testing with known item parameters: a small functional API.

Everything works on a fixed grid of abilities (quadrature points), which keeps
each step a few vectorised array operations, cheap enough to run between
every round of an adaptive evaluation:

* :func:`response_loglik` -- the log-likelihood of some answers at every grid point
  (add it to a running per-pipeline total as answers arrive);
* :func:`eap` and :func:`map_estimate` -- ability with its standard error under a
  normal prior (expected a posteriori / posterior mode);
* :func:`information_at` -- Fisher information of every item at each ability;
* :func:`expected_score` -- the IRT-expected number correct on a set of items under
  a posterior, with its variance (ability uncertainty plus the binomial spread of
  answers not yet seen), the ingredient of gp-IRT-style full-exam estimates.

The 3PL model and its information are those of :mod:`ragrade.irt.model`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragrade.irt.model import information, prob

F64 = npt.NDArray[np.float64]
B8 = npt.NDArray[np.bool_]


def theta_points(low: float = -6.0, high: float = 6.0, n: int = 241) -> F64:
    """The quadrature grid (evenly spaced)."""
    return np.linspace(low, high, n)


def response_loglik(grid: F64, d: F64, b: F64, g: F64, y: npt.ArrayLike) -> F64:
    """Log-likelihood of answers ``y`` (1 right / 0 wrong, one per item) at every grid point: ``(n_grid,)``."""
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        return np.zeros(len(grid))
    p = np.clip(prob(grid, d, b, g), 1e-12, 1.0 - 1e-12)
    return np.asarray((y[:, None] * np.log(p) + (1.0 - y[:, None]) * np.log1p(-p)).sum(axis=0))


def log_normal_prior(grid: F64, mean: F64, sd: F64) -> F64:
    """log N(grid; mean, sd) up to a constant, one row per (mean, sd): ``(n, n_grid)``."""
    mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
    sd = np.atleast_1d(np.asarray(sd, dtype=np.float64))
    return np.asarray(-0.5 * ((grid[None, :] - mean[:, None]) / sd[:, None]) ** 2)


def posterior_weights(grid: F64, loglik: F64, mean: F64, sd: F64) -> F64:
    """Normalised posterior weights on the grid, one row per person: ``(n, n_grid)``."""
    lp = np.atleast_2d(loglik) + log_normal_prior(grid, mean, sd)
    lp -= lp.max(axis=1, keepdims=True)
    w = np.exp(lp)
    return np.asarray(w / w.sum(axis=1, keepdims=True))


def eap(grid: F64, loglik: F64, mean: F64, sd: F64) -> tuple[F64, F64, F64]:
    """Expected a posteriori abilities, their posterior SDs (the SEs), and the weights ``(n, n_grid)``.

    ``loglik`` is ``(n, n_grid)`` (from :func:`response_loglik`); the prior is N(mean, sd) per person.
    """
    w = posterior_weights(grid, loglik, mean, sd)
    m = w @ grid
    var = w @ grid**2 - m**2
    return m, np.sqrt(np.maximum(var, 0.0)), w


def map_estimate(grid: F64, loglik: F64, mean: F64, sd: F64) -> F64:
    """Posterior modes per person: the grid argmax refined by a parabola through its neighbours.

    Its SE is :func:`map_se` of the test information of the answered items at the mode.
    """
    lp = np.atleast_2d(loglik) + log_normal_prior(grid, mean, sd)
    k = np.clip(lp.argmax(axis=1), 1, len(grid) - 2)
    rows = np.arange(lp.shape[0])
    y0, y1, y2 = lp[rows, k - 1], lp[rows, k], lp[rows, k + 1]
    denom = y0 - 2 * y1 + y2
    safe = np.where(denom < 0, denom, -1.0)
    shift = np.where(denom < 0, 0.5 * (y0 - y2) / safe, 0.0)
    return np.asarray(grid[k] + np.clip(shift, -1.0, 1.0) * (grid[1] - grid[0]))


def map_se(test_info: F64, sd: F64) -> F64:
    """Posterior SE at the mode from the test information and the prior: ``1 / sqrt(I + 1/sd^2)``."""
    return np.asarray(1.0 / np.sqrt(np.asarray(test_info) + 1.0 / np.asarray(sd) ** 2))


def information_at(theta: F64, d: F64, b: F64, g: F64) -> F64:
    """Fisher information of every item at each ability: ``(n_items, n_theta)``."""
    return information(np.atleast_1d(np.asarray(theta, dtype=np.float64)), d, b, g)


def grid_probabilities(grid: F64, d: F64, b: F64, g: F64) -> tuple[F64, F64]:
    """``P`` (n_items, n_grid) of a right answer at each grid point, and ``P (1 - P)``."""
    p = prob(grid, d, b, g)
    return p, p * (1.0 - p)


def expected_score(weights: F64, P: F64, Q: F64, unasked: F64) -> tuple[F64, F64]:
    """Expected number right on the unasked items under each posterior, and its variance.

    ``weights`` (n, n_grid) are posterior weights; ``P`` and ``Q`` come from
    :func:`grid_probabilities`; ``unasked`` (n, n_items) is 1 where the item was not
    answered. The variance adds the spread over the posterior of the expected
    sum and the binomial variance of the answers themselves:
    ``Var_theta[S(theta)] + E_theta[sum_i p_i (1 - p_i)]``.
    """
    return sum_moments(weights, unasked @ P, unasked @ Q)


def sum_moments(weights: F64, S: F64, V: F64) -> tuple[F64, F64]:
    """Mean and variance of a sum of unseen answers under each posterior.

    ``S`` (n, n_grid) is the expected sum and ``V`` its binomial variance at every grid point (keep them
    up to date incrementally when items get answered: subtract the item's rows of ``P`` and ``Q``).
    """
    mean = (weights * S).sum(axis=1)
    var = (weights * S**2).sum(axis=1) - mean**2 + (weights * V).sum(axis=1)
    return mean, np.maximum(var, 0.0)


__all__ = [
    "eap",
    "expected_score",
    "grid_probabilities",
    "information_at",
    "log_normal_prior",
    "map_estimate",
    "map_se",
    "posterior_weights",
    "response_loglik",
    "sum_moments",
    "theta_points",
]
