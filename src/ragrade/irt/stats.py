"""Observed statistics and flags of a fit: per item, per pipeline, and overall (log-likelihood, AIC/BIC, RMSE)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ragrade.irt.io import Responses
from ragrade.irt.model import block_slices
from ragrade.irt.problem import Problem

F64 = npt.NDArray[np.float64]


def item_stats(R: npt.NDArray[np.int8], sq_item: F64, prob: Problem, params: tuple[F64, F64, F64]) -> pd.DataFrame:
    """Per item: p-value, responses, item-rest correlation, RMSE and flags."""
    obs = R >= 0
    n = obs.sum(axis=1)
    right = (R == 1).sum(axis=1)
    pv = np.where(n > 0, right / np.maximum(n, 1), np.nan)
    corr = item_rest_corr(R)
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


def item_rest_corr(R: npt.NDArray[np.int8]) -> F64:
    """Per item: correlation of its responses with the pipelines' accuracy on the other items.

    NaN when fewer than 3 pipelines answered it (among those with 2+ answers) or either side is constant.
    Vectorised by blocks of items (bounded temporaries).
    """
    # with x the item's 0/1 answers, w = 1 / (n_p - 1) and u = (right_p) w, the rest score is y = u - x w;
    # every sum the correlation needs is a product of the 0/1 blocks with a few per-pipeline vectors
    obs = R >= 0
    tot_r = (R == 1).sum(axis=0).astype(np.float64)
    tot_n = obs.sum(axis=0).astype(np.float64)
    ok = tot_n > 1
    w = np.where(ok, 1.0 / np.where(ok, tot_n - 1.0, 1.0), 0.0)
    u = tot_r * w
    right_vecs = np.stack([w, u - w, u * w, w * w], 1)
    obs_vecs = np.stack([ok.astype(np.float64), u, u * u], 1)
    corr = np.full(R.shape[0], np.nan)
    for sl in block_slices(*R.shape):
        X = (R[sl] == 1) * ok[None, :].astype(np.float64)
        M = (R[sl] >= 0).astype(np.float64)
        xw, xuw, xuw2, xw2 = (X @ right_vecs).T
        cnt, mu, mu2 = (M @ obs_vecs).T
        sx = X.sum(1)
        sy = mu - xw
        sxy = xuw
        syy = mu2 - 2.0 * xuw2 + xw2
        c = np.maximum(cnt, 1.0)
        vx, vy, cov = sx - sx * sx / c, syy - sy * sy / c, sxy - sx * sy / c
        good = (cnt >= 3) & (vx > 1e-9) & (vy > 1e-12 * np.maximum(cnt, 1.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            corr[sl] = np.where(good, cov / np.sqrt(np.maximum(vx * vy, 1e-300)), np.nan)
    return corr


def pipeline_stats(data: Responses, sq_person: F64, theta: F64, prob: Problem) -> pd.DataFrame:
    """Per pipeline: accuracy, answered/missing counts, RMSE, flags and factor levels."""
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
        if theta[m] < bd.theta[0] - 1e-6 or theta[m] > bd.theta[1] + 1e-6:
            f.append("theta_beyond_bound")  # hierarchical: the bound holds each effect coordinate
        elif theta[m] <= bd.theta[0] + 1e-6 or theta[m] >= bd.theta[1] - 1e-6:
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


def fit_stats(data: Responses, prob: Problem, ll: float, sse: float) -> dict[str, Any]:
    """Log-likelihood, parameter count, AIC/BIC and RMSE against mean-prediction baselines."""
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


__all__ = ["fit_stats", "item_rest_corr", "item_stats", "pipeline_stats"]
