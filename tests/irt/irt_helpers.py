"""Helpers shared by the IRT tests: random problems and central finite differences."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def random_problem(seed: int, n_items: int = 7, n_persons: int = 9, missing: float = 0.2) -> tuple[Any, ...]:
    """A random response matrix (-1 = missing) with 3PL parameters ``(R, theta, d, b, g)``."""
    rng = np.random.default_rng(seed)
    R = (rng.random((n_items, n_persons)) < 0.6).astype(np.int8)
    R[rng.random(R.shape) < missing] = -1
    theta = rng.normal(0, 1.5, n_persons)
    d = rng.uniform(0.2, 3.0, n_items)
    b = rng.normal(0, 1.5, n_items)
    g = rng.uniform(0.0, 0.45, n_items)
    return R, theta, d, b, g


def finite_diff(f: Callable[[Any], float], x: Any, eps: float = 1e-6) -> Any:
    """Central finite-difference gradient of ``f`` at ``x``."""
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out
