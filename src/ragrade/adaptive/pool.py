"""Pooling across the grid for adaptive runs: the additive model over factors, as an empirical-Bayes prior.

Pipelines of a grid share factor levels (the same LLM, retriever, ICL level).
Under the additive hierarchical model, a pipeline's ability is the sum of its
levels' effects plus a pipeline-specific deviation: ``theta_p = x_p' beta + u_p``,
``u_p ~ N(0, tau^2)``. Given per-pipeline ability estimates ``m_p`` with
variances ``v_p`` (from the answers alone), :func:`pooled_prior` fits ``beta`` by
weighted least squares, ``tau^2`` by the method of moments (never below
``min_tau^2``), and returns every pipeline's prior ``N(x_p' beta, tau^2 + x_p' Cov(beta) x_p)``:
the pipelines measured so far inform the others, and a pipeline never measured
(the factorial shortcut) gets a *predicted* ability from it. A pipeline whose
combination of levels is not spanned by the measured ones gets the plain prior.

:func:`design_subset` picks the pipelines the factorial shortcut measures: a
greedy D-optimal subset of the grid over the factors' main effects.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
B8 = npt.NDArray[np.bool_]


def design_matrix(levels: Sequence[Mapping[str, object]]) -> tuple[F64, list[str]]:
    """Intercept plus treatment-coded columns of every factor with more than one value; and the column names."""
    if not levels:
        return np.zeros((0, 1)), ["intercept"]
    names = sorted({k for row in levels for k in row})
    cols: list[F64] = [np.ones(len(levels))]
    labels = ["intercept"]
    for name in names:
        values = [str(row.get(name, "")) for row in levels]
        distinct = sorted(set(values))
        for lvl in distinct[1:]:
            cols.append(np.array([1.0 if v == lvl else 0.0 for v in values]))
            labels.append(f"{name}={lvl}")
    return np.column_stack(cols), labels


def pooled_prior(
    X: F64, have: B8, m: F64, v: F64, *, min_tau: float, fallback_sd: float = 1.0
) -> tuple[F64, F64, dict[str, float]]:
    """Prior means and SDs of every pipeline from the additive model fitted on the pipelines in ``have``.

    ``m``, ``v``: per-pipeline ability estimates and their variances (answers only); ``have``: the
    pipelines with answers. Falls back to N(0, ``fallback_sd``) for every pipeline while too few
    pipelines have answers to fit the model (fewer than its rank + 2).
    """
    n = X.shape[0]
    mean, sd = np.zeros(n), np.full(n, fallback_sd)
    Xd, y, vd = X[have], m[have], v[have]
    rank = int(np.linalg.matrix_rank(Xd)) if len(Xd) else 0
    if len(Xd) < rank + 2 or rank == 0:
        return mean, sd, {"pooled": 0.0, "tau": float("nan")}
    tau2 = max(min_tau**2, float(np.var(y)))
    for _ in range(4):
        w = 1.0 / (vd + tau2)
        A = Xd.T @ (w[:, None] * Xd)
        cov = np.linalg.pinv(A, rcond=1e-10)
        beta = cov @ (Xd.T @ (w * y))
        r = y - Xd @ beta
        tau2 = max(min_tau**2, float((r**2 - vd).sum()) / max(1, len(y) - rank))
    pred = X @ beta
    var_pred = np.einsum("ij,jk,ik->i", X, cov, X)
    # a combination outside the span of the measured rows cannot be predicted: plain prior there
    proj = X @ np.linalg.pinv(Xd, rcond=1e-10) @ Xd
    spanned = np.abs(proj - X).max(axis=1) < 1e-6
    mean = np.where(spanned, pred, 0.0)
    sd = np.where(spanned, np.sqrt(tau2 + np.maximum(var_pred, 0.0)), fallback_sd)
    return mean, sd, {"pooled": 1.0, "tau": math.sqrt(tau2)}


def design_subset(X: F64, size: int, seed: int = 0) -> list[int]:
    """A greedy D-optimal subset of ``size`` rows of ``X`` (at least its rank), in the order chosen.

    Each step adds the row that most increases ``log det(X_S' X_S + eps I)``; ties go to a seeded
    random order, so the subset is reproducible.
    """
    n, k = X.shape
    size = max(min(n, size), min(n, int(np.linalg.matrix_rank(X)) if n else 0))
    order = np.random.default_rng(seed).permutation(n)
    chosen: list[int] = []
    M = 1e-6 * np.eye(k)
    for _ in range(size):
        Minv = np.linalg.inv(M)
        gain = np.einsum("ij,jk,ik->i", X[order], Minv, X[order])  # det grows by (1 + x' M^-1 x)
        gain[np.isin(order, chosen)] = -np.inf
        best = int(order[int(np.argmax(gain))])
        chosen.append(best)
        M = M + np.outer(X[best], X[best])
    return chosen


__all__ = ["design_matrix", "design_subset", "pooled_prior"]
