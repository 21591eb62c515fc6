"""Joint estimation of abilities and item parameters (1PL/2PL/3PL, flat or hierarchical).

The negative log-likelihood (plus weak priors for MAP, the default) is
minimised by block Newton / Fisher scoring with an exact Schur-complement solve
over the person parameters (:mod:`ragrade.irt.newton`, ``solver="newton"``, the
default), or by L-BFGS-B (``solver="lbfgs"``); both use analytic derivatives
from one fused pass over the responses (:mod:`ragrade.irt.model` and
:mod:`ragrade.irt.newton` in numpy, :mod:`ragrade.irt._kernels` with numba for
large problems) and the same convergence criterion. Identifiability is explicit
and recorded:

* location: flat abilities are centred (shifting difficulties with them, which
  leaves the likelihood unchanged); hierarchical effects sum to zero per factor,
  over the levels that apply: a pipeline where a factor does not apply (its
  value is one of ``FitConfig.not_applicable``, default ``none`` or empty)
  gets no effect from it, i.e. the average applicable level;
* scale: with priors, set by theta ~ N(0, 1) and log d ~ N(0, s); without
  priors, discriminations are normalised to geometric mean 1 after the fit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.optimize import minimize

from ragrade.errors import ConfigError
from ragrade.io import JSONObject
from ragrade.irt.hierarchical import Design
from ragrade.irt.io import Responses, load_responses
from ragrade.irt.newton import newton_optimise
from ragrade.irt.problem import SOLVERS, WEAK_PENALTY, FitConfig, Problem, pick_kernel
from ragrade.irt.result import IRTResult, finish_result

F64 = npt.NDArray[np.float64]


def cold_start(data: Responses, prob: Problem) -> tuple[F64, F64, F64, F64]:
    """Moment-based start: abilities from standardised logit accuracy, difficulties from item p-values."""
    R = data.R
    obs = R >= 0
    right = (R == 1).sum(axis=0)
    acc = (right + 0.5) / (obs.sum(axis=0) + 1.0)
    logit = np.log(acc / (1 - acc))
    sd = logit.std()
    theta = (logit - logit.mean()) / (sd if sd > 0 else 1.0)
    g0 = 0.2 if prob.free_g else 0.0
    pv = ((R == 1).sum(axis=1) + 0.5) / (obs.sum(axis=1) + 1.0)
    pv = np.clip((pv - g0) / (1 - g0), 0.02, 0.98)
    b = np.clip(-np.log(pv / (1 - pv)) / 1.0, *prob.cfg.bounds.difficulty)
    d = np.ones(prob.n_items)
    g = np.full(prob.n_items, g0)
    if prob.design is not None:
        person = np.linalg.lstsq(prob.design.X, theta, rcond=None)[0]
    else:
        person = theta
    return person, d, b, g


def warm_start(prob: Problem, data: Responses, init: IRTResult) -> tuple[F64, F64, F64, F64]:
    """Start from a previous result, matched by item id, pipeline and level names (never by position)."""
    person, d, b, g = cold_start(data, prob)
    pos = {item: i for i, item in enumerate(init.items)}
    for j, item in enumerate(data.items):
        i = pos.get(item)
        if i is not None:
            d[j], b[j], g[j] = init.discrimination[i], init.difficulty[i], init.guessing[i]
    if prob.design is not None and init.effects:
        effects = []
        for f in prob.design.factors:
            prev = init.effects.get(f.name, {})
            effects.append(np.array([prev.get(lvl, (0.0, 0.0))[0] for lvl in f.levels]))
        person = prob.design.z_from_effects(effects)
    elif prob.design is None:
        ppos = {p: i for i, p in enumerate(init.pipelines)}
        person = np.array([init.theta[ppos[p]] if p in ppos else person[m] for m, p in enumerate(data.pipelines)])
    if not prob.free_g:
        g[:] = 0.0
    if not prob.free_d:
        d[:] = 1.0
    return person, d, b, g


def optimise(prob: Problem, x0: F64) -> tuple[F64, dict[str, Any]]:
    """Minimise with the configured solver; returns the optimum and a convergence report.

    The Newton solver finishes with L-BFGS-B from its last point when it has not met the
    convergence criterion (a safety net; the report says so).
    """
    if prob.cfg.solver == "lbfgs":
        x, report = lbfgs(prob, x0)
        report["solver"] = "lbfgs"
        return x, report
    t0 = time.perf_counter()
    x, nrep = newton_optimise(prob, x0)
    if nrep["newton_status"] == 0:
        step = float(nrep["newton_step_in_se"])  # the criterion of lbfgs(), at the returned point
        report = {
            "converged": bool(step <= prob.cfg.gtol),
            "optimizer_status": 0,
            "message": nrep["newton_message"],
            "iterations": nrep["newton_iterations"],
            "evaluations": int(prob.n_evals),
            "max_step_in_se": step,
            "gtol": prob.cfg.gtol,
            "objective_per_response": nrep["objective"],
            "backend": prob.backend,
        }
    else:
        x, report = lbfgs(prob, x)
        report["message"] = f"newton: {nrep['newton_message']}; then L-BFGS-B: {report['message']}"
        report["iterations"] += nrep["newton_iterations"]
    report.update(
        solver="newton",
        newton_iterations=nrep["newton_iterations"],
        schur_products=nrep["schur_products"],
        time_s=round(time.perf_counter() - t0, 4),
    )
    return x, report


def lbfgs(prob: Problem, x0: F64) -> tuple[F64, dict[str, object]]:
    """L-BFGS-B with analytic gradients; returns the optimum and a convergence report."""
    box = prob.box()
    lo, hi = np.array(box).T
    x0 = np.clip(x0, lo, hi)
    t0 = time.perf_counter()
    last: dict[str, Any] = {}
    # diagonal preconditioning: optimise u = x * scale, with scale ~ sqrt(curvature of each coordinate)
    scale = prob.scales()

    def fun(u: F64) -> tuple[float, F64]:
        x = u / scale
        f, gr = prob.objective(x)
        last["x"], last["g"] = x.copy(), gr
        return f, gr / scale

    target = prob.cfg.gtol / 4.0

    def stop_early(intermediate_result: Any) -> None:
        # stop once no coordinate is more than target SEs from its optimum (checked at accepted points)
        xu = np.asarray(intermediate_result.x)
        if (
            "x" in last
            and np.array_equal(last["x"], xu / scale)
            and prob.step_in_se(last["x"], last["g"], scale) <= target
        ):
            raise StopIteration

    res = minimize(
        fun,
        x0 * scale,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo * scale, hi * scale, strict=True)),
        callback=stop_early,
        options={
            "maxiter": prob.cfg.max_iter,
            "maxfun": 3 * prob.cfg.max_iter,
            "ftol": prob.cfg.ftol,
            "gtol": 1e-14,
            "maxcor": 20,
        },
    )
    x = np.asarray(res.x) / scale
    _, grad = prob.objective(x) if not ("x" in last and np.array_equal(last["x"], x)) else (0.0, last["g"])
    step = prob.step_in_se(x, grad, scale)
    report = {
        "converged": bool(step <= prob.cfg.gtol),
        "optimizer_status": int(res.status),
        "message": str(res.message),
        "iterations": int(res.nit),
        "evaluations": int(prob.n_evals),
        "max_step_in_se": step,
        "gtol": prob.cfg.gtol,
        "objective_per_response": float(res.fun),
        "time_s": round(time.perf_counter() - t0, 4),
        "backend": prob.backend,
    }
    return x, report


def _repolish(prob: Problem, x: F64, report: JSONObject) -> tuple[F64, JSONObject]:
    """Without priors: if a bound keeps the optimum off its anchored member (mean ability 0, geometric
    mean discrimination 1), optimise again from there with the anchoring penalties weakened, so that
    they do not trade likelihood for themselves; the report says so."""
    pr = prob.cfg.priors
    theta, d, _, _, _ = prob.unpack(x)
    weak = list(prob.penalty)
    if pr.theta_sd is None and prob.design is None and abs(float(theta.mean())) > 1e-6:
        weak[0] = WEAK_PENALTY
    scale_free = pr.theta_sd is None and pr.log_discrimination_sd is None and prob.free_d
    if scale_free and abs(float(np.log(d).mean())) > 1e-6:
        weak[1] = WEAK_PENALTY
    if weak == prob.penalty:
        return x, report
    prob.penalty = weak
    x2, rep2 = optimise(prob, x)
    rep2["iterations"] += report["iterations"]
    rep2["time_s"] = round(rep2["time_s"] + report["time_s"], 4)  # the fit is both passes
    rep2["anchor_penalty"] = (
        f"bounds keep the optimum off the anchored scale: refined with penalties weakened to {weak} "
        f"(first pass: {report['iterations']} iterations, {report['message']})"
    )
    return x2, rep2


def fit_responses(
    data: Responses, cfg: FitConfig | None = None, *, init: IRTResult | None = None, compute_se: bool = True
) -> IRTResult:
    """Fit the model on a prepared response matrix (warm-started from ``init`` when given)."""
    cfg = cfg or FitConfig()
    if data.n_observed == 0:
        from ragrade.errors import DataError

        raise DataError(f"{data.source}: no observed responses (every 'correct' is missing)")
    factors = [f for f in data.factors if f.name in cfg.factors]
    if cfg.factors and len(factors) != len(cfg.factors):
        raise ConfigError(f"factors {list(cfg.factors)} not all coded in the response data")
    design = Design(factors) if factors else None
    prob = Problem(data, cfg, design)
    start = warm_start(prob, data, init) if init is not None else cold_start(data, prob)
    x, report = optimise(prob, prob.pack(*start))
    x, report = _repolish(prob, x, report)
    report["warm_start"] = init is not None
    theta, d, b, g, z = prob.unpack(x)
    t0 = time.perf_counter()
    result = finish_result(prob, data, cfg, theta, d, b, g, z, report, compute_se=compute_se)
    # SEs, statistics and flags: everything after the optimiser ("se" is part of it)
    result.timings["se_stats"] = time.perf_counter() - t0
    return result


def one_level_factors(data: Responses, names: Sequence[str]) -> dict[str, str]:
    """The factors among ``names`` with a single level where they apply (``{factor: level}``): every pipeline
    shares it, so the responses hold no effect of it to estimate."""
    return {f.name: f.levels[0] for f in data.factors if f.name in names and len(f.levels) == 1}


def fit_irt(
    data: pd.DataFrame | str | Path | Responses,
    model: str = "3pl",
    factors: Sequence[str] = (),
    *,
    config: FitConfig | None = None,
    init: IRTResult | None = None,
    out: str | Path | None = None,
    exam: str | Path | None = None,
    not_applicable: Mapping[str, tuple[str, ...]] | None = None,
) -> IRTResult:
    """Fit an IRT model on responses from a DataFrame, a run dir or a Parquet/CSV file.

    ``factors`` switches on the hierarchical model; a pipeline whose value of a factor is one of
    ``not_applicable`` (or ``config.not_applicable``; default: ``none`` or empty) gets no effect
    from that factor. A factor with one level has no effect to estimate: it is left out of the model
    and named in ``result.fit["one_level_factors"]`` (``{factor: level}``). When ``out`` is given,
    irt.json and the per-item / per-pipeline / per-effect CSV tables are written there, with
    information curves grouped by the tags of ``exam`` (or the run's exam).
    """
    cfg = config or FitConfig(model=model, factors=tuple(factors), not_applicable=not_applicable)
    t0 = time.perf_counter()
    resp = data if isinstance(data, Responses) else load_responses(data, cfg.factors, cfg.not_applicable)
    t_read = time.perf_counter() - t0
    from ragrade.irt.jackknife import draw_groups, jackknife_se

    single = one_level_factors(resp, cfg.factors)
    if single:  # no effect to estimate: left out of the model, and said (result.fit["one_level_factors"])
        cfg = cfg.model_copy(update={"factors": tuple(f for f in cfg.factors if f not in single)})
    if cfg.se == "jackknife":  # a design the jackknife cannot split fails before any fitting
        draw_groups(resp, cfg.factors, cfg.jackknife_groups, cfg.seed)
    result = fit_responses(resp, cfg, init=init)
    if single:
        result.fit["one_level_factors"] = single
    if cfg.se in ("bootstrap", "parametric", "jackknife"):
        t_boot = time.perf_counter()
        se_methods: dict[str, Callable[[Responses, FitConfig, IRTResult], IRTResult]] = {
            "bootstrap": bootstrap_se,
            "parametric": parametric_se,
            "jackknife": partial(jackknife_se, refit=fit_responses),
        }
        se_methods[cfg.se](resp, cfg, result)
        result.timings["se"] = result.timings.get("se", 0.0) + time.perf_counter() - t_boot
    result.timings = {"read": t_read, "fit": float(result.fit.get("time_s", 0.0)), **result.timings}
    result.timings["fit_se_stats"] = time.perf_counter() - t0 - t_read  # fit, SEs, statistics and flags
    if out is not None:
        from ragrade.irt.io import exam_tags

        exam_path = exam or resp.exam_path
        result.tags = exam_tags(exam_path) if exam_path and Path(exam_path).exists() else {}
        result.exam_path = str(exam_path) if exam_path else None
        if isinstance(data, (str, Path)):  # what the fit was computed from, so that a reader can tell it is stale
            from ragrade.provenance import source_record

            fitted = Path(data) / "responses.parquet" if Path(data).is_dir() else Path(data)
            result.responses = source_record(fitted) if fitted.is_file() else {}
        t1 = time.perf_counter()
        result.write(out)
        result.timings["write"] = time.perf_counter() - t1
    return result


def bootstrap_se(data: Responses, cfg: FitConfig, result: IRTResult) -> IRTResult:
    """Replace ability and effect SEs by a bootstrap over items (refits warm-started from ``result``)."""
    rng = np.random.default_rng(cfg.seed)
    sub_cfg = cfg.replace(se="none")
    refits = []
    for _ in range(cfg.n_boot):
        idx = rng.integers(0, len(data.items), len(data.items))
        refits.append(fit_responses(data.subset_items(idx.tolist()), sub_cfg, init=result, compute_se=False))
    n_conv = _apply_replicates(data, cfg, result, refits, "se_bootstrap")
    result.se_method = f"bootstrap over items (B={cfg.n_boot}, {n_conv} refits converged)"
    return result


def parametric_se(data: Responses, cfg: FitConfig, result: IRTResult) -> IRTResult:
    """Replace ability and effect SEs by a parametric bootstrap.

    ``cfg.n_boot`` response matrices are drawn from the fitted model (same missing cells as the data),
    each refitted warm-started from ``result``; every refit sets its own scale (priors / anchoring), so
    the SDs include the variation of the logit unit itself, which the observed and sandwich SEs treat as known.
    """
    from ragrade.irt.simulate import sample_matrix

    rng = np.random.default_rng(cfg.seed)
    sub_cfg = cfg.replace(se="none")
    missing = data.R < 0
    refits = []
    for _ in range(cfg.n_boot):
        R = sample_matrix(result.theta, result.discrimination, result.difficulty, result.guessing, rng)
        R[missing] = -1
        refits.append(fit_responses(replace(data, R=R), sub_cfg, init=result, compute_se=False))
    n_conv = _apply_replicates(data, cfg, result, refits, "se_parametric")
    result.se_method = f"parametric bootstrap (B={cfg.n_boot}, {n_conv} refits converged)"
    return result


def _apply_replicates(data: Responses, cfg: FitConfig, result: IRTResult, refits: list[IRTResult], key: str) -> int:
    """Set ability and effect SEs to the SDs over ``refits`` (effect SDs also under ``key`` in the effect
    details) and recompute the percentage-point intervals; returns how many refits converged."""
    result.theta_se = np.asarray(np.std([r.theta for r in refits], axis=0, ddof=1))
    effs = [{f: [v[0] for v in lv.values()] for f, lv in r.effects.items()} for r in refits]
    for f, levels in result.effects.items():
        sd = np.std([e[f] for e in effs], axis=0, ddof=1)
        result.effects[f] = {lvl: (est, float(sd[j])) for j, (lvl, (est, _)) in enumerate(levels.items())}
        for j, lvl in enumerate(levels):
            result.effects_detail.setdefault(f, {}).setdefault(lvl, {})[key] = float(sd[j])
    factors = [f for f in data.factors if f.name in cfg.factors]
    if factors and result.effects:
        from ragrade.irt.result import add_accuracy

        items = (result.discrimination, result.difficulty, result.guessing)
        cov = {f: np.atleast_2d(np.cov(np.array([e[f] for e in effs]), rowvar=False)) for f in result.effects}
        add_accuracy(result.effects_detail, Design(factors), data.R, result.theta, result.effects, items, cov)
    return sum(int(r.converged) for r in refits)


__all__ = [
    "SOLVERS",
    "FitConfig",
    "Problem",
    "bootstrap_se",
    "fit_irt",
    "fit_responses",
    "lbfgs",
    "one_level_factors",
    "optimise",
    "parametric_se",
    "pick_kernel",
]
