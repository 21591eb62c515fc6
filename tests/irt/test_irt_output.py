"""irt.json version 2 with columnar item tables, the fast long-table reader, effects in percentage points,
sandwich SEs and the backend choice."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.irt.irt_helpers import coverage_grid_fit

from ragrade.errors import DataError
from ragrade.io import write_json
from ragrade.irt import output
from ragrade.irt.fit import FitConfig, fit_irt, fit_responses, parametric_se
from ragrade.irt.io import Responses, build_responses, load_item_params, load_responses
from ragrade.irt.problem import NUMBA_MIN_RESPONSES, choose_backend, numba_cache_dir
from ragrade.irt.result import IRTResult
from ragrade.irt.simulate import Truth, simulate_hierarchical, to_frame
from ragrade.report.sections_irt import item_params
from ragrade.report.sources import RunFiles

FACTORS = ("llm", "retriever")


@pytest.fixture(scope="module")
def grid() -> tuple[Responses, Truth]:
    return simulate_hierarchical({"llm": 3, "retriever": 4}, 200, seed=7)


@pytest.fixture(scope="module")
def fitted(grid: tuple[Responses, Truth]) -> IRTResult:
    data, _ = grid
    return fit_responses(data, FitConfig(factors=FACTORS))


def test_items_inline_and_in_parquet_read_alike(
    tmp_path: Path, grid: tuple[Responses, Truth], fitted: IRTResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = tmp_path / "small" / "irt.json"
    small.parent.mkdir()
    fitted.write(small)
    monkeypatch.setattr(output, "ITEMS_INLINE_MAX", 10)  # a "large" exam: items only in the parquet table
    large = tmp_path / "large" / "irt.json"
    large.parent.mkdir()
    paths = fitted.write(large)
    doc = json.loads(large.read_text())
    assert doc["version"] == 2 and "items" not in doc and doc["tables"]["items"] == "irt_items.parquet"
    assert doc["items_summary"]["n_items"] == 200 and "median" in doc["items_summary"]["difficulty"]
    assert not (large.parent / "irt_items.csv").exists() and (large.parent / "irt_items.parquet") in paths
    a, b = load_item_params(small), load_item_params(large)
    assert list(a.index) == list(b.index) == fitted.items
    for col in ("discrimination", "difficulty", "guessing"):
        np.testing.assert_allclose(a[col], getattr(fitted, col), atol=1e-6)  # inline: rounded to 1e-6
        np.testing.assert_allclose(b[col], getattr(fitted, col))
    # a version-1 file (items inline, no parquet) still reads, and the report finds the items either way
    old = json.loads(small.read_text())
    old["version"], old["tables"] = 1, {"items": "irt_items.csv"}
    write_json(tmp_path / "v1.json", old)
    assert load_item_params(tmp_path / "v1.json")["difficulty"].tolist() == a["difficulty"].tolist()
    for folder in ("small", "large"):
        got = item_params(RunFiles(tmp_path), f"{folder}/irt.json")
        assert set(got) == set(fitted.items)
        assert got[fitted.items[0]]["difficulty"] == pytest.approx(fitted.difficulty[0], abs=1e-6)
    write_json(tmp_path / "x.json", {"kind": "exam"})
    with pytest.raises(DataError, match="not an irt"):
        load_item_params(tmp_path / "x.json")


def test_effects_in_percentage_points(grid: tuple[Responses, Truth], fitted: IRTResult) -> None:
    data, _ = grid
    # a full factorial: each level's observed marginal accuracy minus the grand mean (model-free)
    acc = (data.R == 1).mean(axis=0)
    for f in data.factors:
        pps = []
        for j, lvl in enumerate(f.levels):
            rec = fitted.effects_detail[f.name][lvl]
            want = 100 * (acc[f.codes == j].mean() - acc.mean())
            assert rec["accuracy_pp"] == pytest.approx(want, abs=1e-9)
            assert rec["accuracy_pp_source"] == "observed" and rec["accuracy_pp_cells_predicted"] == 0
            assert rec["accuracy_pp_cells"] == len(data.pipelines) // len(f.levels)
            assert rec["accuracy_pp_se"] > 0
            assert rec["accuracy_pp_ci95_low"] == pytest.approx(rec["accuracy_pp"] - 1.96 * rec["accuracy_pp_se"])
            pps.append(rec["accuracy_pp"])
        assert sum(pps) == pytest.approx(0.0, abs=1e-9)
    # the same order as the logits (a sizeable effect and 200 questions)
    for factor, levels in fitted.effects.items():
        logits = [v[0] for v in levels.values()]
        pp = [fitted.effects_detail[factor][v]["accuracy_pp"] for v in levels]
        assert np.argsort(logits).tolist() == np.argsort(pp).tolist()


def test_effects_table_and_json_carry_both_units(tmp_path: Path, grid: tuple[Responses, Truth]) -> None:
    data, _ = grid
    out = tmp_path / "irt.json"
    fit_irt(to_frame(data), config=FitConfig(factors=FACTORS, se="sandwich"), out=out)
    doc = json.loads(out.read_text())
    rec = doc["effects"]["llm"]["llm0"]
    for key in ("estimate", "se", "ci95", "se_observed", "se_sandwich", "accuracy_pp", "accuracy_pp_ci95_low"):
        assert key in rec
    assert rec["se"] == rec["se_sandwich"] and "sandwich" in doc["se_method"]
    assert "percentage points" in doc["effects_units"]["accuracy_pp"]
    table = pd.read_csv(tmp_path / "irt_effects.csv")
    assert {"estimate", "se", "ci95_low", "ci95_high", "accuracy_pp", "accuracy_pp_ci95_high"} <= set(table.columns)
    assert {"read", "fit", "se"} <= set(doc["timings_s"])  # write is timed after irt.json is written


def test_sandwich_se_close_to_observed_when_the_model_holds(fitted: IRTResult) -> None:
    # fast check: a correctly specified model -> the robust and the model-based SEs agree within ~25%
    ratios = [
        rec["se_sandwich"] / rec["se_observed"] for levels in fitted.effects_detail.values() for rec in levels.values()
    ]
    assert np.isfinite(ratios).all()
    assert 0.75 < float(np.median(ratios)) < 1.25


def test_fast_reader_matches_on_categorical_csv_and_parquet(tmp_path: Path, grid: tuple[Responses, Truth]) -> None:
    data, _ = grid
    df = to_frame(data)
    df.loc[df.index[:5], "correct"] = np.nan
    ref = build_responses(df, FACTORS)
    cat = build_responses(df.astype({"pipeline": "category", "question_id": "category", "llm": "category"}), FACTORS)
    df.to_parquet(tmp_path / "r.parquet")
    pq = load_responses(tmp_path / "r.parquet", FACTORS)
    for other in (cat, pq):
        assert other.pipelines == ref.pipelines and other.items == ref.items
        np.testing.assert_array_equal(other.R, ref.R)
        for f, g in zip(ref.factors, other.factors, strict=True):
            assert f.levels == g.levels and (f.codes == g.codes).all()
    dup = pd.concat([df, df.iloc[[3]]])
    with pytest.raises(DataError, match="1 duplicate"):
        build_responses(dup, FACTORS)
    clash = df.copy()
    clash.loc[clash.index[0], "llm"] = "other"
    with pytest.raises(DataError, match="several values of factor 'llm'"):
        build_responses(clash, FACTORS)


def test_backend_choice_and_numba_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_backend("auto", NUMBA_MIN_RESPONSES - 1) == "numpy"  # a small fit never pays for numba
    assert choose_backend("numba", 10) == "numba" and choose_backend("numpy", 10**9) == "numpy"
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "rc"))
    assert numba_cache_dir() == tmp_path / "rc" / "numba"
    monkeypatch.delenv("RAGRADE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert numba_cache_dir() == tmp_path / "xdg" / "ragrade" / "numba"
    assert choose_backend("auto", NUMBA_MIN_RESPONSES) == "numpy"  # cold cache, mid-size: numpy
    (tmp_path / "xdg" / "ragrade" / "numba" / "x").mkdir(parents=True)
    (tmp_path / "xdg" / "ragrade" / "numba" / "x" / "_kernels._nll_grad-25.py312.nbi").write_text("")
    assert choose_backend("auto", NUMBA_MIN_RESPONSES) == "numba"  # warm cache
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "own"))
    assert numba_cache_dir() == tmp_path / "own"


def _coverage(seeds: range) -> tuple[float, float, float]:
    """Coverage of 95% effect intervals over simulated 63-pipeline grids: observed, sandwich, and on the fit's own
    unit (the truth mapped by each grid's fitted scale factor, since the logit unit is itself estimated)."""
    hits = {"observed": 0, "sandwich": 0, "own_unit": 0}
    n = 0
    for seed in seeds:
        _, truth, res = coverage_grid_fit(seed)
        scale = float(np.exp(np.log(truth.discrimination).mean()))
        est, true, se_o, se_s = [], [], [], []
        for name, levels in res.effects.items():
            for j, (lvl, (e, _)) in enumerate(levels.items()):
                est.append(e)
                true.append(truth.effects[name][j] * scale)
                se_o.append(res.effects_detail[name][lvl]["se_observed"])
                se_s.append(res.effects_detail[name][lvl]["se_sandwich"])
        E, T, SO, SS = map(np.asarray, (est, true, se_o, se_s))
        c = float(E @ T / (T @ T))
        hits["observed"] += int((np.abs(E - T) <= 1.96 * SO).sum())
        hits["sandwich"] += int((np.abs(E - T) <= 1.96 * SS).sum())
        hits["own_unit"] += int((np.abs(E - c * T) <= 1.96 * SS).sum())
        n += len(E)
    return hits["observed"] / n, hits["sandwich"] / n, hits["own_unit"] / n


@pytest.mark.slow
def test_effect_interval_coverage_over_60_grids() -> None:
    obs, sandwich, own = _coverage(range(200, 260))
    # measured: observed 0.923, sandwich 0.918 on the prior-set unit; 0.95+ on each fit's own unit: the shortfall
    # is the uncertainty of the logit unit itself (its scale factor varies ~2% between grids), not of the effects
    assert own >= 0.94, (obs, sandwich, own)
    assert sandwich >= 0.90 and obs >= 0.90


def test_effect_interval_coverage_fast_check() -> None:
    obs, sandwich, own = _coverage(range(300, 303))
    assert own >= 0.85 and sandwich >= 0.8 and obs >= 0.8, (obs, sandwich, own)


def test_fused_flat_standard_errors_match_numpy() -> None:
    pytest.importorskip("numba")
    from ragrade.irt.problem import Problem
    from ragrade.irt.simulate import simulate_flat
    from ragrade.irt.stderr import standard_errors

    data, truth = simulate_flat(40, 60, seed=9, missing=0.1)
    out = {}
    for backend in ("numpy", "numba"):
        cfg = FitConfig(backend=backend)
        prob = Problem(data, cfg, None)
        assert prob.backend == backend
        out[backend] = standard_errors(
            prob, data, cfg, truth.theta, truth.discrimination, truth.difficulty, truth.guessing
        )
    np.testing.assert_allclose(out["numba"].theta_se, out["numpy"].theta_se, rtol=1e-6)
    np.testing.assert_allclose(out["numba"].item_se, out["numpy"].item_se, rtol=1e-5)


def test_parametric_bootstrap_se_runs_is_seeded_and_sensible(
    tmp_path: Path, grid: tuple[Responses, Truth], fitted: IRTResult
) -> None:
    data, _ = grid
    cfg = FitConfig(factors=FACTORS, se="parametric", n_boot=8, seed=3)
    out = tmp_path / "irt.json"
    a = fit_irt(data, config=cfg, out=out)
    b = fit_irt(data, config=cfg)
    assert a.se_method.startswith("parametric bootstrap (B=8")
    assert a.effects == b.effects and np.array_equal(a.theta_se, b.theta_se)  # same seed, same replicates
    c = fit_irt(data, config=FitConfig(factors=FACTORS, se="parametric", n_boot=8, seed=4))
    assert a.effects != c.effects
    for f, levels in a.effects.items():
        for lvl, (est, se) in levels.items():
            rec = a.effects_detail[f][lvl]
            assert est == fitted.effects[f][lvl][0] and se == rec["se_parametric"]
            assert 0.3 < se / rec["se_observed"] < 3.0  # the same order as the observed SE (only 8 replicates)
            lo, hi = rec["accuracy_pp_ci95_low"], rec["accuracy_pp_ci95_high"]
            assert lo < rec["accuracy_pp"] < hi
    pp_obs = fitted.effects_detail["llm"]["llm0"]
    pp_par = a.effects_detail["llm"]["llm0"]
    # a full factorial: the points are observed, their SE binomial given the questions, whatever the logit SEs
    assert pp_par["accuracy_pp_ci95_high"] == pytest.approx(pp_obs["accuracy_pp_ci95_high"])
    assert 0.3 < float(np.median(a.theta_se / fitted.theta_se)) < 3.0
    doc = json.loads(out.read_text())
    assert doc["se_method"].startswith("parametric bootstrap") and doc["effects"]["llm"]["llm0"]["se_parametric"] > 0


def _parametric_coverage(seeds: range, n_boot: int) -> tuple[float, float, float]:
    """Coverage of 95% effect intervals over simulated 63-pipeline grids: parametric bootstrap and observed SEs
    against the truth in the same unit as ``_coverage`` above (true effects times the geometric mean of the true
    discriminations, the unit the anchoring aims at; no per-grid rescaling, so the bootstrap has to cover the
    variation of the unit itself), and the parametric SEs on each fit's own unit (truth times its fitted scale)."""
    hits = np.zeros(3)
    n = 0
    factors = ("llm", "retriever", "icl")
    for seed in seeds:
        data, truth, fit = coverage_grid_fit(seed)
        cfg = FitConfig(factors=factors, se="parametric", n_boot=n_boot, seed=seed)
        res = parametric_se(data, cfg, copy.deepcopy(fit))  # it sets the SEs in place: not on the shared fit
        scale = float(np.exp(np.log(truth.discrimination).mean()))
        rows = [
            (est, truth.effects[name][j] * scale, se, res.effects_detail[name][lvl]["se_observed"])
            for name, levels in res.effects.items()
            for j, (lvl, (est, se)) in enumerate(levels.items())
        ]
        E, T, SP, SO = map(np.asarray, zip(*rows, strict=True))
        c = float(E @ T / (T @ T))
        hits += [
            (np.abs(E - T) <= 1.96 * SP).sum(),
            (np.abs(E - T) <= 1.96 * SO).sum(),
            (np.abs(E - c * T) <= 1.96 * SP).sum(),
        ]
        n += len(E)
    par, obs, own = hits / n
    return float(par), float(obs), float(own)


@pytest.mark.slow
def test_parametric_effect_interval_coverage_over_20_grids() -> None:
    par, obs, own = _parametric_coverage(range(200, 220), n_boot=30)
    # measured (B=30, these 20 grids, 260 effects): parametric 0.896, observed 0.946, parametric on each fit's own
    # unit 0.958; over seeds 200-249 (650 effects): 0.877, 0.918, 0.958. 20 grids, not 50: each grid is 30 refits,
    # ~4 s on 2 cores, and the 50 took a fifth of the suite's time budget.
    # Over the 50, neither reaches 94% on the nominal unit: the fitted unit is off it by a factor c with mean 0.983
    # and SD 0.020 between grids, which is estimation bias (item curves too steep with 63 pipelines per question,
    # partly offset by the priors' own unit), not noise, so no SE sees it; refits of data simulated from one fit do
    # not reproduce it. --se jackknife removes that bias (tests/irt/test_irt_jackknife.py: 0.953 over seeds
    # 200-259). Floors below the measured values.
    assert par >= 0.86 and own >= 0.94, (par, obs, own)
