"""Agreement between metrics: Spearman's rank correlation and Cohen's kappa.

They tell users how far to trust a judge: if an LLM judge's correctness
scores do not rank answers like BERTScore does, or its verdicts disagree
with exact match beyond chance, one of them is measuring something else.
Pairs where either value is missing are left out, and the number of pairs
used is always reported with the statistic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt


def _ranks(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_vals = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _pairs(x: Sequence[float | None], y: Sequence[float | None]) -> tuple[npt.NDArray[np.float64], ...]:
    if len(x) != len(y):
        raise ValueError(f"need equal lengths, got {len(x)} and {len(y)}")
    keep = [
        (a, b)
        for a, b in zip(x, y, strict=True)
        if a is not None and b is not None and not (math.isnan(a) or math.isnan(b))
    ]
    xs = np.array([a for a, _ in keep], dtype=np.float64)
    ys = np.array([b for _, b in keep], dtype=np.float64)
    return xs, ys


def spearman(x: Sequence[float | None], y: Sequence[float | None]) -> dict[str, Any]:
    """Spearman's rho (Pearson correlation of average ranks) over complete pairs.

    Returns ``{"rho", "p_value", "n"}``; ``rho`` is None with a ``note`` when
    fewer than 3 pairs remain or one side is constant.
    """
    xs, ys = _pairs(x, y)
    n = len(xs)
    if n < 3:
        return {"rho": None, "p_value": None, "n": n, "note": "fewer than 3 complete pairs"}
    rx, ry = _ranks(xs), _ranks(ys)
    if np.all(rx == rx[0]) or np.all(ry == ry[0]):
        return {"rho": None, "p_value": None, "n": n, "note": "one metric is constant"}
    rho = float(np.corrcoef(rx, ry)[0, 1])
    p_value: float | None = None
    try:
        from scipy import stats

        p_value = float(stats.spearmanr(xs, ys).pvalue)
    except ImportError:  # pragma: no cover - scipy is a core dependency
        p_value = None
    return {"rho": rho, "p_value": p_value, "n": n}


def cohen_kappa(a: Sequence[float | None], b: Sequence[float | None]) -> dict[str, Any]:
    """Cohen's kappa between two raters' labels over complete pairs.

    Labels are compared as given (use 0/1 for binary verdicts). Returns
    ``{"kappa", "observed", "expected", "n"}``; ``kappa`` is None with a
    ``note`` when there are no pairs or chance agreement is 1 (both raters
    constant on the same label).
    """
    xs, ys = _pairs(a, b)
    n = len(xs)
    if n == 0:
        return {"kappa": None, "observed": None, "expected": None, "n": 0, "note": "no complete pairs"}
    labels = sorted(set(xs.tolist()) | set(ys.tolist()))
    observed = float(np.mean(xs == ys))
    expected = float(sum(np.mean(xs == lab) * np.mean(ys == lab) for lab in labels))
    if math.isclose(expected, 1.0):
        return {
            "kappa": None,
            "observed": observed,
            "expected": expected,
            "n": n,
            "note": "chance agreement is 1 (both raters constant)",
        }
    kappa = (observed - expected) / (1.0 - expected)
    return {"kappa": float(kappa), "observed": observed, "expected": expected, "n": n}


def binarize(values: Sequence[float | None], threshold: float) -> list[float | None]:
    """1.0 where ``value >= threshold``, 0.0 below, None kept as None."""
    return [None if v is None else float(v >= threshold) for v in values]


__all__ = ["binarize", "cohen_kappa", "spearman"]
