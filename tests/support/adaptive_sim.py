"""Validation harness of adaptive runs: simulated grids with planted effects, and the scores of a run.

For the tests (``tests/adaptive``) and ``benchmarks/bench_adaptive.py`` only (it was
``ragrade.adaptive.simulate``; no production code or CLI verb uses it).

:func:`simulate_grid` draws a full response matrix for a grid of pipelines
(factor levels with planted additive effects, optional interactions) on a 3PL
exam; :func:`adaptive_on_matrix` runs the real :class:`~ragrade.adaptive.scheduler.Scheduler`
against such a matrix (or a replayed run's), answering each request from it;
:func:`score_run` compares the estimates with the full grid's accuracies
(requests share, top-1 agreement, Kendall tau, MAE, interval coverage).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ragrade.adaptive.compare import agreement
from ragrade.adaptive.scheduler import Scheduler, run_rounds
from ragrade.adaptive.state import ItemParams
from ragrade.irt.simulate import draw_items, sample_matrix
from ragrade.run.adaptive_config import AdaptiveConfig

F64 = npt.NDArray[np.float64]


@dataclass
class SimGrid:
    """A simulated full grid: responses ``R`` (pipelines x items, 1/0/-1), true item parameters, factors."""

    pipelines: list[str]
    factors: list[dict[str, str]]
    R: npt.NDArray[np.int8]
    truth: ItemParams
    theta: F64
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def accuracy(self) -> F64:
        """Full-grid accuracy of every pipeline (missing answers excluded)."""
        ok = self.R >= 0
        return np.asarray((self.R == 1).sum(axis=1) / np.maximum(ok.sum(axis=1), 1))


def simulate_grid(
    levels: Mapping[str, int],
    n_items: int,
    seed: int = 0,
    effect_sd: float | Mapping[str, float] = 0.6,
    interaction_sd: float = 0.0,
    items: ItemParams | None = None,
) -> SimGrid:
    """Every combination of ``levels`` answers ``n_items`` 3PL items; theta = sum of planted effects (+ noise).

    ``effect_sd`` (one value, or one per factor) sets the spread of each factor's planted effects;
    ``interaction_sd`` adds a pipeline-specific deviation (outside the additive model); ``items``
    reuses an exam's item parameters (e.g. for an earlier run on the same exam).
    """
    rng = np.random.default_rng(seed)
    names = list(levels)
    sds = {n: float(effect_sd[n]) if isinstance(effect_sd, Mapping) else float(effect_sd) for n in names}
    effects = {n: rng.normal(0.0, sds[n], levels[n]) for n in names}
    combos = list(itertools.product(*[range(levels[n]) for n in names]))
    theta = np.array([sum(effects[n][c[j]] for j, n in enumerate(names)) for c in combos])
    theta = theta - theta.mean() + rng.normal(0.0, interaction_sd, len(combos))
    d, b, g = draw_items(n_items, rng) if items is None else (items.d, items.b, items.g)
    R = sample_matrix(theta, d, b, g, rng).T.copy()
    pipelines = ["|".join(f"{n}={n}{c[j]}" for j, n in enumerate(names)) for c in combos]
    factors = [{n: f"{n}{c[j]}" for j, n in enumerate(names)} for c in combos]
    ids = [f"q{i:05d}" for i in range(len(d))] if items is None else items.items
    return SimGrid(pipelines, factors, R, ItemParams(ids, d, b, g, "truth"), theta, {"effects": effects})


def simulate_grid_2d(
    levels: Mapping[str, int],
    n_items: int,
    seed: int = 0,
    effect_sd: float | Mapping[str, float] = 0.6,
    rho: float = 0.3,
    items: ItemParams | None = None,
    angles: F64 | None = None,
) -> SimGrid:
    """A grid whose pipelines differ along two abilities: half the items load mostly on each.

    Each factor level gets an effect on both abilities (correlation ``rho``); item ``i`` answers
    ``g + (1 - g) / (1 + exp(-d (cos(a_i) theta_1 + sin(a_i) theta_2 - b)))`` with ``a_i`` 0.15 or 1.4 rad.
    ``items`` / ``angles`` reuse an exam (for an earlier run on it); the angles are in ``extra``.
    """
    rng = np.random.default_rng(seed)
    names = list(levels)
    sds = {n: float(effect_sd[n]) if isinstance(effect_sd, Mapping) else float(effect_sd) for n in names}
    combos = list(itertools.product(*[range(levels[n]) for n in names]))
    th = np.zeros((len(combos), 2))
    for n in names:
        e1 = rng.normal(0.0, sds[n], levels[n])
        e2 = rho * e1 + np.sqrt(1 - rho**2) * rng.normal(0.0, sds[n], levels[n])
        for k, c in enumerate(combos):
            th[k] += (e1[c[names.index(n)]], e2[c[names.index(n)]])
    th -= th.mean(axis=0)
    d, b, g = draw_items(n_items, rng) if items is None else (items.d, items.b, items.g)
    if angles is None:
        angles = np.where(rng.random(len(d)) < 0.5, 0.15, 1.4)
    z = d[None, :] * (th[:, :1] * np.cos(angles)[None, :] + th[:, 1:] * np.sin(angles)[None, :] - b[None, :])
    P = g[None, :] + (1 - g[None, :]) / (1 + np.exp(-z))
    R = (rng.random(P.shape) < P).astype(np.int8)
    pipelines = ["|".join(f"{n}={n}{c[j]}" for j, n in enumerate(names)) for c in combos]
    factors = [{n: f"{n}{c[j]}" for j, n in enumerate(names)} for c in combos]
    ids = [f"q{i:05d}" for i in range(len(d))] if items is None else items.items
    truth = ItemParams(ids, d, b, g, "truth")
    return SimGrid(pipelines, factors, R, truth, th.sum(axis=1), {"angles": angles, "theta2": th})


def fit_params(R: npt.NDArray[np.int8], items: Sequence[str], model: str = "2pl") -> ItemParams:
    """Item parameters fitted (flat model) on a response matrix (pipelines x items, -1 missing)."""
    import pandas as pd

    from ragrade.irt.fit import fit_irt

    rows = [
        {"pipeline": f"p{p:04d}", "question_id": items[i], "correct": int(R[p, i])}
        for p, i in zip(*np.nonzero(R >= 0), strict=True)
    ]
    res = fit_irt(pd.DataFrame(rows), model=model)
    pos = {q: k for k, q in enumerate(res.items)}
    idx = np.array([pos.get(q, -1) for q in items])
    d = np.where(idx >= 0, res.discrimination[idx], 1.0)
    b = np.where(idx >= 0, res.difficulty[idx], 0.0)
    g = np.where(idx >= 0, res.guessing[idx], 0.0)
    return ItemParams(list(items), d, b, g, f"fit:{model}")


def adaptive_on_matrix(
    R: npt.NDArray[np.int8],
    params: ItemParams,
    pipelines: Sequence[str],
    cfg: AdaptiveConfig,
    *,
    factors: Sequence[Mapping[str, object]] | None = None,
    fixed: Sequence[int] = (),
    seed: int = 0,
    timings: list[float] | None = None,
    refit: Any = None,
    calibration_fit: Any = None,
) -> tuple[Scheduler, list[dict[str, Any]]]:
    """Run the scheduler answering every request from ``R`` (-1 there: a failed request).

    ``fixed`` pipelines (calibration references) answer every item before round 1. ``timings``
    collects the scheduler's own seconds per round (planning plus re-estimation; item re-fits excluded).
    """
    import time

    sched = Scheduler(params, pipelines, cfg, factors=factors, seed=seed, refit=refit, calibration_fit=calibration_fit)
    all_items = list(range(R.shape[1]))
    for p in fixed:
        sched.record(p, all_items, [None if v < 0 else int(v) for v in R[p]])
    if fixed:
        sched.reestimate()

    def ask(plan: dict[int, list[int]]) -> dict[int, list[int | None]]:
        return {p: [None if R[p, i] < 0 else int(R[p, i]) for i in items] for p, items in plan.items()}

    if timings is None:
        return sched, run_rounds(sched, ask)
    log: list[dict[str, Any]] = []
    while True:
        t0 = time.perf_counter()
        plan = sched.plan()
        t1 = time.perf_counter()
        if not plan:
            break
        answers = ask(plan)
        for p, items in plan.items():
            sched.record(p, items, answers[p])
        t2, refit0 = time.perf_counter(), sched.refit_seconds
        log.append(sched.finish_round())
        timings.append((t1 - t0) + (time.perf_counter() - t2) - (sched.refit_seconds - refit0))
        if sched.done:
            break
    return sched, log


def score_run(sched: Scheduler, full_accuracy: F64, n_full_requests: int) -> dict[str, float]:
    """Requests share, top-1 agreement, Kendall tau, MAE and 95% coverage against the full grid.

    Also: coverage of the three best pipelines' intervals, whether the best was eliminated, the gap
    between the best and the second (full grid), and whether the misfit warning was raised.
    """
    res = sched.results()
    est = np.array([r["accuracy_estimate"] for r in res])
    lo = np.array([r["accuracy_estimate_low"] for r in res])
    hi = np.array([r["accuracy_estimate_high"] for r in res])
    ok = np.isfinite(est)
    agree = agreement(est, lo, hi, full_accuracy)
    order = np.argsort(-full_accuracy, kind="stable")
    top3 = [int(p) for p in order[:3] if ok[p]]
    best = int(order[0])
    return {
        "requests_share": sched.spent / n_full_requests,
        "top1": float(agree.top1),
        "kendall_tau": agree.kendall_tau,
        "mae": agree.mae,
        "coverage": agree.coverage,
        "coverage_top3": float(agree.covered[top3].mean()) if top3 else float("nan"),
        "best_eliminated": float(res[best]["status"] == "eliminated"),
        "gap": float(full_accuracy[order[0]] - full_accuracy[order[1]]) if len(order) > 1 else float("inf"),
        "misfit_warning": float(sched.misfit_warning),
        "width": float(np.mean(hi[ok] - lo[ok])),
    }


def mcnemar_worse(R: npt.NDArray[np.int8], pick: int, best: int, alpha: float = 0.05) -> bool:
    """Is pipeline ``pick`` significantly worse than ``best`` on the full grid's answers? (paired exact McNemar).

    Over the items both answered, ``b`` = items ``best`` got right and ``pick`` wrong, ``c`` = the reverse.
    Under equal accuracy each of the ``b + c`` discordant items goes either way with probability 1/2, so the
    two-sided exact p-value is ``min(1, 2 P(Bin(b + c, 1/2) >= max(b, c)))``; ``pick`` is significantly worse
    when ``b > c`` and that p-value is below ``alpha``. The same pipeline is never worse than itself.
    """
    import math

    if pick == best:
        return False
    both = (R[pick] >= 0) & (R[best] >= 0)
    b = int(((R[best] == 1) & (R[pick] == 0) & both).sum())
    c = int(((R[best] == 0) & (R[pick] == 1) & both).sum())
    n, k = b + c, max(b, c)
    if b <= c or n == 0:
        return False
    tail = sum(math.comb(n, j) for j in range(k, n + 1)) / 2.0**n
    return min(1.0, 2.0 * tail) < alpha


__all__ = [
    "SimGrid",
    "adaptive_on_matrix",
    "fit_params",
    "mcnemar_worse",
    "score_run",
    "simulate_grid",
    "simulate_grid_2d",
]
