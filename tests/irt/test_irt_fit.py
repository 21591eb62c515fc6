"""Parameter recovery, hierarchical effects, identifiability, missing data, warm starts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest

from ragrade.errors import DataError
from ragrade.irt.fit import FitConfig, fit_irt, fit_responses
from ragrade.irt.io import Responses, build_responses
from ragrade.irt.model import Priors
from ragrade.irt.result import IRTResult
from ragrade.irt.simulate import Truth, simulate_flat, simulate_hierarchical, to_frame


def _corr(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> float:
    return float(np.corrcoef(a, b)[0, 1])


@pytest.fixture(scope="module")
def flat_fit() -> tuple[IRTResult, Truth]:
    # the size: 200 pipelines x 2,000 items (about 10 s with the numba kernel)
    data, truth = simulate_flat(200, 2000, seed=11)
    return fit_responses(data, FitConfig()), truth


def test_recovery_3pl_200x2000(flat_fit: tuple[IRTResult, Truth]) -> None:
    res, truth = flat_fit
    assert res.converged, res.fit
    assert _corr(res.theta, truth.theta) >= 0.98
    assert _corr(res.difficulty, truth.difficulty) >= 0.9
    assert _corr(res.discrimination, truth.discrimination) >= 0.7
    assert abs(res.theta.mean()) < 1e-9  # centred abilities
    assert res.fit["rmse"] < res.fit["rmse_baseline"]
    assert np.isfinite(res.theta_se).all() and (res.theta_se > 0).all()
    # SEs of abilities are calibrated to within a factor ~1.5 of the actual error spread
    z = (res.theta - truth.theta * np.std(res.theta) / np.std(truth.theta)) / res.theta_se
    assert 0.5 < np.std(z) < 1.6


def test_fit_statistics_are_consistent(flat_fit: tuple[IRTResult, Truth]) -> None:
    res, _ = flat_fit
    fit = res.fit
    assert fit["aic"] == pytest.approx(2 * fit["n_params"] - 2 * fit["log_likelihood"])
    assert fit["bic"] > fit["aic"]
    mean = fit["mean_accuracy"]
    assert fit["rmse_baseline"] == pytest.approx(np.sqrt(mean * (1 - mean)))
    assert fit["max_step_in_se"] <= 0.05
    assert str(res.identifiability["location"]).startswith("abilities centred")


@pytest.mark.parametrize("seed", [21, 22])
def test_hierarchical_recovery_within_two_se(seed: int) -> None:
    data, truth = simulate_hierarchical({"llm": 4, "retriever": 7, "icl": 3}, 1000, seed=seed)
    res = fit_responses(data, FitConfig(factors=("llm", "retriever", "icl")))
    assert res.converged
    # compare on the identified scale: the prior anchors log discriminations at mean 0
    scale = float(np.exp(np.log(truth.discrimination).mean()))
    hits, n = 0, 0
    for name, levels in res.effects.items():
        assert list(levels) == sorted(levels)  # sorted level order, never hash order
        est = np.array([v[0] for v in levels.values()])
        assert abs(est.sum()) < 1e-9  # sum-to-zero
        for j, (e, se) in enumerate(levels.values()):
            n += 1
            hits += abs(e - truth.effects[name][j] * scale) <= 2 * se
    assert hits / n >= 0.9, (hits, n)
    # the additive prediction per pipeline has its own SE
    assert _corr(res.theta, truth.theta) > 0.99
    assert (res.theta_se > 0).all()


def test_hierarchical_with_missing_combinations_and_answers() -> None:
    data, truth = simulate_hierarchical({"llm": 3, "retriever": 4}, 300, seed=5, drop_combinations=0.3)
    df = to_frame(data)
    df.loc[df.sample(frac=0.05, random_state=0).index, "correct"] = np.nan
    res = fit_irt(df, factors=["llm", "retriever"])
    assert res.counts["n_missing_correct"] == int(0.05 * len(df) + 0.5)
    assert res.fit["n_observed"] == len(df) - res.counts["n_missing_correct"]
    assert res.converged
    assert _corr(res.theta, truth.theta) > 0.95


def test_aliased_factors_are_rejected() -> None:
    df = pd.DataFrame(
        {
            "pipeline": ["a", "a", "b", "b"],
            "question_id": ["q1", "q2"] * 2,
            "correct": [1, 0, 0, 1],
            "llm": ["x", "x", "y", "y"],
            "retriever": ["r1", "r1", "r2", "r2"],
        }
    )
    with pytest.raises(DataError, match="not separately identifiable"):
        fit_irt(df, factors=["llm", "retriever"])


def test_ml_mode_normalises_scale_and_1pl_2pl_run() -> None:
    data, truth = simulate_flat(50, 150, seed=3)
    ml = fit_responses(data, FitConfig(model="2pl", priors=Priors.named("none")))
    gm = np.exp(np.log(ml.discrimination).mean())
    assert "geometric mean 1" in str(ml.identifiability["scale"])
    # exactly 1, or as close as the bounds allow (abilities of extreme pipelines at their bound), and said so
    if ml.identifiability["anchoring"] == "exact":
        assert gm == pytest.approx(1.0, abs=1e-9)
    else:
        assert "bounds bind" in str(ml.identifiability["anchoring"]) and 0.8 < gm < 1
    one = fit_responses(data, FitConfig(model="1pl"))
    assert np.all(one.discrimination == 1.0) and np.all(one.guessing == 0.0)
    assert np.isnan(one.item_se[:, 0]).all() and np.isfinite(one.item_se[:, 1]).all()
    assert _corr(one.theta, truth.theta) > 0.9
    # the richer model fits at least as well in log-likelihood
    assert ml.fit["log_likelihood"] >= one.fit["log_likelihood"] - 1e-6


def test_warm_start_aligns_by_id_and_converges_faster() -> None:
    data, _ = simulate_flat(80, 400, seed=4)
    cold = fit_responses(data, FitConfig())
    rev = list(range(len(data.items)))[::-1]
    sub = data.subset_items(rev[:-40])  # reversed order, 40 items fewer
    warm = fit_responses(sub, FitConfig(), init=cold)
    again = fit_responses(sub, FitConfig())
    assert warm.fit["warm_start"] and warm.converged
    assert warm.fit["evaluations"] < again.fit["evaluations"]
    pos = {q: i for i, q in enumerate(again.items)}
    idx = [pos[q] for q in warm.items]
    np.testing.assert_allclose(warm.discrimination, again.discrimination[idx], atol=0.05)


def test_item_and_pipeline_flags() -> None:
    data, _ = simulate_flat(40, 60, seed=8)
    data.R[0, :] = 1  # everybody right
    data.R[1, :] = 0  # nobody right
    data.R[2, :] = (np.argsort(np.argsort((data.R == 1).sum(0))) < 20).astype(np.int8)  # weakest answer it
    data.R[:, 0] = -1  # a pipeline without answers
    res = fit_responses(data, FitConfig())
    flags = res.items_frame().set_index("question_id")["flags"]
    assert "all_correct" in flags[data.items[0]]
    assert "none_correct" in flags[data.items[1]]
    assert "negative_discrimination" in flags[data.items[2]]
    pflags = res.pipelines_frame().set_index("pipeline")["flags"]
    assert "no_responses" in pflags[data.pipelines[0]]


def test_bootstrap_se_and_json_output(tmp_path: Path) -> None:
    data, _ = simulate_hierarchical({"llm": 2, "icl": 3}, 120, seed=9)
    df = to_frame(data)
    cfg = FitConfig(factors=("llm", "icl"), se="bootstrap", n_boot=8)
    out = tmp_path / "irt.json"
    res = fit_irt(df, config=cfg, out=out)
    assert res.se_method.startswith("bootstrap over items (B=8")
    doc = json.loads(out.read_text())
    assert doc["kind"] == "irt" and doc["version"] == 2
    for key in ("abilities", "items", "effects", "fit", "information", "identifiability", "counts"):
        assert key in doc
    assert set(doc["effects"]) == {"llm", "icl"}
    assert all(v["se"] > 0 for v in doc["effects"]["icl"].values())
    some = next(iter(doc["abilities"].values()))
    assert {"theta", "se", "accuracy", "llm", "icl"} <= set(some)
    item = next(iter(doc["items"].values()))
    assert {"discrimination", "difficulty", "guessing", "se_difficulty", "flags"} <= set(item)
    assert len(doc["information"]["theta_grid"]) == len(doc["information"]["test"])
    # the CSV tables hold the JSON's numbers: one row per item, per factor level, per theta of the test curve
    items = pd.read_csv(tmp_path / "irt_items.csv").set_index("question_id")
    assert sorted(items.index) == sorted(doc["items"]) == sorted(data.items)
    for col in ("discrimination", "difficulty", "guessing"):
        want = [doc["items"][q][col] for q in items.index]
        np.testing.assert_allclose(items[col].to_numpy(), want, atol=1e-6)  # 6 decimals
    effects = pd.read_csv(tmp_path / "irt_effects.csv")
    got: dict[tuple[object, object], tuple[object, object]] = {
        (r.factor, r.level): (r.estimate, r.se) for r in effects.itertuples()
    }
    assert got == {
        (f, lvl): (pytest.approx(v["estimate"], abs=1e-6), pytest.approx(v["se"], abs=1e-6))
        for f, levels in doc["effects"].items()
        for lvl, v in levels.items()
    }
    info = pd.read_csv(tmp_path / "irt_information.csv")
    test_curve = info[info["grouping"] == "all"]
    np.testing.assert_allclose(test_curve["theta"], doc["information"]["theta_grid"], atol=1e-9)
    np.testing.assert_allclose(test_curve["sum"], doc["information"]["test"], atol=1e-6)


def test_build_responses_validation() -> None:
    base = {"pipeline": ["a", "b"], "question_id": ["q", "q"]}
    with pytest.raises(DataError, match="0/1"):
        build_responses(pd.DataFrame({**base, "correct": [1, 2]}))
    with pytest.raises(DataError, match="missing column"):
        build_responses(pd.DataFrame(base))
    with pytest.raises(DataError, match="duplicate"):
        build_responses(pd.DataFrame({"pipeline": ["a", "a"], "question_id": ["q", "q"], "correct": [1, 0]}))
    ok = build_responses(pd.DataFrame({**base, "correct": ["true", None]}))
    assert ok.counts["n_missing_correct"] == 1 and ok.R.tolist() == [[1, -1]]
    levels = (
        build_responses(
            pd.DataFrame({"pipeline": list("abc"), "question_id": "q", "correct": 1, "k": [10, 2, 5]}), ["k"]
        )
        .factors[0]
        .levels
    )
    assert levels == ["2", "5", "10"]  # numeric order


def _raw_and_finished(data: Responses, cfg: FitConfig) -> tuple[float, IRTResult]:
    """The optimiser's own point and the finished (anchored) result."""
    from ragrade.irt.fit import _repolish, cold_start, optimise
    from ragrade.irt.hierarchical import Design
    from ragrade.irt.model import loglik
    from ragrade.irt.problem import Problem
    from ragrade.irt.result import finish_result

    factors = [f for f in data.factors if f.name in cfg.factors]
    prob = Problem(data, cfg, Design(factors) if factors else None)
    x, rep = optimise(prob, prob.pack(*cold_start(data, prob)))
    x, rep = _repolish(prob, x, rep)
    theta, d, b, g, z = prob.unpack(x)
    ll_raw = loglik(data.R, theta, d, b, g)
    return ll_raw, finish_result(prob, data, cfg, theta, d, b, g, z, rep, compute_se=False)


def test_prior_none_with_binding_bounds_never_lowers_the_likelihood(monkeypatch: pytest.MonkeyPatch) -> None:
    # the case: hierarchical 63 x 1,000, bounds that bind, joint maximum likelihood
    from ragrade.irt import fit as fit_mod
    from ragrade.irt import problem
    from ragrade.irt.model import Bounds

    data, _ = simulate_hierarchical({"llm": 3, "retriever": 7, "icl": 3}, 1000, seed=1)
    bounds = Bounds.parse("theta=-3:3,d=0.1:1.5,b=-3:3,g=0:0.4")
    cfg = FitConfig(factors=("llm", "retriever", "icl"), bounds=bounds, priors=Priors.named("none"))
    ll_raw, res = _raw_and_finished(data, cfg)
    assert res.converged
    assert res.fit["log_likelihood"] == pytest.approx(ll_raw, abs=1e-6)  # anchoring moved nothing it may not
    assert "bounds bind" in str(res.identifiability["anchoring"])
    assert res.identifiability["clipped_after_anchoring"] == 0
    for v, (lo, hi) in ((res.discrimination, bounds.discrimination), (res.difficulty, bounds.difficulty)):
        assert v.min() >= lo and v.max() <= hi
    beyond = res.pipelines_frame()["flags"].map(lambda f: "theta_beyond_bound" in f)
    assert beyond.sum() == int(((res.theta < -3 - 1e-6) | (res.theta > 3 + 1e-6)).sum())
    assert "anchor_penalty" in res.fit  # refined with weak penalties
    # the flat-direction penalties do not trade likelihood for themselves: the full-weight ones alone find a
    # clearly worse likelihood, 10x weaker ones the same optimum
    monkeypatch.setattr(fit_mod, "_repolish", lambda prob, x, rep: (x, rep))
    ll_full, _ = _raw_and_finished(data, cfg)
    assert ll_full < res.fit["log_likelihood"] - 5
    monkeypatch.undo()
    monkeypatch.setattr(fit_mod, "WEAK_PENALTY", problem.WEAK_PENALTY / 10)
    ll_weak, _ = _raw_and_finished(data, cfg)
    assert abs(ll_weak - res.fit["log_likelihood"]) < 0.5


def test_prior_none_flat_abilities_stay_within_bounds() -> None:
    from ragrade.irt.model import Bounds

    data, _ = simulate_flat(120, 150, seed=5)
    data.R[:40, :3] = 1  # a few strong pipelines push towards the bound
    bounds = Bounds.parse("theta=-2.5:2.5,b=-3:3,d=0.2:2")
    cfg = FitConfig(model="2pl", bounds=bounds, priors=Priors.named("none"), se="none")
    ll_raw, res = _raw_and_finished(data, cfg)
    assert res.fit["log_likelihood"] == pytest.approx(ll_raw, abs=1e-6)
    assert res.theta.min() >= -2.5 and res.theta.max() <= 2.5
    assert res.difficulty.min() >= -3 and res.difficulty.max() <= 3
    assert res.identifiability["clipped_after_anchoring"] == 0
