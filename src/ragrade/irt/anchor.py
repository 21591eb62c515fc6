"""Anchoring the location and scale of a fit after the optimiser, without ever changing the likelihood.

The likelihood is exactly invariant along two families of moves: location (``theta + c``,
``b + c``; flat model only, the hierarchical effects already sum to zero) and scale
(``theta s``, ``b s``, ``d / s``; 2PL/3PL). Without priors the fit is therefore anchored after
the optimiser: abilities centred to mean 0, discriminations to geometric mean 1. Each move is
applied only as far as every parameter stays inside its bounds: where a bound binds, the anchor is
met as closely as the bounds allow, the likelihood and every estimate's position relative to its
bound are unchanged, nothing is clipped, and the identifiability record says so. With priors the
scale is already set by them and nothing moves.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.irt.problem import Problem

F64 = npt.NDArray[np.float64]


def shift_range(values: list[tuple[F64, tuple[float, float]]]) -> tuple[float, float]:
    """Range of shifts ``c`` with ``lo <= v - c <= hi`` for every value array and its bounds."""
    cmin, cmax = -np.inf, np.inf
    for v, (lo, hi) in values:
        if v.size:
            cmin = max(cmin, float(v.max()) - hi)
            cmax = min(cmax, float(v.min()) - lo)
    return cmin, cmax


def scale_range(values: list[tuple[F64, tuple[float, float]]]) -> tuple[float, float]:
    """Range of factors ``s > 0`` with ``lo <= v s <= hi`` for every value array and its bounds."""
    smin, smax = 0.0, np.inf
    for v, (lo, hi) in values:
        pos, neg = v[v > 1e-300], v[v < -1e-300]
        if pos.size:
            smin, smax = max(smin, float((lo / pos).max())), min(smax, float((hi / pos).min()))
        if neg.size:
            smin, smax = max(smin, float((hi / neg).max())), min(smax, float((lo / neg).min()))
    return smin, smax


def anchor(prob: Problem, theta: F64, d: F64, b: F64, z: F64) -> tuple[F64, F64, F64, F64, dict[str, Any]]:
    """Apply the location/scale anchors as far as the bounds allow (the likelihood never changes)."""
    ident: dict[str, Any] = {}
    bd = prob.cfg.bounds
    binding: list[str] = []
    if prob.design is None:
        want = float(theta.mean())
        cmin, cmax = shift_range([(theta, bd.theta), (b, bd.difficulty)])
        c = float(np.clip(want, cmin, cmax)) if cmin <= cmax else 0.0
        theta, b = theta - c, b - c
        ident["location"] = "abilities centred to mean 0 after the fit (difficulties shifted with them)"
        if abs(c - want) > 1e-12:
            binding.append(f"location: bounds bind, abilities centred only to mean {want - c:.4g}")
    else:
        ident["location"] = "factor effects sum to zero within each factor (no reference level)"
        if prob.design.has_not_applicable:
            ident["location"] += (
                "; over the applicable levels only: a pipeline where a factor does not apply gets no effect "
                "from it, i.e. it is compared with the average applicable level"
            )
        ident["factors"] = prob.design.describe()
    if not prob.free_d:
        ident["scale"] = "fixed: every discrimination is 1 (1PL)"
    elif prob.cfg.priors.log_discrimination_sd is not None or prob.cfg.priors.theta_sd is not None:
        ident["scale"] = "set by the priors on abilities/effects and on log discrimination"
    else:
        want = float(np.exp(np.log(d).mean()))
        inv_d = (1.0 / bd.discrimination[1], 1.0 / bd.discrimination[0])
        # hierarchical: the box holds the effect coordinates z too
        smin, smax = scale_range([(theta, bd.theta), (z, bd.theta), (b, bd.difficulty), (1.0 / d, inv_d)])
        s = float(np.clip(want, smin, smax)) if smin <= smax else 1.0
        d, theta, b, z = d / s, theta * s, b * s, z * s
        ident["scale"] = "discriminations normalised to geometric mean 1 after the fit"
        if abs(s / want - 1.0) > 1e-12:
            binding.append(f"scale: bounds bind, discriminations normalised only to geometric mean {want / s:.4g}")
    # the moves stayed inside the bounds: clipping only removes rounding
    b, d = np.clip(b, *bd.difficulty), np.clip(d, *bd.discrimination)
    if prob.design is None:
        theta = np.clip(theta, *bd.theta)
    else:
        z = np.clip(z, *bd.theta)
        ident["theta_bounds"] = (
            "hierarchical model: the ability bounds hold each effect coordinate; an ability (a sum of "
            "effects) beyond them is flagged theta_beyond_bound"
        )
    ident["anchoring"] = "exact" if not binding else "partial: " + "; ".join(binding) + " (nothing clipped)"
    ident["clipped_after_anchoring"] = 0
    return theta, d, b, z, ident


__all__ = ["anchor", "scale_range", "shift_range"]
