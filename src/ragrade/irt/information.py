"""Item and test information of the 3PL model, on a theta grid, and grouped over items.

For an item with discrimination d, difficulty b and guessing g, and
``p = g + (1 - g) / (1 + exp(-d (theta - b)))``, the Fisher information about
theta is ``I(theta) = d^2 ((p - g) / (1 - g))^2 (1 - p) / p``. (The 2PL formula
``d^2 p (1 - p)`` overstates it whenever g > 0.) A set of items has test
information ``sum_i I_i`` (its inverse square root is the standard error of an
ability estimate) and mean information ``sum_i I_i / n``, the aggregate the
paper compares across item categories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.irt.model import information, prob

F64 = npt.NDArray[np.float64]


def theta_grid(low: float = -4.0, high: float = 4.0, n: int = 81, abilities: F64 | None = None) -> F64:
    """An evenly spaced grid, widened to cover every ability (plus a margin of 0.5)."""
    if abilities is not None and abilities.size:
        low = min(low, float(np.floor(2 * (abilities.min() - 0.5)) / 2))
        high = max(high, float(np.ceil(2 * (abilities.max() + 0.5)) / 2))
    return np.linspace(low, high, max(2, n))


def item_information(theta: F64 | float, d: F64, b: F64, g: F64) -> F64:
    """Information of each item at each theta: shape ``(n_items, n_theta)``."""
    return information(np.atleast_1d(np.asarray(theta, dtype=np.float64)), d, b, g)


def item_characteristic(theta: F64 | float, d: F64, b: F64, g: F64) -> F64:
    """P(correct) of each item at each theta: shape ``(n_items, n_theta)``."""
    return prob(np.atleast_1d(np.asarray(theta, dtype=np.float64)), d, b, g)


def test_information(theta: F64 | float, d: F64, b: F64, g: F64) -> F64:
    """Sum of the item information over the items at each theta."""
    total: F64 = item_information(theta, d, b, g).sum(axis=0)
    return total


test_information.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def mean_information(theta: F64 | float, d: F64, b: F64, g: F64) -> F64:
    """Mean item information (the paper's aggregated information) at each theta."""
    if d.size == 0:
        return np.zeros(np.atleast_1d(theta).shape)
    mean: F64 = item_information(theta, d, b, g).mean(axis=0)
    return mean


def theta_max_information(d: F64, b: F64, g: F64) -> F64:
    """Where each item's information peaks: ``b + ln((1 + sqrt(1 + 8g)) / 2) / d``."""
    return np.asarray(b + np.log((1.0 + np.sqrt(1.0 + 8.0 * g)) / 2.0) / d)


def grouped_information(
    grid: F64, d: F64, b: F64, g: F64, groups: Mapping[str, Mapping[str, Sequence[int]]]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Mean and sum information per level of each grouping (an item may sit in several levels)."""
    info = item_information(grid, d, b, g)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, levels in groups.items():
        out[name] = {}
        for level, positions in levels.items():
            idx = np.asarray(positions, dtype=np.int64)
            if idx.size == 0:
                continue
            block = info[idx]
            out[name][level] = {
                "n_items": int(idx.size),
                "mean": block.mean(axis=0).round(6).tolist(),
                "sum": block.sum(axis=0).round(6).tolist(),
            }
    return out


__all__ = [
    "grouped_information",
    "item_characteristic",
    "item_information",
    "mean_information",
    "test_information",
    "theta_grid",
    "theta_max_information",
]
