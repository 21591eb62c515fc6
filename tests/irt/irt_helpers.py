"""Helpers shared by the IRT tests: random problems and central finite differences."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

#: the 63-pipeline grid of the coverage tests (test_irt_accuracy_pp, test_irt_output, test_irt_jackknife)
COVERAGE_GRID = {"llm": 3, "retriever": 7, "icl": 3}


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


@cache
def coverage_grid_fit(seed: int) -> tuple[Any, Any, Any]:
    """``(data, truth, MAP fit)`` of :data:`COVERAGE_GRID` with 1000 questions simulated with ``seed``, fitted
    with the default config over its three factors.

    Three coverage tests fit the same grids (seeds 200-259 and 300-302), so the fits are made once per test
    session. Read only: a test must not change what this returns (``parametric_se`` does: refit for it).
    """
    from ragrade.irt.fit import FitConfig, fit_responses
    from ragrade.irt.simulate import simulate_hierarchical

    data, truth = simulate_hierarchical(COVERAGE_GRID, 1000, seed=seed)
    return data, truth, fit_responses(data, FitConfig(factors=tuple(COVERAGE_GRID)))
