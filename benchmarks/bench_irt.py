"""IRT speed benchmarks, each against a baseline measured in the same run; every figure says what it covers.

FIT-ONLY figures time the optimiser (and SEs where said) with the response matrix already in memory;
END-TO-END figures time what a user runs, ``ragrade irt fit responses.parquet``, in a fresh process,
from the Parquet file on disk to every output written, with the split (read, fit, SEs, write) that the
command itself reports, and the child's peak RSS.

1. [fit-only] Hierarchical 3PL, 63 pipelines (3 LLMs x 7 retrievers x 3 ICL) x 1,000 items: our default
   (block Newton) and our L-BFGS-B solver, against a reference written the way the paper's code is (a
   Python loop over items for the likelihood, L-BFGS-B with finite-difference gradients, the paper's
   start and bounds). Only what was measured is compared: the time of one finite-difference gradient,
   and a full reference run stopped at a time budget (a lower bound on the speed-up). No extrapolation.
2. [fit-only] 2PL joint maximum likelihood against girth's ``twopl_jml`` on the same data (time,
   log-likelihood); mirt (R) and py-irt are compared when importable, else skipped with a note.
3. [fit-only] Large 3PL fit, 1,000 pipelines x 10,000 items (x 100,000 with ``--big``): wall, CPU, peak
   RSS of a child that only simulates and fits.
4. [end-to-end] The same size written as a long Parquet table (one row per pipeline x question), then
   ``python -m ragrade irt fit FILE --json`` in a child: wall time, split, peak RSS, output sizes. A first
   tiny run with an empty numba cache directory measures the cold compile separately.
5. [component] ``irt fit --prior none --bounds ...`` at 63 x 1,000 (flat and with factors): the optimiser's
   time (every pass) against everything after it (SEs, statistics, flags), with the default fit as the
   baseline, in the same process; PASS when the statistics stage takes no longer than the fit.

Usage: .venv/bin/python benchmarks/bench_irt.py [--big] [--ref-budget 60] [--skip-ref] [--skip-girth]
       [--skip-fit-only] [--repeat N] [--large-baseline] [--only-stats]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
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
        f"[fit-only hierarchical 63x1000] ours (newton, default): {ours:.2f} s with SEs, converged={res.converged}, "
        f"{res.fit['iterations']} iterations, loglik {res.fit['log_likelihood']:.1f}"
    )
    print(
        f"[fit-only hierarchical 63x1000] ours (lbfgs): {ours_lbfgs:.2f} s with SEs, converged={lb.converged}, "
        f"{lb.fit['iterations']} iterations ({lb.fit['evaluations']} gradients), loglik "
        f"{lb.fit['log_likelihood']:.1f}; newton is {ours_lbfgs / ours:.1f}x faster"
    )
    if skip_ref:
        return
    ref = PaperReference(data)
    n_params = ref.x0.size
    per_grad = ref.time_gradient()
    print(
        f"[fit-only hierarchical 63x1000] reference, MEASURED: one finite-difference gradient ({n_params + 1} "
        f"likelihoods, Python loop over items) takes {per_grad:.1f} s = {per_grad / ours:.0f}x our whole fit"
    )
    ref_t, ref_conv, ref_evals = ref.run(budget)
    print(
        f"[fit-only hierarchical 63x1000] reference, MEASURED: full L-BFGS-B run stopped at the {budget:.0f} s "
        f"budget after "
        f"{ref_evals} likelihoods (~{ref_evals / (n_params + 1):.1f} gradients), converged={ref_conv}: "
        f"speed-up >= {ref_t / ours:.0f}x (lower bound; grows with --ref-budget)"
    )


def _abilities_given_items(R: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-person ML ability on a fine grid (2PL), the last step of a JML fit."""
    grid = np.linspace(-6, 6, 1201)
    p = 1 / (1 + np.exp(-a[:, None] * (grid[None, :] - b[:, None])))
    lp, lq = np.log(p), np.log1p(-p)
    y = (R == 1).astype(float)
    obs = (R >= 0).astype(float)
    ll = y.T @ lp + ((1 - y) * obs).T @ lq  # (persons, grid)
    best: np.ndarray = grid[ll.argmax(axis=1)]
    return best


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
        f"[fit-only 2pl 500x200] ours newton {times['newton']:.2f} s loglik {new.fit['log_likelihood']:.1f} "
        f"(converged={new.converged}) | ours lbfgs {times['lbfgs']:.2f} s loglik {old.fit['log_likelihood']:.1f} "
        f"| girth twopl_jml {t_girth:.2f} s loglik {ll_girth:.1f}"
    )
    print(
        f"[fit-only 2pl 500x200] time ratio girth/ours(newton) {t_girth / times['newton']:.1f}x, "
        f"lbfgs/newton {times['lbfgs'] / times['newton']:.1f}x; loglik ours - girth "
        f"{new.fit['log_likelihood'] - ll_girth:+.1f} (higher is better)"
    )


def bench_other_packages() -> None:
    """mirt (R, through rpy2) and py-irt: compared when importable, else a note (never installed here)."""
    for name, module in (("mirt", "rpy2"), ("py-irt", "py_irt")):
        try:
            __import__(module)
        except ImportError:
            print(f"[fit-only vs {name}] {module} not importable in this environment; skipped (not installed)")
            continue
        print(f"[fit-only vs {name}] {module} importable, but no comparison is wired up yet; skipped")


def write_parquet_matrix(path: Path, n_items: int, n_persons: int = 1000, seed: int = 3) -> dict[str, Any]:
    """A simulated 3PL long table (pipeline, question_id, correct), dictionary-encoded, written to ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_persons)
    d, b, g = rng.lognormal(0, 0.5, n_items), rng.normal(size=n_items), rng.uniform(0.15, 0.3, n_items)
    R = sample_matrix(theta, d, b, g, rng)
    pipes = pa.array([f"p{i:04d}" for i in range(n_persons)])
    items = pa.array([f"q{i:06d}" for i in range(n_items)])
    p_idx = pa.array(np.tile(np.arange(n_persons, dtype=np.int32), n_items))
    q_idx = pa.array(np.repeat(np.arange(n_items, dtype=np.int32), n_persons))
    table = pa.table(
        {
            "pipeline": pa.DictionaryArray.from_arrays(p_idx, pipes),
            "question_id": pa.DictionaryArray.from_arrays(q_idx, items),
            "correct": pa.array(R.ravel()),
        }
    )
    t = time.perf_counter()
    pq.write_table(table, path)
    return {"rows": table.num_rows, "write_s": time.perf_counter() - t, "mib": path.stat().st_size / 2**20}


def run_cli(args: list[str], env: dict[str, str]) -> tuple[float, float, dict[str, Any]]:
    """Run ``python -m ragrade ARGS`` in a child: (wall s, that child's peak RSS GiB, its JSON output)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ragrade", *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here: its own rusage
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"ragrade {' '.join(args)} failed: {err.read().decode()[-2000:]}")
        doc = json.loads(out.read().decode())
        doc["child_cpu_s"] = usage.ru_utime + usage.ru_stime
        return wall, usage.ru_maxrss / 1024**2, doc


def bench_end_to_end(n_items: int, repeat: int) -> None:
    """``ragrade irt fit responses.parquet`` from disk to every output, in fresh processes."""
    with tempfile.TemporaryDirectory(prefix="bench_irt_") as tmp:
        root = Path(tmp)
        env = dict(os.environ)
        cache = root / "numba-cache"
        env["NUMBA_CACHE_DIR"] = str(cache)
        small = root / "small.parquet"
        write_parquet_matrix(small, 200)
        wall, _, _ = run_cli(["irt", "fit", str(small), "--backend", "numba", "--json"], env)
        print(f"[end-to-end cold numba cache] first run with an empty cache, 1000x200, numba forced: {wall:.1f} s")
        wall, _, _ = run_cli(["irt", "fit", str(small), "--backend", "numba", "--json"], env)
        print(f"[end-to-end warm numba cache] same run again: {wall:.1f} s")
        wall_np, _, _ = run_cli(["irt", "fit", str(small), "--json"], env)
        print(f"[end-to-end default backend] same run, backend auto (numpy at this size): {wall_np:.1f} s")
        path = root / "responses.parquet"
        info = write_parquet_matrix(path, n_items)
        print(
            f"[end-to-end 1000x{n_items}] input: {info['rows']:,} rows, {info['mib']:.0f} MiB Parquet "
            f"(written in {info['write_s']:.1f} s, not counted)"
        )
        for k in range(repeat):
            out = root / f"out{k}" / "irt.json"
            out.parent.mkdir()
            wall, rss, doc = run_cli(["irt", "fit", str(path), "--out", str(out), "--json"], env)
            t = doc["timings_s"]
            sizes = {p.name: p.stat().st_size / 2**20 for p in out.parent.iterdir()}
            print(
                f"[end-to-end 1000x{n_items}] run {k + 1}: {wall:.1f} s wall (process start to exit), peak RSS "
                f"{rss:.2f} GiB; split: read {t.get('read', 0):.1f} s, fit {t.get('fit', 0):.1f} s, SEs "
                f"{t.get('se', 0):.1f} s, write {t.get('write', 0):.1f} s, rest (imports, stats, flags) "
                f"{wall - sum(t.get(x, 0) for x in ('read', 'fit', 'se', 'write')):.1f} s; CPU time "
                f"{doc['child_cpu_s']:.1f} s (wall above CPU/cores = waiting for shared cores); "
                f"converged={doc['fit']['converged']}, backend {doc['fit']['backend']}; goal <= 60 s, <= 4 GiB"
            )
            listing = ", ".join(f"{n} {v:.1f}" for n, v in sorted(sizes.items()))
            print(f"[end-to-end 1000x{n_items}] outputs (MiB): {listing}")
        load = os.getloadavg()
        print(f"[end-to-end] load average during the runs: {load[0]:.1f} (1 min) on {os.cpu_count()} CPUs")


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
        size = f"fit-only 1000x{n_items}"
        print(
            f"[3pl {size}] {solver}: fit {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, "
            f"{r['iterations']} iterations, {r['evaluations']} passes, {r['schur_products']} Schur products, "
            f"converged={r['converged']}, "
            f"corr(theta)={r['corr_theta']:.4f}"
        )
        print(
            f"[3pl {size}] {solver}: child max RSS {r['max_rss_gib']:.2f} GiB ({r['rss_before_fit_gib']:.2f} GiB "
            f"before the fit: data + runtime; responses {r['responses_gib']:.2f} GiB int8); "
            "the goal (< 60 s, < 4 GiB) is for the end-to-end run below"
        )
    if len(out) == 2:
        ratio = out["lbfgs"]["wall_s"] / out["newton"]["wall_s"]
        print(f"[fit-only 3pl 1000x{n_items}] lbfgs/newton time ratio {ratio:.1f}x")


STATS_BOUNDS = "theta=-4:4,b=-4:4,d=0.2:3,g=0:0.3"


def bench_stats_stage(repeat: int) -> None:
    """[component] ``irt fit --prior none --bounds ...`` at 63 x 1,000: the optimiser (both passes when the
    bounds make it refine) against everything after it (SEs, statistics, flags), in the same process;
    the default fit (weak priors) is the baseline. Goal: no statistics stage longer than its fit."""
    from ragrade.irt.fit import fit_irt
    from ragrade.irt.model import Bounds

    data, _ = simulate_hierarchical({"llm": 3, "retriever": 7, "icl": 3}, 1000, seed=1)
    fit_irt(data, config=FitConfig())  # warm-up (imports, numba)
    cases = [
        ("default (weak priors)", (), "weak", None),
        (f"--prior none --bounds {STATS_BOUNDS}", (), "none", STATS_BOUNDS),
        (
            f"--factors llm,retriever,icl --prior none --bounds {STATS_BOUNDS}",
            ("llm", "retriever", "icl"),
            "none",
            STATS_BOUNDS,
        ),
    ]
    ok = True
    for label, factors, prior, bounds in cases:
        runs = []
        for _ in range(repeat):
            cfg = FitConfig(factors=factors, priors=Priors.named(prior), bounds=Bounds.parse(bounds))
            t = time.perf_counter()
            res = fit_irt(data, config=cfg)
            wall = time.perf_counter() - t
            after = res.timings["fit_se_stats"] - res.timings["fit"]  # SEs, statistics, flags (and anchoring)
            runs.append((wall, res.timings["fit"], after, res.timings["se_stats"]))
        wall, fit_t, after, se_stats = sorted(runs)[len(runs) // 2]  # the median run by wall time
        verdict = "PASS" if after <= fit_t else "FAIL"
        ok &= after <= fit_t
        print(
            f"[component irt fit 63x1000] {label}: wall {wall:.2f} s = fit {fit_t:.2f} s (optimiser, all passes) + "
            f"after the fit {after:.3f} s (SEs + statistics: {se_stats:.3f} s); after/fit = {after / fit_t:.3f} "
            f"{verdict} (goal: after-fit <= fit; median of {repeat})"
        )
    print(f"[component irt fit 63x1000] statistics stage <= fit in every case: {'PASS' if ok else 'FAIL'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--big", action="store_true", help="run the 1,000 x 100,000 fit")
    ap.add_argument("--ref-budget", type=float, default=60.0, help="seconds for the paper-style reference run")
    ap.add_argument("--skip-ref", action="store_true")
    ap.add_argument("--skip-girth", action="store_true")
    ap.add_argument("--large-baseline", action="store_true", help="also fit the large case with L-BFGS-B (slow)")
    ap.add_argument("--skip-fit-only", action="store_true", help="only the end-to-end runs")
    ap.add_argument("--repeat", type=int, default=1, help="end-to-end runs of the large case")
    ap.add_argument("--only-stats", action="store_true", help="only the statistics-stage case (63 x 1,000)")
    ap.add_argument("--large-child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--solver", default="newton", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.large_child:
        print(json.dumps(large_child(args.large_child, args.solver)))
        return
    n_items = 100_000 if args.big else 10_000
    bench_stats_stage(max(3, args.repeat))
    if args.only_stats:
        return
    if not args.skip_fit_only:
        bench_hierarchical(args.ref_budget, args.skip_ref)
        if not args.skip_girth:
            bench_girth()
        bench_other_packages()
        bench_large(n_items, ["newton", "lbfgs"] if args.large_baseline else ["newton"])
    bench_end_to_end(n_items, args.repeat)


if __name__ == "__main__":
    main()
