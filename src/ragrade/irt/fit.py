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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.optimize import minimize

from ragrade.errors import ConfigError
from ragrade.irt.hierarchical import Design
from ragrade.irt.io import Responses, load_responses
from ragrade.irt.model import Bounds, Priors, check_model, nll_grad_numpy
from ragrade.irt.result import IRTResult, finish_result

F64 = npt.NDArray[np.float64]
Kernel = Callable[..., tuple[float, F64, F64, F64, F64]]
NUMBA_MIN_RESPONSES = 250_000
GUESS_EPS = 1e-6
SOLVERS = ("newton", "lbfgs")


@dataclass(frozen=True)
class FitConfig:
    """Options of an IRT fit (defaults: 3PL, weak priors, observed-information SEs)."""

    model: str = "3pl"
    factors: tuple[str, ...] = ()
    bounds: Bounds = field(default_factory=Bounds)
    priors: Priors = field(default_factory=Priors)
    max_iter: int = 3000
    ftol: float = 1e-13  # L-BFGS-B only; small, so that the SE-based criterion decides
    gtol: float = 0.05  # converged when no coordinate is more than this many SEs from its optimum
    backend: str = "auto"  # auto | numpy | numba
    solver: str = "newton"  # newton (block Fisher scoring, the default) | lbfgs (L-BFGS-B)
    se: str = "observed"  # observed | bootstrap | none
    n_boot: int = 50
    seed: int = 0
    theta_grid: tuple[float, float, int] = (-4.0, 4.0, 81)
    # factor (or "*" for every factor not named) -> values meaning "does not apply to this pipeline";
    # None: DEFAULT_NOT_APPLICABLE ("none" and empty cells) for every factor; an empty tuple: strict
    not_applicable: Mapping[str, tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", check_model(self.model))
        if self.not_applicable is not None:
            spec = dict(self.not_applicable)
            for key, values in spec.items():
                if isinstance(values, str) or not all(isinstance(v, str) for v in values):
                    raise ConfigError(f"not-applicable values of '{key}' must be a list of strings, got {values!r}")
            object.__setattr__(self, "not_applicable", {k: tuple(v) for k, v in spec.items()})
        if self.backend not in ("auto", "numpy", "numba"):
            raise ConfigError(f"unknown backend '{self.backend}'; valid choices: auto, numpy, numba")
        if self.solver not in SOLVERS:
            raise ConfigError(f"unknown solver '{self.solver}'; valid choices: {', '.join(SOLVERS)}")
        if self.se not in ("observed", "bootstrap", "none"):
            raise ConfigError(f"unknown SE method '{self.se}'; valid choices: observed, bootstrap, none")
        if self.max_iter < 1 or self.n_boot < 2:
            raise ConfigError("max_iter must be >= 1 and n_boot >= 2")
        if len(set(self.factors)) != len(self.factors):
            raise ConfigError("a factor is listed twice")


def pick_kernel(backend: str, n_responses: int) -> tuple[Kernel, str]:
    """The numpy or the fused numba kernel; numba is imported only when used."""
    if backend == "numpy" or (backend == "auto" and n_responses < NUMBA_MIN_RESPONSES):
        return nll_grad_numpy, "numpy"
    try:
        from ragrade.irt._kernels import nll_grad_numba
    except ImportError:
        if backend == "numba":
            from ragrade.errors import MissingDependency

            raise MissingDependency("numba", extra="fast", purpose="the fused IRT kernel") from None
        return nll_grad_numpy, "numpy"
    return nll_grad_numba, "numba"


class Problem:
    """Packs the free parameters into one vector; evaluates objective and gradient."""

    def __init__(self, data: Responses, cfg: FitConfig, design: Design | None) -> None:
        self.data, self.cfg, self.design = data, cfg, design
        self.n_items, self.n_persons = data.R.shape
        self.free_d = cfg.model in ("2pl", "3pl")
        self.free_g = cfg.model == "3pl"
        self.k = design.k if design else self.n_persons
        self.n_obs = max(1, data.n_observed)
        self.kernel, self.backend = pick_kernel(cfg.backend, data.R.size)
        obs = data.R >= 0
        self.item_counts = obs.sum(axis=1).astype(np.float64)
        self.person_counts = obs.sum(axis=0).astype(np.float64)
        self.n_evals = 0
        self._box: tuple[F64, F64] | None = None

    # layout: [person block (theta or z)] [d]? [b] [g]?
    def sizes(self) -> list[int]:
        """Block sizes of the parameter vector."""
        return [self.k, self.n_items if self.free_d else 0, self.n_items, self.n_items if self.free_g else 0]

    def unpack(self, x: F64) -> tuple[F64, F64, F64, F64, F64]:
        """(theta, d, b, g, z) from the parameter vector (z is empty for the flat model)."""
        k, nd, nb, ng = self.sizes()
        pos = np.cumsum([0, k, nd, nb, ng])
        person = x[pos[0] : pos[1]]
        d = x[pos[1] : pos[2]] if self.free_d else np.ones(self.n_items)
        b = x[pos[2] : pos[3]]
        g = x[pos[3] : pos[4]] if self.free_g else np.zeros(self.n_items)
        if self.design is not None:
            return self.design.X @ person, d, b, g, person
        return person, d, b, g, np.zeros(0)

    def pack(self, person: F64, d: F64, b: F64, g: F64) -> F64:
        """The parameter vector of given blocks."""
        parts = [person, d if self.free_d else None, b, g if self.free_g else None]
        return np.concatenate([p for p in parts if p is not None])

    def box(self) -> list[tuple[float, float]]:
        """L-BFGS-B bounds for every coordinate."""
        bd = self.cfg.bounds
        glo = bd.guessing[0]
        if self.cfg.priors.guessing_beta is not None:
            glo = max(glo, GUESS_EPS)
        k, nd, nb, ng = self.sizes()
        return [bd.theta] * k + [bd.discrimination] * nd + [bd.difficulty] * nb + [(glo, bd.guessing[1])] * ng

    def box_arrays(self) -> tuple[F64, F64]:
        """Lower and upper bounds of every coordinate as arrays (cached)."""
        if self._box is None:
            lo, hi = np.array(self.box(), dtype=np.float64).reshape(-1, 2).T
            self._box = (lo, hi)
        return self._box

    def prior_terms(self, person: F64, d: F64, b: F64, g: F64) -> tuple[float, list[F64]]:
        """Negative log prior and its gradient per block."""
        pr = self.cfg.priors
        f = 0.0
        grads = [np.zeros_like(person), np.zeros_like(d), np.zeros_like(b), np.zeros_like(g)]
        if pr.theta_sd is not None:
            f += 0.5 * float(person @ person) / pr.theta_sd**2
            grads[0] = person / pr.theta_sd**2
        if pr.log_discrimination_sd is not None and self.free_d:
            ld = np.log(d)
            s2 = pr.log_discrimination_sd**2
            f += float((0.5 * ld**2 / s2).sum())  # normal on log d: its mode is d = 1
            grads[1] = ld / (s2 * d)
        if pr.difficulty_sd is not None:
            f += 0.5 * float(b @ b) / pr.difficulty_sd**2
            grads[2] = b / pr.difficulty_sd**2
        if pr.guessing_beta is not None and self.free_g:
            a, c = pr.guessing_beta
            f -= float(((a - 1.0) * np.log(g) + (c - 1.0) * np.log1p(-g)).sum())
            grads[3] = -(a - 1.0) / g + (c - 1.0) / (1.0 - g)
        # without priors the likelihood is flat along location (flat model) and scale shifts; these
        # penalties vanish on the anchored member of each flat family, so they change no estimate but
        # remove the flat directions the optimiser would otherwise wander along
        if pr.theta_sd is None and self.design is None:
            mt = float(person.mean())
            f += 0.5 * len(person) * mt**2
            grads[0] = grads[0] + mt
        if pr.theta_sd is None and pr.log_discrimination_sd is None and self.free_d:
            ml = float(np.log(d).mean())
            f += 0.5 * len(d) * ml**2
            grads[1] = grads[1] + ml / d
        return f, grads

    def objective(self, x: F64) -> tuple[float, F64]:
        """Negative log-posterior per observed response, and its gradient."""
        self.n_evals += 1
        theta, d, b, g, z = self.unpack(x)
        nll, gt, gd, gb, gg = self.kernel(self.data.R, theta, d, b, g)
        person = z if self.design is not None else theta
        fp, pg = self.prior_terms(person, d, b, g)
        g_person = (self.design.X.T @ gt if self.design is not None else gt) + pg[0]
        grad = self.pack(g_person, gd + pg[1], gb + pg[2], gg + pg[3])
        return (nll + fp) / self.n_obs, grad / self.n_obs

    def scales(self) -> F64:
        """Rough square roots of each coordinate's curvature (Fisher information ~ 0.15 per response)."""
        if self.design is not None:
            pc = (self.design.X**2).T @ self.person_counts
        else:
            pc = self.person_counts
        _, nd, _, ng = self.sizes()
        ic = self.item_counts
        parts = [pc * 0.15, ic * 0.15 if nd else None, ic * 0.15, ic * 1.0 if ng else None]
        curv = np.concatenate([p for p in parts if p is not None]) / self.n_obs
        return np.sqrt(np.maximum(curv, 1e-12))

    def step_in_se(self, x: F64, grad: F64, scale: F64) -> float:
        """Largest projected gradient / sqrt(curvature): the step left to go, in standard errors."""
        if not x.size:
            return 0.0
        lo, hi = self.box_arrays()
        gproj = np.where((x <= lo + 1e-12) & (grad > 0), 0.0, grad)
        gproj = np.where((x >= hi - 1e-12) & (gproj < 0), 0.0, gproj)
        return float(np.max(np.abs(gproj / scale)) * np.sqrt(self.n_obs))


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
    from ragrade.irt.newton import newton_optimise

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


def lbfgs(prob: Problem, x0: F64) -> tuple[F64, dict[str, Any]]:
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
    report["warm_start"] = init is not None
    theta, d, b, g, z = prob.unpack(x)
    return finish_result(prob, data, cfg, theta, d, b, g, z, report, compute_se=compute_se)


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
    from that factor. When ``out`` is given, irt.json and the per-item / per-pipeline / per-effect
    CSV tables are written there, with information curves grouped by the tags of ``exam`` (or the
    run's exam).
    """
    cfg = config or FitConfig(model=model, factors=tuple(factors), not_applicable=not_applicable)
    resp = data if isinstance(data, Responses) else load_responses(data, cfg.factors, cfg.not_applicable)
    result = fit_responses(resp, cfg, init=init)
    if cfg.se == "bootstrap":
        from ragrade.irt.result import bootstrap_se

        bootstrap_se(resp, cfg, result)
    if out is not None:
        from ragrade.irt.io import exam_tags

        exam_path = exam or resp.exam_path
        result.tags = exam_tags(exam_path) if exam_path and Path(exam_path).exists() else {}
        result.exam_path = str(exam_path) if exam_path else None
        result.write(out)
    return result


__all__ = ["SOLVERS", "FitConfig", "Problem", "fit_irt", "fit_responses", "lbfgs", "optimise", "pick_kernel"]
