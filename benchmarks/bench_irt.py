"""IRT speed benchmarks, each against a baseline measured in the same run.

1. Hierarchical 3PL, 63 pipelines (3 LLMs x 7 retrievers x 3 ICL) x 1,000 items: our default (block
   Newton) and our L-BFGS-B solver, against a reference written the way the paper's code is (a Python
   loop over items for the likelihood, L-BFGS-B with finite-difference gradients, the paper's start and
   bounds). The reference is (a) timed over one full finite-difference gradient and (b) run for a time
   budget. Reported: the measured ratio (budget / ours: a lower bound, the reference had not
   converged) and an extrapolated one (the reference's measured time per gradient times the number of
   gradients our own L-BFGS-B needed on the same data: again a lower bound, since the reference starts
   worse), each labelled.
2. 2PL joint maximum likelihood against girth's ``twopl_jml`` on the same data (time, log-likelihood),
   with our L-BFGS-B solver alongside.
3. Large 3PL fit, 1,000 pipelines x 10,000 items by default, x 100,000 with ``--big``: wall time, CPU
   time, iterations and peak memory (max RSS of a child process that only simulates and fits);
   ``--large-baseline`` also fits it with the L-BFGS-B solver in the same run (slow).

Usage: .venv/bin/python benchmarks/bench_irt.py [--big] [--ref-budget 60] [--skip-ref] [--skip-girth]
       [--large-baseline]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np
from scipy.optimize import minimize

from ragrade.irt.fit import FitConfig, fit_responses
from ragrade.irt.io import Responses
from ragrade.irt.model import Priors, loglik
from ragrade.irt.simulate import sample_matrix, simulate_flat, simulate_hierarchical


class _Budget(Exception):
    pass


class PaperReference:
    """Paper-style: per-item Python loop, numeric gradients, the paper's start and bounds."""

    def __init__(self, data: Responses) -> None:
        cols = []
        for f in data.factors:
            onehot = np.zeros((len(data.pipelines), len(f.levels)))
            onehot[np.arange(len(data.pipelines)), f.codes] = 1
            cols.append(onehot)
        self.X = np.hstack(cols)
        self.k, self.n = self.X.shape[1], len(data.items)
        self.R = data.R.astype(np.float64)
        self.x0 = np.concatenate([np.zeros(self.k), np.ones(self.n), np.zeros(self.n), np.full(self.n, 0.25)])
        k, n = self.k, self.n
        self.bounds = [(-3, 3)] * k + [(0.1, 1.5)] * n + [(0.01, 1)] * n + [(0.2, 0.4)] * n
        self.evals = 0
        self.deadline = float("inf")

    def nll(self, x: np.ndarray) -> float:
        if time.perf_counter() > self.deadline:
            raise _Budget
        self.evals += 1
        k, n = self.k, self.n
        theta = self.X @ x[:k]
        a, b, c = x[k : k + n], x[k + n : k + 2 * n], x[k + 2 * n :]
        total = 0.0
        for i in range(n):  # the loop over items
            p = c[i] + (1 - c[i]) / (1 + np.exp(-a[i] * (theta - b[i])))
            total -= np.sum(self.R[i] * np.log(p) + (1 - self.R[i]) * np.log(1 - p))
        return total

    def time_gradient(self) -> float:
        """Seconds for one forward-difference gradient (n_params + 1 likelihoods), as L-BFGS-B makes it."""
        t = time.perf_counter()
        f0 = self.nll(self.x0)
        eps = 1e-8
        for j in range(self.x0.size):
            x = self.x0.copy()
            x[j] += eps
            _ = (self.nll(x) - f0) / eps
        return time.perf_counter() - t

    def run(self, budget_s: float) -> tuple[float, bool, int]:
        """The full L-BFGS-B run, stopped at the budget: (seconds, converged, likelihood evaluations)."""
        self.evals = 0
        t = time.perf_counter()
        self.deadline = t + budget_s
        try:
            res = minimize(self.nll, self.x0, method="L-BFGS-B", bounds=self.bounds, options={"maxiter": 1000})
            converged = bool(res.success)
        except _Budget:
            converged = False
        finally:
            self.deadline = float("inf")
        return time.perf_counter() - t, converged, self.evals


def bench_hierarchical(budget: float, skip_ref: bool) -> None:
    data, _ = simulate_hierarchical({"llm": 3, "retriever": 7, "icl": 3}, 1000, seed=1)
    factors = ("llm", "retriever", "icl")
    fit_responses(data, FitConfig(factors=factors), compute_se=False)  # warm-up (imports, caches)
    t = time.perf_counter()
    res = fit_responses(data, FitConfig(factors=factors))
    ours = time.perf_counter() - t
    t = time.perf_counter()
    lb = fit_responses(data, FitConfig(factors=factors, solver="lbfgs"))
    ours_lbfgs = time.perf_counter() - t
    print(
        f"[hierarchical 63x1000] ours (newton, default): {ours:.2f} s with SEs, converged={res.converged}, "
        f"{res.fit['iterations']} iterations, loglik {res.fit['log_likelihood']:.1f}"
    )
    print(
        f"[hierarchical 63x1000] ours (lbfgs): {ours_lbfgs:.2f} s with SEs, converged={lb.converged}, "
        f"{lb.fit['iterations']} iterations ({lb.fit['evaluations']} gradients), loglik "
        f"{lb.fit['log_likelihood']:.1f}; newton is {ours_lbfgs / ours:.1f}x faster"
    )
    if skip_ref:
        return
    ref = PaperReference(data)
    n_params = ref.x0.size
    per_grad = ref.time_gradient()
    print(
        f"[hierarchical 63x1000] reference, MEASURED: one finite-difference gradient ({n_params + 1} "
        f"likelihoods, Python loop over items) takes {per_grad:.1f} s = {per_grad / ours:.0f}x our whole fit"
    )
    ref_t, ref_conv, ref_evals = ref.run(budget)
    print(
        f"[hierarchical 63x1000] reference, MEASURED: full L-BFGS-B run stopped at the {budget:.0f} s budget after "
        f"{ref_evals} likelihoods (~{ref_evals / (n_params + 1):.1f} gradients), converged={ref_conv}: "
        f"speed-up >= {ref_t / ours:.0f}x (lower bound; grows with --ref-budget)"
    )
    need = lb.fit["evaluations"]
    print(
        f"[hierarchical 63x1000] reference, EXTRAPOLATED: at least {need} gradients (what our L-BFGS-B needed "
        f"from a better start) x {per_grad:.1f} s = {need * per_grad:.0f} s, i.e. >= "
        f"{need * per_grad / ours:.0f}x our default fit (goal >= 100x, ours converged={res.converged})"
    )


def _abilities_given_items(R: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-person ML ability on a fine grid (2PL), the last step of a JML fit."""
    grid = np.linspace(-6, 6, 1201)
    p = 1 / (1 + np.exp(-a[:, None] * (grid[None, :] - b[:, None])))
    lp, lq = np.log(p), np.log1p(-p)
    y = (R == 1).astype(float)
    obs = (R >= 0).astype(float)
    ll = y.T @ lp + ((1 - y) * obs).T @ lq  # (persons, grid)
    return grid[ll.argmax(axis=1)]


def bench_girth() -> None:
    try:
        import girth
    except ImportError:
        print("[2pl vs girth] girth not installed; skipped")
        return
    data, _ = simulate_flat(500, 200, seed=2)
    data.R[:] = np.where(data.R >= 0, data.R, 0)
    times, fits = {}, {}
    for solver in ("newton", "lbfgs"):
        cfg = FitConfig(model="2pl", priors=Priors.named("none"), se="none", solver=solver)
        fit_responses(data, cfg)  # warm-up
        t = time.perf_counter()
        fits[solver] = fit_responses(data, cfg)
        times[solver] = time.perf_counter() - t
    t = time.perf_counter()
    est = girth.twopl_jml(data.R.astype(int))
    t_girth = time.perf_counter() - t
    a, b = np.asarray(est["Discrimination"], float), np.asarray(est["Difficulty"], float)
    th = _abilities_given_items(data.R, a, b)  # girth's JML returns items only
    ll_girth = loglik(data.R, th, a, b, np.zeros_like(a))
    new, old = fits["newton"], fits["lbfgs"]
    print(
        f"[2pl 500x200] ours newton {times['newton']:.2f} s loglik {new.fit['log_likelihood']:.1f} "
        f"(converged={new.converged}) | ours lbfgs {times['lbfgs']:.2f} s loglik {old.fit['log_likelihood']:.1f} "
        f"| girth twopl_jml {t_girth:.2f} s loglik {ll_girth:.1f}"
    )
    print(
        f"[2pl 500x200] time ratio girth/ours(newton) {t_girth / times['newton']:.1f}x, "
        f"lbfgs/newton {times['lbfgs'] / times['newton']:.1f}x; loglik ours - girth "
        f"{new.fit['log_likelihood'] - ll_girth:+.1f} (higher is better)"
    )


def large_child(n_items: int, solver: str) -> dict[str, Any]:
    """Simulate and fit in this (child) process; returns the numbers as a dict."""
    rng = np.random.default_rng(3)
    n_persons = 1000
    theta = rng.normal(size=n_persons)
    d, b, g = rng.lognormal(0, 0.5, n_items), rng.normal(size=n_items), rng.uniform(0.15, 0.3, n_items)
    R = sample_matrix(theta, d, b, g, rng)
    pipes, items = [f"p{i}" for i in range(n_persons)], [f"q{i}" for i in range(n_items)]
    data = Responses(pipes, items, R, [], {}, "<sim>")
    cfg = FitConfig(backend="numba", se="none", solver=solver)
    fit_responses(data.subset_items(range(50)), cfg, compute_se=False)  # JIT warm-up (cached after a first run)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    t, c = time.perf_counter(), time.process_time()
    res = fit_responses(data, cfg, compute_se=False)
    elapsed, cpu = time.perf_counter() - t, time.process_time() - c
    return {
        "n_items": n_items,
        "solver": solver,
        "wall_s": elapsed,
        "cpu_s": cpu,
        "iterations": res.fit["iterations"],
        "evaluations": res.fit["evaluations"],
        "schur_products": res.fit.get("schur_products"),
        "converged": res.converged,
        "corr_theta": float(np.corrcoef(res.theta, theta)[0, 1]),
        "rss_before_fit_gib": rss_before,
        "max_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
        "responses_gib": R.nbytes / 1024**3,
    }


def bench_large(n_items: int, solvers: list[str]) -> None:
    out = {}
    for solver in solvers:
        cmd = [sys.executable, __file__, "--large-child", str(n_items), "--solver", solver]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        out[solver] = r
        size = f"1000x{n_items}"
        print(
            f"[3pl {size}] {solver}: fit {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
            f"{r['iterations']} iterations, {r['evaluations']} passes, {r['schur_products']} Schur products, "
            f"converged={r['converged']}, "
            f"corr(theta)={r['corr_theta']:.4f}"
        )
        print(
            f"[3pl {size}] {solver}: child max RSS {r['max_rss_gib']:.2f} GiB ({r['rss_before_fit_gib']:.2f} GiB "
            f"before the fit: data + runtime; responses {r['responses_gib']:.2f} GiB int8); goal < 60 s, < 4 GiB"
        )
    if len(out) == 2:
        print(f"[3pl 1000x{n_items}] lbfgs/newton time ratio {out['lbfgs']['wall_s'] / out['newton']['wall_s']:.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big", action="store_true", help="run the 1,000 x 100,000 fit")
    ap.add_argument("--ref-budget", type=float, default=60.0, help="seconds for the paper-style reference run")
    ap.add_argument("--skip-ref", action="store_true")
    ap.add_argument("--skip-girth", action="store_true")
    ap.add_argument("--large-baseline", action="store_true", help="also fit the large case with L-BFGS-B (slow)")
    ap.add_argument("--large-child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--solver", default="newton", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.large_child:
        print(json.dumps(large_child(args.large_child, args.solver)))
        return
    bench_hierarchical(args.ref_budget, args.skip_ref)
    if not args.skip_girth:
        bench_girth()
    bench_large(100_000 if args.big else 10_000, ["newton", "lbfgs"] if args.large_baseline else ["newton"])


if __name__ == "__main__":
    main()
