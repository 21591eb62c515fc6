"""The result of an IRT fit, and how the optimiser's output becomes one.

:func:`finish_result` anchors the estimates (:mod:`ragrade.irt.anchor`, never changing the
likelihood), computes standard errors (:mod:`ragrade.irt.stderr`), statistics and flags
(:mod:`ragrade.irt.stats`) and the effects in percentage points of accuracy (:mod:`ragrade.irt.accuracy`);
:meth:`IRTResult.write` (:func:`write_result`) writes irt.json and its tables, laid out with the
helpers of :mod:`ragrade.irt.output`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ragrade.io import JSONObject, atomic_write_text, now_iso, write_json
from ragrade.irt import information as info
from ragrade.irt import output
from ragrade.irt.accuracy import accuracy_effects
from ragrade.irt.anchor import anchor
from ragrade.irt.hierarchical import Design
from ragrade.irt.io import Responses, groups_from_tags
from ragrade.irt.model import loglik_sse
from ragrade.irt.problem import FitConfig, Problem
from ragrade.irt.stats import fit_stats, item_rest_corr, item_stats, pipeline_stats
from ragrade.irt.stderr import standard_errors

F64 = npt.NDArray[np.float64]
CURVES_MAX_ITEMS = 500
_item_rest_corr = item_rest_corr  # the name the tests used


@dataclass
class IRTResult:
    """Estimates of one fit, aligned with ``pipelines`` and ``items`` (sorted labels)."""

    model: str
    pipelines: list[str]
    items: list[str]
    theta: F64
    theta_se: F64
    discrimination: F64
    difficulty: F64
    guessing: F64
    item_se: F64  # (n_items, 3): se of d, b, g (nan when fixed or not identified)
    effects: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)
    identifiability: JSONObject = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    item_stats: pd.DataFrame = field(default_factory=pd.DataFrame)
    pipeline_stats: pd.DataFrame = field(default_factory=pd.DataFrame)
    grid: tuple[float, float, int] = (-4.0, 4.0, 81)
    se_method: str = "observed"
    tags: dict[str, dict[str, Any]] = field(default_factory=dict)
    exam_path: str | None = None
    source: str = ""
    responses: dict[str, Any] = field(default_factory=dict)  # the responses file fitted (ragrade.provenance)
    not_applicable: dict[str, JSONObject] = field(default_factory=dict)  # factor -> values, pipelines
    # factor -> level -> se_observed, se_sandwich, accuracy_pp (+ _se, _ci95_low/high, _cells, _source)
    effects_detail: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage (read, fit, se, ...)

    @property
    def converged(self) -> bool:
        """Whether the optimiser met the convergence criterion."""
        return bool(self.fit.get("converged", False))

    def theta_grid(self) -> F64:
        """The grid of abilities used for the information curves."""
        lo, hi, n = self.grid
        return info.theta_grid(lo, hi, n, self.theta)

    def items_frame(self) -> pd.DataFrame:
        """One row per item: parameters, SEs, observed stats, information peak, flags."""
        d, b, g = self.discrimination, self.difficulty, self.guessing
        peak = info.theta_max_information(d, b, g)
        df = pd.DataFrame(
            {
                "question_id": self.items,
                "discrimination": d,
                "difficulty": b,
                "guessing": g,
                "se_discrimination": self.item_se[:, 0],
                "se_difficulty": self.item_se[:, 1],
                "se_guessing": self.item_se[:, 2],
                "theta_max_information": peak,
                "max_information": _information_at(peak, d, b, g),
            }
        )
        df = pd.concat([df, self.item_stats.reset_index(drop=True)], axis=1)
        for key in ("bloom", "qword", "topic"):
            vals = [self.tags.get(i, {}).get(key) for i in self.items]
            if any(v is not None for v in vals):
                df[key] = ["|".join(map(str, v)) if isinstance(v, list) else v for v in vals]
        return df

    def pipelines_frame(self) -> pd.DataFrame:
        """One row per pipeline: ability, SE, accuracy, RMSE, factor levels, flags."""
        df = pd.DataFrame({"pipeline": self.pipelines, "theta": self.theta, "se": self.theta_se})
        return pd.concat([df, self.pipeline_stats.reset_index(drop=True)], axis=1)

    def effects_frame(self) -> pd.DataFrame:
        """One row per (factor, level): effect and SE (empty for the flat model)."""
        rows = [
            {"factor": f, "level": lvl, "estimate": est, "se": se}
            for f, levels in self.effects.items()
            for lvl, (est, se) in levels.items()
        ]
        return pd.DataFrame(rows, columns=["factor", "level", "estimate", "se"])

    def information(self, groups: dict[str, dict[str, list[int]]] | None = None) -> JSONObject:
        """Information curves on the grid: test (sum), mean, the SE they imply, and per group."""
        grid = self.theta_grid()
        d, b, g = self.discrimination, self.difficulty, self.guessing
        test = info.test_information(grid, d, b, g)
        out: JSONObject = {
            "theta_grid": grid.round(6).tolist(),
            "test": test.round(6).tolist(),
            "mean": info.mean_information(grid, d, b, g).round(6).tolist(),
            "se_theta": (1.0 / np.sqrt(np.maximum(test, 1e-300))).round(6).tolist(),
            "formula": "I(theta) = d^2 ((p - g) / (1 - g))^2 (1 - p) / p",
            "groups": info.grouped_information(grid, d, b, g, groups or groups_from_tags(self.items, self.tags)),
        }
        if len(self.items) <= CURVES_MAX_ITEMS:
            out["item_information"] = dict(
                zip(self.items, info.item_information(grid, d, b, g).round(6).tolist(), strict=True)
            )
            out["item_characteristic"] = dict(
                zip(self.items, info.item_characteristic(grid, d, b, g).round(6).tolist(), strict=True)
            )
        return out

    def to_dict(self) -> JSONObject:
        """The irt.json document (see :mod:`ragrade.irt.output`)."""
        return result_doc(self)

    def write(self, out: str | Path) -> list[Path]:
        """Write irt.json at ``out`` and the item / pipeline / effect tables next to it; returns the paths."""
        return write_result(self, out)


def finish_result(
    prob: Problem,
    data: Responses,
    cfg: FitConfig,
    theta: F64,
    d: F64,
    b: F64,
    g: F64,
    z: F64,
    report: dict[str, Any],
    *,
    compute_se: bool = True,
) -> IRTResult:
    """Anchor the estimates, compute SEs, statistics and flags, and build the result."""
    theta, d, b, z, ident = anchor(prob, theta, d, b, z)
    if prob.design is not None:
        theta = prob.design.X @ z
    R = data.R
    ll, sse, sq_item, sq_person = loglik_sse(R, theta, d, b, g, fused=prob.backend == "numba")
    fit = fit_stats(data, prob, ll, sse)
    fit.update(report)
    pr = cfg.priors
    fit["log_posterior"] = None if not pr.active else -report["objective_per_response"] * prob.n_obs
    item_se = np.full((len(d), 3), np.nan)
    theta_se = np.full(len(theta), np.nan)
    se_method = "none"
    ses = None
    t0 = time.perf_counter()
    if compute_se and cfg.se != "none":
        ses = standard_errors(prob, data, cfg, theta, d, b, g)
        theta_se, item_se, se_method = ses.theta_se, ses.item_se, ses.method
    effects, detail, cov = _effects(prob, ses, cfg.se, z)
    if prob.design is not None and effects and compute_se:
        add_accuracy(detail, prob.design, R, theta, effects, (d, b, g), cov)
    se_time = time.perf_counter() - t0
    config = {
        "model": cfg.model,
        "factors": list(cfg.factors),
        "bounds": _bounds_dict(cfg),
        "priors": pr.describe(),
        "estimation": "MAP (joint)" if pr.active else "joint maximum likelihood",
        "backend": prob.backend,
        "se": cfg.se,
        "max_iter": cfg.max_iter,
        "gtol": cfg.gtol,
        "ftol": cfg.ftol,
        "not_applicable": {f.name: list(f.not_applicable) for f in data.factors if f.name in cfg.factors},
    }
    counts = dict(data.counts)
    counts["n_items"], counts["n_pipelines"] = len(data.items), len(data.pipelines)
    return IRTResult(
        model=cfg.model,
        pipelines=list(data.pipelines),
        items=list(data.items),
        theta=theta,
        theta_se=theta_se,
        discrimination=d,
        difficulty=b,
        guessing=g,
        item_se=item_se,
        effects=effects,
        fit=fit,
        identifiability=ident,
        config=config,
        counts=counts,
        item_stats=item_stats(R, sq_item, prob, (d, b, g)),
        pipeline_stats=pipeline_stats(data, sq_person, theta, prob),
        grid=cfg.theta_grid,
        se_method=se_method,
        source=data.source,
        not_applicable=_not_applicable(prob, data),
        effects_detail=detail,
        timings={"se": se_time},
    )


def add_accuracy(
    detail: dict[str, dict[str, JSONObject]],
    design: Design,
    R: npt.NDArray[np.int8],
    theta: F64,
    effects: dict[str, dict[str, tuple[float, float]]],
    items: tuple[F64, F64, F64],
    cov: dict[str, F64] | None = None,
) -> None:
    """Add each effect in percentage points of accuracy on this exam (with SE, interval and whether
    observed or partly predicted; :mod:`ragrade.irt.accuracy`) to ``detail``. ``R``: the responses
    (items x pipelines, -1 missing); ``cov``: per factor, the covariance of its level effects."""
    for f, levels in accuracy_effects(design, R, theta, effects, items, cov).items():
        for lvl, rec in levels.items():
            detail.setdefault(f, {}).setdefault(lvl, {}).update(rec)


def _information_at(theta: F64, d: F64, b: F64, g: F64) -> F64:
    """Each item's information at its own ``theta`` (elementwise)."""
    z = d * (theta - b)
    p = g + (1.0 - g) * 0.5 * (1.0 + np.tanh(0.5 * z))
    return np.asarray(d**2 * ((p - g) / (1.0 - g)) ** 2 * (1.0 - p) / p)


def _effects(
    prob: Problem, ses: Any, method: str, z: F64
) -> tuple[dict[str, dict[str, tuple[float, float]]], dict[str, dict[str, JSONObject]], dict[str, F64]]:
    """Per factor and level: (estimate, SE of the chosen method), both SEs in the detail, and per factor
    the covariance of the level effects of the chosen method."""
    effects: dict[str, dict[str, tuple[float, float]]] = {}
    detail: dict[str, dict[str, JSONObject]] = {}
    covs: dict[str, F64] = {}
    if prob.design is None:
        return effects, detail, covs
    effs = prob.design.effects(z)
    k = [len(e) for e in effs]
    nan = [np.full((n, n), np.nan) for n in k]
    cov_obs = prob.design.effect_cov(ses.cov_z) if ses is not None and ses.cov_z is not None else nan
    cov_rob = prob.design.effect_cov(ses.cov_z_robust) if ses is not None and ses.cov_z_robust is not None else nan
    for f, e, co, cr in zip(prob.design.factors, effs, cov_obs, cov_rob, strict=True):
        se_o = np.sqrt(np.maximum(np.diag(co), 0.0)) if np.isfinite(co).all() else np.full(len(e), np.nan)
        se_r = np.sqrt(np.maximum(np.diag(cr), 0.0)) if np.isfinite(cr).all() else np.full(len(e), np.nan)
        se = se_r if method == "sandwich" else se_o
        covs[f.name] = cr if method == "sandwich" else co
        effects[f.name] = {lvl: (float(e[j]), float(se[j])) for j, lvl in enumerate(f.levels)}
        detail[f.name] = {
            lvl: {"se_observed": float(se_o[j]), "se_sandwich": float(se_r[j])} for j, lvl in enumerate(f.levels)
        }
    return effects, detail, covs


def _not_applicable(prob: Problem, data: Responses) -> dict[str, JSONObject]:
    """Per factor of the model: the not-applicable values configured and seen, and the pipelines they cover."""
    if prob.design is None:
        return {}
    out = {}
    for f in prob.design.factors:
        rec = f.describe_not_applicable()
        rec["pipelines"] = [p for p, ok in zip(data.pipelines, f.applies, strict=True) if not ok]
        out[f.name] = rec
    return out


def _bounds_dict(cfg: FitConfig) -> dict[str, list[float]]:
    bd = cfg.bounds
    return {
        "theta": list(bd.theta),
        "difficulty": list(bd.difficulty),
        "discrimination": list(bd.discrimination),
        "guessing": list(bd.guessing),
    }


def effects_doc(res: IRTResult) -> dict[str, Any]:
    """Per factor and level: the effect in logits with its SE and 95% interval, and in percentage points."""
    out: dict[str, Any] = {}
    for f, levels in res.effects.items():
        out[f] = {}
        for lvl, (est, se) in levels.items():
            rec: JSONObject = {"estimate": output.num(est), "se": output.num(se)}
            if math.isfinite(se):
                rec["ci95"] = [output.num(est - 1.96 * se), output.num(est + 1.96 * se)]
            rec.update({k: output.num(v) for k, v in res.effects_detail.get(f, {}).get(lvl, {}).items()})
            out[f][lvl] = rec
    return out


def effects_table(res: IRTResult) -> pd.DataFrame:
    """One row per (factor, level): logits with SE and interval, and the accuracy difference in points."""
    rows = []
    for f, levels in effects_doc(res).items():
        for lvl, rec in levels.items():
            ci = rec.get("ci95") or [None, None]
            row = {"factor": f, "level": lvl, "estimate": rec["estimate"], "se": rec["se"]}
            row.update(ci95_low=ci[0], ci95_high=ci[1])
            row.update({k: v for k, v in rec.items() if k not in ("estimate", "se", "ci95")})
            rows.append(row)
    return pd.DataFrame(rows)


def result_doc(res: IRTResult, items: pd.DataFrame | None = None) -> dict[str, Any]:
    """The irt.json document (items inline only for small exams)."""
    from ragrade._version import __version__

    items = res.items_frame() if items is None else items
    pipes = res.pipelines_frame()
    flag_counts: dict[str, int] = {}
    for flags in items["flags"]:
        for fl in flags:
            flag_counts[fl] = flag_counts.get(fl, 0) + 1
    doc: JSONObject = {
        "kind": output.IRT_KIND,
        "version": output.IRT_VERSION,
        "package_version": __version__,
        "created": now_iso(),
        "model": res.model,
        "source": res.source,
        **({"responses": res.responses} if res.responses else {}),
        "exam": res.exam_path,
        "config": res.config,
        "counts": res.counts,
        "identifiability": res.identifiability,
        "not_applicable": res.not_applicable,
        "se_method": res.se_method,
        "fit": res.fit,
        "timings_s": {k: round(v, 3) for k, v in res.timings.items()},
        "abilities": output.records(pipes, "pipeline"),
        "items_summary": output.items_summary(items),
        "item_flags": flag_counts,
        "effects": effects_doc(res),
        "effects_units": {
            "estimate": "logits (ability units); the unit is set by the priors / anchoring, see identifiability",
            "accuracy_pp": "how much more accurate, on this exam, in percentage points, the pipelines where the "
            "factor applies are with this level than on average over the factor's levels (other components "
            "as they are): from the observed accuracies of the pipelines with each combination; a combination "
            "absent from the data is predicted (the model moves the pipeline from its level to this one); in a "
            "full factorial, the observed marginal mean minus the grand mean",
            "accuracy_pp_se / accuracy_pp_ci95_low/high": "SE conditional on this exam's questions (observed "
            "part: binomial variance of the responses under the fitted model; predicted part: delta method "
            "from the effect covariance; the SE is the sum of the two, a bound for their correlation) and "
            "accuracy_pp +/- 1.96 SE",
            "accuracy_pp_source": "observed, or partly predicted (k of m cells: predicted combinations of this "
            "level, then over the factor's levels, whose mean every level's value uses; accuracy_pp_cells, "
            "accuracy_pp_cells_predicted: this level's)",
            "se_observed / se_sandwich": "observed-information and robust (questions as units) SEs in logits; "
            "se is the one of se_method (with se_method jackknife: the larger of se_jackknife and se_observed)",
        },
        "information": res.information(),
    }
    if len(items) <= output.ITEMS_INLINE_MAX:
        doc["items"] = output.records(items.copy(), "question_id")
    return doc


def write_result(res: IRTResult, out: str | Path) -> list[Path]:
    """Write irt.json at ``out`` and ``<stem>_items.parquet``, ``<stem>_pipelines.csv`` etc. next to it."""
    out = Path(out)
    stem = out.with_suffix("")
    items = res.items_frame()
    doc = result_doc(res, items)
    paths = [out]
    doc["tables"] = {}
    items_pq = Path(f"{stem}_items.parquet")
    output.write_parquet(items_pq, items)
    doc["tables"]["items"] = items_pq.name
    paths.append(items_pq)
    tables = {"pipelines": res.pipelines_frame()}
    if "items" in doc:
        tables["items_csv"] = items
    if res.effects:
        tables["effects"] = effects_table(res)
    tables["information"] = output.info_long(doc["information"])
    for name, df in tables.items():
        path = Path(f"{stem}_{name.removesuffix('_csv')}.csv")
        atomic_write_text(path, output.csv_ready(df).to_csv(index=False))
        doc["tables"][name] = path.name
        paths.append(path)
    write_json(out, doc)
    return paths


__all__ = ["IRTResult", "add_accuracy", "effects_doc", "effects_table", "finish_result", "result_doc", "write_result"]
