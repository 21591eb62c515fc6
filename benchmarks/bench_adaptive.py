"""Adaptive evaluation against the full grid, measured in the same run (the full grid is the baseline).

Grids (planted additive effects on a 3PL exam; SDs: LLM 1.0, retriever 0.8, ICL 0.4, plus a
pipeline-specific deviation of SD 0.1), each over ``--seeds`` seeds (20 by default):

* ``4x300``, ``10x300``, ``20x300``: 2x2, 2x5 and 4x5 (LLM x retriever) pipelines, 300 items;
* ``63x1000``: 3 LLMs x 7 retrievers x 3 ICL levels, 1,000 items;
* ``2d-20x300``, ``2d-63x1000``: the same grids with a two-dimensional truth (half the items load
  mostly on a second ability; abilities correlated 0.3): the one-dimensional model is wrong.

Calibration: ``file`` (3PL fitted on an earlier run of the same exam by another 63-pipeline grid:
``--calibration irt.json``) or ``none`` (the default ``auto``: ``sample`` below 20 pipelines, ``cold``
from 20). Default settings otherwise (so at most 25% of the full grid without ``--budget``).

Per scenario, against the targets of issue 29: requests as a share of the full grid, seeds where the
true best was eliminated, top-1 agreement over the seeds where the best leads the second by more
than 2 points, 95% interval coverage of the full-grid accuracy (overall, for the three best
pipelines, and the worst seed's average), the misfit warning rate, Kendall tau and MAE; and what is
reachable at all: the chance that exact, independent 95% intervals would meet the worst-seed target (at
4 pipelines one miss in a seed is 0.75: about 0.02 over 20 seeds), the top-1 agreement of an oracle that
spends the whole budget on the true best two pipelines (paired, random questions) and its chance of
meeting the top-1 target in these seeds, and, with two-dimensional truth, the misfit checks' p-values in
the seeds where no warning was raised. A pipeline asked every question has a zero-width interval:
coverage compares with a 1e-9 tolerance (count / n and the grid's mean differ by rounding), and "separated
by more than 2 points" excludes exactly 2 (6 of 300).

Usage: .venv/bin/python benchmarks/bench_adaptive.py [--seeds 20] [--only SCENARIO[,SCENARIO]] [--json]
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # small matrices: threads only contend
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from ragrade.adaptive import AdaptiveConfig  # noqa: E402
from ragrade.adaptive.calibration import calibration_mode, cold_params, refitter  # noqa: E402
from ragrade.adaptive.estimate import calibration_check  # noqa: E402
from ragrade.adaptive.simulate import (  # noqa: E402
    SimGrid,
    adaptive_on_matrix,
    fit_params,
    score_run,
    simulate_grid,
    simulate_grid_2d,
)

EFFECT_SD = {"llm": 1.0, "retriever": 0.8, "icl": 0.4}
GRIDS = {
    "4x300": ({"llm": 2, "retriever": 2}, 300),
    "10x300": ({"llm": 2, "retriever": 5}, 300),
    "20x300": ({"llm": 4, "retriever": 5}, 300),
    "63x1000": ({"llm": 3, "retriever": 7, "icl": 3}, 1000),
}
EARLIER = {"llm": 3, "retriever": 7, "icl": 3}  # the grid of the earlier run that wrote the calibration file
SCENARIOS = [f"{g}/{c}" for g in GRIDS for c in ("file", "none")] + ["2d-20x300/file", "2d-63x1000/file"]


def _grids(name: str, seed: int) -> tuple[SimGrid, SimGrid]:
    """The grid measured and an earlier run on the same exam (for the calibration file)."""
    two_d = name.startswith("2d-")
    levels, n_items = GRIDS[name.removeprefix("2d-")]
    if two_d:
        sim = simulate_grid_2d(levels, n_items, seed=seed, effect_sd=EFFECT_SD)
        angles = sim.extra["angles"]
        earlier = simulate_grid_2d(
            EARLIER, n_items, seed=10_000 + seed, effect_sd=EFFECT_SD, items=sim.truth, angles=angles
        )
        return sim, earlier
    sim = simulate_grid(levels, n_items, seed=seed, effect_sd=EFFECT_SD, interaction_sd=0.1)
    earlier = simulate_grid(
        EARLIER, n_items, seed=10_000 + seed, effect_sd=EFFECT_SD, interaction_sd=0.1, items=sim.truth
    )
    return sim, earlier


def one_seed(scenario: str, seed: int, cfg: AdaptiveConfig) -> dict[str, float]:
    """Scores of one simulated grid under one scenario (the full grid is the truth)."""
    grid, calib = scenario.split("/")
    sim, earlier = _grids(grid, seed)
    refit: Any = None
    check = None
    t0 = time.perf_counter()
    if calib == "file":
        params = fit_params(earlier.R, sim.truth.items, "3pl")
        check = calibration_check(
            earlier.R, params.d, params.b, params.g, alpha=cfg.calibration_misfit_alpha, seed=seed
        )
        mode = "file"
    else:
        mode = calibration_mode(cfg, len(sim.pipelines))
        params = cold_params(sim.truth.items, {})
        if mode == "cold":
            refit = refitter(sim.pipelines, sim.truth.items, cfg.calibration_model, params)
    run_cfg = cfg.model_copy(update={"audit_share": 1.0}) if mode == "sample" else cfg
    sched, log = adaptive_on_matrix(
        sim.R, params, sim.pipelines, run_cfg, factors=sim.factors, seed=seed, refit=refit, calibration_fit=check
    )
    out = score_run(sched, sim.accuracy, sim.R.size)
    out["top1_oracle"] = oracle_top1(sim.R, sim.accuracy, math.ceil((cfg.default_share or 1.0) * sim.R.size), seed)
    out["misfit_p_calibration"] = check.p_value if check is not None else math.nan
    out["misfit_p_run"] = sched.misfit.p_value if sched.misfit is not None else math.nan
    out["rounds"] = len(log)
    out["pipelines"] = len(sim.pipelines)
    out["seconds"] = time.perf_counter() - t0
    return out


def oracle_top1(R: np.ndarray, acc: np.ndarray, budget: int, seed: int, draws: int = 20_000) -> float:
    """Chance of picking the best with an oracle allocation: the whole budget on the true best two.

    The oracle knows which two pipelines lead and splits the budget between them, both answering the
    same uniformly random questions (paired, without replacement: the most a sampled comparison of two
    pipelines can know from ``budget`` requests); it picks the higher sample mean (a tie: a coin flip).
    No real design does better without knowing the leaders, so its average over the seeds bounds the
    top-1 agreement any design can reach at this budget.
    """
    order = np.argsort(-acc, kind="stable")
    a, b = R[order[0]], R[order[1]]
    n_items = R.shape[1]
    n = min(n_items, budget // 2)
    d = np.where((a >= 0) & (b >= 0), a.astype(int) - b.astype(int), 0)
    counts = np.array([(d > 0).sum(), (d < 0).sum(), (d == 0).sum()], dtype=np.int64)
    draw = np.random.default_rng(seed).multivariate_hypergeometric(counts, n, size=draws)
    diff = draw[:, 0] - draw[:, 1]
    return float((diff > 0).mean() + 0.5 * (diff == 0).mean())


TARGETS: list[tuple[str, str, float, str]] = [
    # key, comparison, value, applies to ("all", "1d", "2d")
    ("requests_share", "<=", 0.25, "1d"),
    ("best_eliminated_seeds", "<=", 0.0, "1d"),
    ("top1_separated", ">=", 0.95, "1d"),
    ("coverage", ">=", 0.92, "1d"),
    ("coverage_top3", ">=", 0.90, "1d"),
    ("coverage_worst_seed", ">=", 0.85, "1d"),
    ("misfit_warning", "<=", 0.05, "1d"),
    ("coverage", ">=", 0.90, "2d"),
    ("misfit_warning", ">=", 0.95, "2d"),
]


def _worst_ok(recs: list[dict[str, float]], floor: float = 0.85) -> float:
    """Chance that every seed's coverage is at least ``floor`` if each interval covered independently with 0.95.

    With K pipelines a seed's average is (K - misses) / K: at K = 4 one miss (chance 1 - 0.95^4 = 0.19 per
    seed) already gives 0.75, so the target is out of reach of exact intervals, not a sign of bad ones.
    """
    out = 1.0
    for r in recs:
        k = int(r["pipelines"])
        allowed = math.floor((1.0 - floor) * k + 1e-9)
        out *= sum(math.comb(k, j) * 0.05**j * 0.95 ** (k - j) for j in range(allowed + 1))
    return out


def _chance_at_least(probs: list[float], share: float) -> float:
    """Chance that independent events with these probabilities happen in at least ``share`` of the trials."""
    dist = np.zeros(len(probs) + 1)
    dist[0] = 1.0
    for q in probs:  # Poisson-binomial, by convolution
        dist[1:] = dist[1:] * (1 - q) + dist[:-1] * q
        dist[0] *= 1 - q
    need = math.ceil(share * len(probs) - 1e-9)
    return float(dist[need:].sum())


def summarise(scenario: str, recs: list[dict[str, float]]) -> dict[str, Any]:
    """Aggregates over the seeds and each target met or not."""
    sep = [r["top1"] for r in recs if r["gap"] > 0.02 + 1e-9]  # "more than 2 points": 6 of 300 is not
    oracle = [r["top1_oracle"] for r in recs if r["gap"] > 0.02 + 1e-9]
    agg = {
        "requests_share": float(np.mean([r["requests_share"] for r in recs])),
        "requests_share_max": float(np.max([r["requests_share"] for r in recs])),
        "best_eliminated_seeds": float(np.sum([r["best_eliminated"] for r in recs])),
        "top1_separated": float(np.mean(sep)) if sep else float("nan"),
        "n_separated": float(len(sep)),
        "top1_oracle": float(np.mean(oracle)) if oracle else math.nan,
        "top1_oracle_meets": _chance_at_least(oracle, 0.95) if oracle else math.nan,
        "top1": float(np.mean([r["top1"] for r in recs])),
        "coverage": float(np.mean([r["coverage"] for r in recs])),
        "coverage_top3": float(np.nanmean([r["coverage_top3"] for r in recs])),
        "coverage_worst_seed": float(np.min([r["coverage"] for r in recs])),
        "misfit_warning": float(np.mean([r["misfit_warning"] for r in recs])),
        "kendall_tau": float(np.nanmean([r["kendall_tau"] for r in recs])),
        "mae": float(np.mean([r["mae"] for r in recs])),
        "width": float(np.mean([r["width"] for r in recs])),
        "seconds": float(np.sum([r["seconds"] for r in recs])),
    }
    kind = "2d" if scenario.startswith("2d-") else "1d"
    big = scenario.startswith("63x1000")
    met = {}
    print(f"\n== {scenario}: {len(recs)} seeds ({agg['seconds']:.0f} s)")
    for key, op, value, applies in TARGETS:
        if applies != kind:
            continue
        if key == "requests_share" and big:
            value = 0.20
        v = agg[key]
        ok = bool(v <= value if op == "<=" else v >= value) if np.isfinite(v) else False
        met[f"{key}{op}{value}"] = ok
        print(f"  {key:<22} {v:8.3f}   target {op} {value:<5}  {'PASS' if ok else 'FAIL'}")
    print(
        f"  (top-1 with an oracle allocation of the same budget over the separated seeds: {agg['top1_oracle']:.3f} "
        f"on average; chance that even the oracle meets the top-1 target in these seeds: "
        f"{agg['top1_oracle_meets']:.2f})"
    )
    print(f"  (exact, independent 95% intervals would meet the worst-seed target with chance {_worst_ok(recs):.2f})")
    missed = [r for r in recs if kind == "2d" and not r["misfit_warning"]]
    if missed:
        print(
            f"  (misfit missed in {len(missed)} seeds: their p-values, calibration / run: "
            + ", ".join(f"{r['misfit_p_calibration']:.3f} / {r['misfit_p_run']:.3f}" for r in missed)
            + "; coverage there "
            + ", ".join(f"{r['coverage']:.2f}" for r in missed)
            + ")"
        )
    print(
        f"  (top-1 over all seeds {agg['top1']:.2f}; separated seeds {agg['n_separated']:.0f}; Kendall tau "
        f"{agg['kendall_tau']:.3f}; MAE {agg['mae']:.4f}; mean interval width {agg['width']:.3f}; "
        f"largest share {agg['requests_share_max']:.3f})"
    )
    return {"scenario": scenario, "seeds": len(recs), "aggregate": agg, "met": met}


def main() -> None:
    """Run the scenarios and print the scores against the targets (and, with --json, a JSON line)."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--only", default=None, help="comma-separated scenarios: " + ", ".join(SCENARIOS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cfg = AdaptiveConfig(**json.loads(os.environ.get("BENCH_CFG", "{}")))
    report = []
    chosen = [s.strip() for s in args.only.split(",")] if args.only else SCENARIOS
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario {unknown[0]!r}; choose from: {', '.join(SCENARIOS)}")
    for scenario in chosen:
        recs = [one_seed(scenario, seed, cfg) for seed in range(args.seeds)]
        report.append(summarise(scenario, recs))
    if args.json:
        print(json.dumps({"bench_adaptive": report}, default=float))


if __name__ == "__main__":
    main()
