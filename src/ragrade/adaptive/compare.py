"""How close adaptive estimates came to a full grid's accuracies (the replayed demo, the benchmark, the tests).

One function for everyone who compares: ``ragrade run``'s adaptive stage (``comparison.json``) and
the simulator's ``score_run`` (``tests/support/adaptive_sim.py``, for the tests and the benchmark) both
call :func:`agreement`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
TOLERANCE = 1e-9  # a pipeline asked every item has a zero-width interval: count / n and a mean differ by rounding


def kendall_tau(a: F64, b: F64) -> float:
    """Kendall's tau-b of two score vectors."""
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


@dataclass(frozen=True)
class Agreement:
    """Estimates against the truth, over the pipelines with an estimate (``compared`` of them)."""

    compared: int
    top1: bool  # the estimated best has the best true accuracy (identical twins tie)
    kendall_tau: float
    mae: float
    coverage: float  # share of the 95% intervals that hold the true accuracy
    covered: npt.NDArray[np.bool_]  # per pipeline (False where there is no estimate)


def agreement(est: F64, low: F64, high: F64, truth: F64, best_truth: float | None = None) -> Agreement:
    """Compare estimates and intervals with ``truth`` (NaN estimates: pipelines without one, left out).

    ``best_truth``: the best true accuracy of the whole grid when ``truth`` covers only a part of it.
    """
    est, low, high, truth = (np.asarray(a, dtype=np.float64) for a in (est, low, high, truth))
    ok = np.isfinite(est)
    covered = ok & (low - TOLERANCE <= truth) & (truth <= high + TOLERANCE)
    n = int(ok.sum())
    if n == 0:
        return Agreement(0, False, float("nan"), float("nan"), float("nan"), covered)
    top = float(truth.max()) if best_truth is None else best_truth
    return Agreement(
        compared=n,
        top1=bool(truth[int(np.nanargmax(est))] >= top - 1e-12),
        kendall_tau=kendall_tau(est[ok], truth[ok]) if n > 1 else float("nan"),
        mae=float(np.abs(est[ok] - truth[ok]).mean()),
        coverage=float(covered[ok].mean()),
        covered=covered,
    )


__all__ = ["TOLERANCE", "Agreement", "agreement", "kendall_tau"]
