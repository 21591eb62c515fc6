"""Factor effects as changes in expected accuracy on this exam (percentage points).

An effect in logits has a unit set by the priors (or the anchoring), so it reads differently from
one fit to the next. Its meaning on this exam does not: with ``A(theta) = mean_i P_i(theta)``
the expected accuracy over the exam's questions, the effect of level ``l`` of factor ``f`` is

    100 * (mean_p A(theta_p - e_f(p) + e_l) - mean_p A(theta_p - e_f(p)))

over the pipelines ``p`` where ``f`` applies: how much their expected accuracy would change if they
all had level ``l`` instead of the average level, the other components as they are. ``A`` is
increasing in theta (every discrimination is positive), so the 95% interval of the effect maps to
an interval in percentage points through the same curve (item parameters taken as known).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ragrade.irt.hierarchical import Design
from ragrade.irt.model import prob

F64 = npt.NDArray[np.float64]
GRID_POINTS = 401
ITEM_CHUNK = 20_000


def expected_accuracy_curve(lo: float, hi: float, d: F64, b: F64, g: F64) -> tuple[F64, F64]:
    """``A(theta)`` on an even grid over [lo, hi] (items in chunks: bounded memory)."""
    grid = np.linspace(lo, hi, GRID_POINTS)
    total = np.zeros(GRID_POINTS)
    for s in range(0, len(d), ITEM_CHUNK):
        sl = slice(s, s + ITEM_CHUNK)
        total += prob(grid, d[sl], b[sl], g[sl]).sum(axis=0)
    return grid, total / max(1, len(d))


def accuracy_effects(
    design: Design,
    theta: F64,
    effects: dict[str, dict[str, tuple[float, float]]],
    d: F64,
    b: F64,
    g: F64,
) -> dict[str, dict[str, dict[str, float]]]:
    """Per factor and level: ``accuracy_pp`` and ``accuracy_pp_ci95`` (low, high) as defined above."""
    base: dict[str, F64] = {}
    shifts: list[float] = [0.0]
    for f in design.factors:
        eff = np.array([effects[f.name][lvl][0] for lvl in f.levels])
        on = f.applies
        base[f.name] = theta[on] - eff[f.codes[on]]
        for est, se in effects[f.name].values():
            shifts += [est - 1.96 * se, est + 1.96 * se] if np.isfinite(se) else [est]
    lows = [float(v.min()) for v in base.values() if v.size]
    highs = [float(v.max()) for v in base.values() if v.size]
    if not lows:
        return {}
    grid, A = expected_accuracy_curve(min(lows) + min(shifts) - 0.1, max(highs) + max(shifts) + 0.1, d, b, g)

    def mean_acc(t: F64) -> float:
        return float(np.interp(t, grid, A).mean())

    out: dict[str, dict[str, dict[str, float]]] = {}
    for f in design.factors:
        t0 = base[f.name]
        if not t0.size:
            continue
        ref = mean_acc(t0)
        out[f.name] = {}
        for lvl, (est, se) in effects[f.name].items():
            rec = {"accuracy_pp": 100.0 * (mean_acc(t0 + est) - ref)}
            if np.isfinite(se):
                rec["accuracy_pp_ci95_low"] = 100.0 * (mean_acc(t0 + est - 1.96 * se) - ref)
                rec["accuracy_pp_ci95_high"] = 100.0 * (mean_acc(t0 + est + 1.96 * se) - ref)
            out[f.name][lvl] = rec
    return out


__all__ = ["accuracy_effects", "expected_accuracy_curve"]
