"""Prediction-powered inference (PPI++) for the mean a human would give, with a few human labels.

Setting: ``n`` items carry a human label ``y`` and a judge score ``f``; ``N``
more items carry only a judge score ``f~``. The judge may be biased and noisy.
PPI corrects the judge's mean on all items by its average error on the
labelled ones::

    theta(lam) = lam * mean(f~) + mean(y - lam * f)
    var(lam)   = var_n(y - lam * f) / n + lam^2 * var_N(f~) / N
    CI         = theta +- z * sqrt(var)

PPI++ (Angelopoulos, Duchi and Zrnic, 2023) tunes ``lam`` to the variance
minimiser ``lam* = cov_n(y, f) / ((1 + n/N) * var(f))`` (``var(f)`` over labelled
and unlabelled scores together, divided by ``n + N - 1``), clipped to [0, 1]:
``lam = 0`` is the classical human-only estimate, ``lam = 1`` plain PPI. The
interval is valid whatever the judge's quality when the labelled items are a
uniform random sample of the items; a useless judge only costs width, never
coverage.

The conventions are ppi_py's (``ppi_mean_ci``, ``ppi_mean_pointestimate`` and
``classical_mean_ci`` of ppi-python 0.2.3), so the numbers are the same to
rounding: ``cov_n`` and ``var_n``, ``var_N`` divide by the sample size ``n``
(``N``), not ``n - 1``; only ``var(f)`` in ``lam*`` divides by ``n + N - 1``.
One difference: where the judge's scores are all equal ppi_py's ``lam`` is 0/0
(NaN) and here it is 0 (the human-only estimate).

Every function works on the last axis, so many simulated problems (equal
``n`` and ``N``) can be solved in one vectorised call.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def z_value(level: float) -> float:
    """The two-sided normal quantile of ``level`` (1.96 for 0.95)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def _var(a: Array, ddof: int = 0) -> Array:
    return np.asarray(np.var(a, axis=-1, ddof=ddof), dtype=np.float64)


def power_tuned_lambda(y: Array, f: Array, f_unlabeled: Array, *, clip: bool = True) -> Array:
    """PPI++'s ``lam* = cov_n(y, f) / ((1 + n/N) var(f_all))``, as ppi_py (0 where the judge's scores are constant)."""
    n, big_n = y.shape[-1], f_unlabeled.shape[-1]
    yc = y - y.mean(axis=-1, keepdims=True)
    fc = f - f.mean(axis=-1, keepdims=True)
    cov = (yc * fc).sum(axis=-1) / n
    var_f = _var(np.concatenate([f, f_unlabeled], axis=-1), ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where(var_f > 0, cov / ((1.0 + n / big_n) * np.where(var_f > 0, var_f, 1.0)), 0.0)
    return np.clip(lam, 0.0, 1.0) if clip else lam


def ppi_mean(
    y: Array, f: Array, f_unlabeled: Array, *, level: float = 0.95, lam: float | Array | None = None
) -> tuple[Array, Array, Array, Array]:
    """``(estimate, low, high, lam)`` of the PPI++ mean (``lam=None``: power-tuned)."""
    y, f, fu = (np.asarray(a, dtype=np.float64) for a in (y, f, f_unlabeled))
    n, big_n = y.shape[-1], fu.shape[-1]
    if n < 2 or big_n < 2:
        raise ValueError(f"PPI needs at least 2 labelled and 2 unlabelled items, got {n} and {big_n}")
    lam_arr = power_tuned_lambda(y, f, fu) if lam is None else np.broadcast_to(np.asarray(lam, float), y.shape[:-1])
    lam_k = np.asarray(lam_arr)[..., None]
    theta = (lam_k[..., 0] * fu.mean(axis=-1)) + (y - lam_k * f).mean(axis=-1)
    var = _var(y - lam_k * f) / n + np.asarray(lam_arr) ** 2 * _var(fu) / big_n
    half = z_value(level) * np.sqrt(var)
    return theta, theta - half, theta + half, np.asarray(lam_arr, dtype=np.float64)


def classical_mean(y: Array, *, level: float = 0.95) -> tuple[Array, Array, Array]:
    """``(mean, low, high)``: the normal interval from the labels alone (standard error ``sd_n / sqrt(n)``)."""
    y = np.asarray(y, dtype=np.float64)
    m = y.mean(axis=-1)
    half = z_value(level) * np.sqrt(_var(y) / y.shape[-1])
    return m, m - half, m + half


@dataclass(frozen=True)
class MeanEstimate:
    """One corrected estimate beside the human-only and the uncorrected judge estimates."""

    n_labels: int
    n_unlabeled: int
    ppi_estimate: float
    ppi_ci: tuple[float, float]
    lam: float
    human_mean: float
    human_only_ci: tuple[float, float]
    judge_mean: float
    judge_ci: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (intervals as ``[low, high]``)."""
        return {
            "n_labels": self.n_labels,
            "n_unlabeled": self.n_unlabeled,
            "ppi_estimate": self.ppi_estimate,
            "ppi_ci": list(self.ppi_ci),
            "lambda": self.lam,
            "human_mean": self.human_mean,
            "human_only_ci": list(self.human_only_ci),
            "judge_mean": self.judge_mean,
            "judge_ci": list(self.judge_ci),
        }


def estimate(y: Array, f: Array, f_unlabeled: Array, *, level: float = 0.95) -> MeanEstimate:
    """PPI++, human-only and judge-only estimates of one mean (1-D inputs)."""
    y, f, fu = (np.asarray(a, dtype=np.float64).ravel() for a in (y, f, f_unlabeled))
    theta, lo, hi, lam = ppi_mean(y, f, fu, level=level)
    hm, hlo, hhi = classical_mean(y, level=level)
    f_all = np.concatenate([f, fu])
    jm, jlo, jhi = classical_mean(f_all, level=level)
    return MeanEstimate(
        n_labels=int(y.size),
        n_unlabeled=int(fu.size),
        ppi_estimate=float(theta),
        ppi_ci=(float(lo), float(hi)),
        lam=float(lam),
        human_mean=float(hm),
        human_only_ci=(float(hlo), float(hhi)),
        judge_mean=float(jm),
        judge_ci=(float(jlo), float(jhi)),
    )


def combine_strata(parts: list[tuple[float, float, float, float]], *, level: float = 0.95) -> dict[str, Any]:
    """Pool per-stratum estimates ``(estimate, low, high, weight)`` (weights: stratum sizes).

    Each stratum's standard error is read back from its symmetric interval; the
    pooled mean is the weighted mean and its variance ``sum(w^2 se^2)`` with
    weights normalised to 1 (a stratified estimate: labels sampled uniformly
    within each configuration, at any rate per configuration).
    """
    z = z_value(level)
    total = sum(p[3] for p in parts)
    est = sum(p[0] * p[3] for p in parts) / total
    var = sum(((p[2] - p[1]) / (2 * z)) ** 2 * (p[3] / total) ** 2 for p in parts)
    half = z * float(np.sqrt(var))
    return {"estimate": est, "ci": [est - half, est + half]}


__all__ = ["MeanEstimate", "classical_mean", "combine_strata", "estimate", "power_tuned_lambda", "ppi_mean", "z_value"]
