"""The result of an IRT fit: identifiability, standard errors, fit statistics, flags, files.

``irt.json`` (kind ``irt``, version 1) holds everything a report needs:
abilities with SEs, item parameters with SEs and flags, factor effects with
SEs, fit statistics (log-likelihood, AIC/BIC, RMSE against mean-prediction
baselines), convergence, the identifiability choices, per factor the values
treated as "not applicable" and the pipelines they cover, and information curves
on a theta grid (test, mean, per Bloom level / question word / topic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ragrade.io import atomic_write_text, now_iso, write_json
from ragrade.irt import information as info
from ragrade.irt.hierarchical import effects_cov, observed_information
from ragrade.irt.io import Responses, groups_from_tags
from ragrade.irt.model import _block_slices, loglik_sse

if TYPE_CHECKING:
    from ragrade.irt.fit import FitConfig, Problem

F64 = npt.NDArray[np.float64]
IRT_KIND = "irt"
IRT_VERSION = 1
CURVES_MAX_ITEMS = 500


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
    identifiability: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    item_stats: pd.DataFrame = field(default_factory=pd.DataFrame)
    pipeline_stats: pd.DataFrame = field(default_factory=pd.DataFrame)
    grid: tuple[float, float, int] = (-4.0, 4.0, 81)
    se_method: str = "observed"
    tags: dict[str, dict[str, Any]] = field(default_factory=dict)
    exam_path: str | None = None
    source: str = ""
    not_applicable: dict[str, dict[str, Any]] = field(default_factory=dict)  # factor -> values, pipelines

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
                "max_information": np.diag(info.item_information(peak, d, b, g))
                if len(d) <= 5000
                else np.array(
                    [
                        info.item_information(t, d[i : i + 1], b[i : i + 1], g[i : i + 1])[0, 0]
                        for i, t in enumerate(peak)
                    ]
                ),
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

    def information(self, groups: dict[str, dict[str, list[int]]] | None = None) -> dict[str, Any]:
        """Information curves on the grid: test (sum), mean, the SE they imply, and per group."""
        grid = self.theta_grid()
        d, b, g = self.discrimination, self.difficulty, self.guessing
        test = info.test_information(grid, d, b, g)
        out: dict[str, Any] = {
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

    def to_dict(self) -> dict[str, Any]:
        """The irt.json document."""
        from ragrade import __version__

        items = self.items_frame()
        pipes = self.pipelines_frame()
        flag_counts: dict[str, int] = {}
        for flags in items["flags"]:
            for fl in flags:
                flag_counts[fl] = flag_counts.get(fl, 0) + 1
        return {
            "kind": IRT_KIND,
            "version": IRT_VERSION,
            "package_version": __version__,
            "created": now_iso(),
            "model": self.model,
            "source": self.source,
            "exam": self.exam_path,
            "config": self.config,
            "counts": self.counts,
            "identifiability": self.identifiability,
            "not_applicable": self.not_applicable,
            "se_method": self.se_method,
            "fit": self.fit,
            "abilities": {r["pipeline"]: _clean(r.drop("pipeline").to_dict()) for _, r in pipes.iterrows()},
            "items": {r["question_id"]: _clean(r.drop("question_id").to_dict()) for _, r in items.iterrows()},
            "item_flags": flag_counts,
            "effects": {
                f: {lvl: {"estimate": _num(e), "se": _num(s)} for lvl, (e, s) in levels.items()}
                for f, levels in self.effects.items()
            },
            "information": self.information(),
        }

    def write(self, out: str | Path) -> list[Path]:
        """Write irt.json at ``out`` and ``<stem>_items.csv`` etc. next to it; returns the paths."""
        out = Path(out)
        doc = self.to_dict()
        stem = out.with_suffix("")
        tables = {"items": self.items_frame(), "pipelines": self.pipelines_frame()}
        if self.effects:
            tables["effects"] = self.effects_frame()
        tables["information"] = _info_long(doc["information"])
        paths = [out]
        doc["tables"] = {}
        for name, df in tables.items():
            path = Path(f"{stem}_{name}.csv")
            df = df.copy()
            for col in df.columns:
                if df[col].map(lambda v: isinstance(v, list)).any():
                    df[col] = df[col].map(lambda v: "|".join(map(str, v)) if isinstance(v, list) else v)
            atomic_write_text(path, df.to_csv(index=False))
            doc["tables"][name] = path.name
            paths.append(path)
        write_json(out, doc)
        return paths


def _num(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else round(float(v), 6)
    if isinstance(v, np.integer):
        return int(v)
    return v


def _clean(rec: dict[Any, Any]) -> dict[str, Any]:
    return {str(k): _num(v) for k, v in rec.items()}


def _info_long(doc: dict[str, Any]) -> pd.DataFrame:
    grid = doc["theta_grid"]
    frames = [
        pd.DataFrame(
            {"grouping": "all", "level": "all", "n_items": None, "theta": grid, "mean": doc["mean"], "sum": doc["test"]}
        )
    ]
    for name, levels in doc["groups"].items():
        for level, cur in levels.items():
            frames.append(
                pd.DataFrame(
                    {
                        "grouping": name,
                        "level": level,
                        "n_items": cur["n_items"],
                        "theta": grid,
                        "mean": cur["mean"],
                        "sum": cur["sum"],
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def _anchor(prob: Problem, theta: F64, d: F64, b: F64, z: F64) -> tuple[F64, F64, F64, F64, dict[str, Any]]:
    """Apply the recorded location/scale anchors exactly (the likelihood does not change)."""
    ident: dict[str, Any] = {}
    if prob.design is None:
        shift = float(theta.mean())
        theta, b = theta - shift, b - shift
        ident["location"] = "abilities centred to mean 0 after the fit (difficulties shifted with them)"
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
        s = float(np.exp(np.log(d).mean()))
        d, theta, b, z = d / s, theta * s, b * s, z * s
        ident["scale"] = "discriminations normalised to geometric mean 1 after the fit"
    bd = prob.cfg.bounds
    clipped = int(((b < bd.difficulty[0]) | (b > bd.difficulty[1])).sum())
    clipped += int(((d < bd.discrimination[0]) | (d > bd.discrimination[1])).sum())
    ident["clipped_after_anchoring"] = clipped
    b = np.clip(b, *bd.difficulty)
    d = np.clip(d, *bd.discrimination)
    return theta, d, b, z, ident


def _item_prior_hess(prob: Problem, d: F64, b: F64, g: F64) -> F64:
    pr = prob.cfg.priors
    out = np.zeros((len(d), 3))
    if pr.log_discrimination_sd is not None and prob.free_d:
        s2 = pr.log_discrimination_sd**2
        out[:, 0] = (1.0 - np.log(d)) / (s2 * d**2)
    if pr.difficulty_sd is not None:
        out[:, 1] = 1.0 / pr.difficulty_sd**2
    if pr.guessing_beta is not None and prob.free_g:
        a, c = pr.guessing_beta
        gg = np.maximum(g, 1e-6)
        out[:, 2] = (a - 1.0) / gg**2 + (c - 1.0) / (1.0 - gg) ** 2
    return out


def _item_ses(H: F64, prior: F64, free: list[int]) -> F64:
    se = np.full((H.shape[0], 3), np.nan)
    B = H[:, free][:, :, free] + np.stack([np.diag(v) for v in prior[:, free]])
    with np.errstate(invalid="ignore"):
        try:
            cov = np.linalg.inv(B)
        except np.linalg.LinAlgError:
            cov = np.linalg.pinv(B, hermitian=True)
        diag = np.diagonal(cov, axis1=1, axis2=2)
        se[:, free] = np.where(diag > 0, np.sqrt(np.abs(diag)), np.nan)
    return se


def _item_stats(R: npt.NDArray[np.int8], sq_item: F64, prob: Problem, params: tuple[F64, F64, F64]) -> pd.DataFrame:
    obs = R >= 0
    n = obs.sum(axis=1)
    right = (R == 1).sum(axis=1)
    pv = np.where(n > 0, right / np.maximum(n, 1), np.nan)
    corr = _item_rest_corr(R)
    bd = prob.cfg.bounds
    d, b, g = params
    flags: list[list[str]] = []
    for i in range(R.shape[0]):
        f = []
        if n[i] == 0:
            f.append("no_responses")
        elif right[i] == n[i]:
            f.append("all_correct")
        elif right[i] == 0:
            f.append("none_correct")
        if np.isfinite(corr[i]) and corr[i] < 0:
            f.append("negative_discrimination")
        if prob.free_d and d[i] <= bd.discrimination[0] * (1 + 1e-6):
            f.append("discrimination_at_lower_bound")
        if b[i] <= bd.difficulty[0] + 1e-6 or b[i] >= bd.difficulty[1] - 1e-6:
            f.append("difficulty_at_bound")
        if prob.free_g and g[i] >= bd.guessing[1] - 1e-6:
            f.append("guessing_at_upper_bound")
        flags.append(f)
    rmse = np.sqrt(sq_item / np.maximum(n, 1))
    return pd.DataFrame({"p_value": pv, "n_responses": n, "item_rest_corr": corr, "rmse": rmse, "flags": flags})


def _item_rest_corr(R: npt.NDArray[np.int8]) -> F64:
    """Per item: correlation of its responses with the pipelines' accuracy on the other items.

    NaN when fewer than 3 pipelines answered it (among those with 2+ answers) or either side is constant.
    Vectorised by blocks of items (bounded temporaries).
    """
    obs = R >= 0
    tot_r = (R == 1).sum(axis=0).astype(np.float64)
    tot_n = obs.sum(axis=0).astype(np.float64)
    ok = tot_n > 1
    den = np.where(ok, tot_n - 1.0, 1.0)
    corr = np.full(R.shape[0], np.nan)
    for sl in _block_slices(*R.shape):
        M = (obs[sl] & ok[None, :]).astype(np.float64)
        X = (R[sl] == 1).astype(np.float64)
        Y = (tot_r[None, :] - X) / den[None, :]
        cnt = M.sum(1)
        c = np.maximum(cnt, 1.0)[:, None]
        Xc = (X - (M * X).sum(1, keepdims=True) / c) * M
        Yc = (Y - (M * Y).sum(1, keepdims=True) / c) * M
        vx, vy, cov = (Xc * Xc).sum(1), (Yc * Yc).sum(1), (Xc * Yc).sum(1)
        good = (cnt >= 3) & (vx > 1e-12) & (vy > 1e-24 * np.maximum(cnt, 1.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            corr[sl] = np.where(good, cov / np.sqrt(vx * vy), np.nan)
    return corr


def _pipeline_stats(data: Responses, sq_person: F64, theta: F64, prob: Problem) -> pd.DataFrame:
    R = data.R
    obs = R >= 0
    n = obs.sum(axis=0)
    right = (R == 1).sum(axis=0)
    bd = prob.cfg.bounds
    flags = []
    for m in range(R.shape[1]):
        f = []
        if n[m] == 0:
            f.append("no_responses")
        elif right[m] == n[m]:
            f.append("all_correct")
        elif right[m] == 0:
            f.append("none_correct")
        if theta[m] <= bd.theta[0] + 1e-6 or theta[m] >= bd.theta[1] - 1e-6:
            f.append("theta_at_bound")
        flags.append(f)
    df = pd.DataFrame(
        {
            "accuracy": np.where(n > 0, right / np.maximum(n, 1), np.nan),
            "n_answered": n,
            "n_missing": R.shape[0] - n,
            "rmse": np.sqrt(sq_person / np.maximum(n, 1)),
            "flags": flags,
        }
    )
    for factor in data.factors:
        df[factor.name] = factor.labels()
    return df


def _fit_stats(data: Responses, prob: Problem, ll: float, sse: float) -> dict[str, Any]:
    R = data.R
    n_obs = data.n_observed
    free_items = 1 + int(prob.free_d) + int(prob.free_g)
    k = prob.k + free_items * prob.n_items - int(prob.free_d) - int(prob.design is None)
    right_p = (R == 1).sum(0).astype(np.float64)
    n_p = (R >= 0).sum(0).astype(np.float64)
    mean = float(right_p.sum() / max(n_obs, 1))
    acc = right_p / np.maximum(n_p, 1.0)
    # sum over a pipeline's answers of (y - acc)^2 = n acc (1 - acc): no response-sized temporaries
    base_pipe = float(np.sqrt((n_p * acc * (1.0 - acc)).sum() / max(n_obs, 1)))
    return {
        "log_likelihood": ll,
        "n_observed": n_obs,
        "n_params": int(k),
        "aic": 2 * k - 2 * ll,
        "bic": k * math.log(n_obs) - 2 * ll,
        "rmse": math.sqrt(sse / n_obs),
        "rmse_baseline": float(np.sqrt(mean * (1 - mean))),
        "rmse_baseline_pipeline": base_pipe,
        "mean_accuracy": float(mean),
    }


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
    theta, d, b, z, ident = _anchor(prob, theta, d, b, z)
    if prob.design is not None:
        theta = prob.design.X @ z
    R = data.R
    ll, sse, sq_item, sq_person = loglik_sse(R, theta, d, b, g, fused=prob.backend == "numba")
    fit = _fit_stats(data, prob, ll, sse)
    fit.update(report)
    pr = cfg.priors
    fit["log_posterior"] = None if not pr.active else -report["objective_per_response"] * prob.n_obs
    free = [i for i, on in enumerate((prob.free_d, True, prob.free_g)) if on]
    item_se = np.full((len(d), 3), np.nan)
    theta_se = np.full(len(theta), np.nan)
    effects: dict[str, dict[str, tuple[float, float]]] = {}
    se_method = "none"
    prior_prec = 0.0 if pr.theta_sd is None else 1.0 / pr.theta_sd**2
    cov_z = None
    if compute_se and cfg.se != "none":
        ph = _item_prior_hess(prob, d, b, g)
        nuisance = [i for i in free if not (i == 0 and pr.log_discrimination_sd is None and pr.theta_sd is None)]
        X = prob.design.X if prob.design is not None else None
        H, h_tt, red = observed_information(R, theta, (d, b, g), ph, X, nuisance)
        item_se = _item_ses(H, ph, free)
        if prob.design is not None and X is not None:
            cov_z = effects_cov(X, h_tt, red, prior_prec)
            theta_se = np.sqrt(np.maximum(np.einsum("pk,kl,pl->p", X, cov_z, X), 0.0))
            se_method = "observed information, item parameters profiled out (Schur complement)"
            if len(nuisance) < len(free):
                se_method += "; conditional on discriminations (scale anchor, no priors)"
        else:
            from ragrade.irt.model import fisher_theta

            theta_se = 1.0 / np.sqrt(fisher_theta(R, theta, d, b, g) + prior_prec)
            se_method = "abilities: test information at the estimate (items fixed); items: observed 3x3 blocks"
    if prob.design is not None:
        effs = prob.design.effects(z)
        covs = prob.design.effect_cov(cov_z) if cov_z is not None else [np.full((len(e), len(e)), np.nan) for e in effs]
        for f, e, c in zip(prob.design.factors, effs, covs, strict=True):
            se = np.sqrt(np.maximum(np.diag(c), 0.0)) if np.isfinite(c).all() else np.full(len(e), np.nan)
            effects[f.name] = {lvl: (float(e[j]), float(se[j])) for j, lvl in enumerate(f.levels)}
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
        item_stats=_item_stats(R, sq_item, prob, (d, b, g)),
        pipeline_stats=_pipeline_stats(data, sq_person, theta, prob),
        grid=cfg.theta_grid,
        se_method=se_method,
        source=data.source,
        not_applicable=_not_applicable(prob, data),
    )


def _not_applicable(prob: Problem, data: Responses) -> dict[str, dict[str, Any]]:
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


def bootstrap_se(data: Responses, cfg: FitConfig, result: IRTResult) -> IRTResult:
    """Replace ability and effect SEs by a bootstrap over items (refits warm-started from ``result``)."""
    from ragrade.irt.fit import fit_responses

    rng = np.random.default_rng(cfg.seed)
    sub_cfg = replace(cfg, se="none")
    thetas, effs = [], []
    n_conv = 0
    for _ in range(cfg.n_boot):
        idx = rng.integers(0, len(data.items), len(data.items))
        res = fit_responses(data.subset_items(idx.tolist()), sub_cfg, init=result, compute_se=False)
        n_conv += int(res.converged)
        thetas.append(res.theta)
        effs.append({f: [v[0] for v in lv.values()] for f, lv in res.effects.items()})
    result.theta_se = np.asarray(np.std(thetas, axis=0, ddof=1))
    for f, levels in result.effects.items():
        sd = np.std([e[f] for e in effs], axis=0, ddof=1)
        result.effects[f] = {lvl: (est, float(sd[j])) for j, (lvl, (est, _)) in enumerate(levels.items())}
    result.se_method = f"bootstrap over items (B={cfg.n_boot}, {n_conv} refits converged)"
    return result


__all__ = ["IRT_KIND", "IRT_VERSION", "IRTResult", "bootstrap_se", "finish_result"]
