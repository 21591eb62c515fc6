"""Delete-a-group jackknife over pipelines (``--se jackknife``): groups, arithmetic, unit, coverage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from tests.irt.irt_helpers import coverage_grid_fit

from ragrade.errors import ConfigError, DataError
from ragrade.irt.fit import FitConfig, fit_irt, fit_responses
from ragrade.irt.hierarchical import Design
from ragrade.irt.io import Responses
from ragrade.irt.jackknife import draw_groups
from ragrade.irt.result import IRTResult
from ragrade.irt.simulate import Truth, simulate_hierarchical

FACTORS = ("llm", "retriever")


@pytest.fixture(scope="module")
def grid() -> tuple[Responses, Truth]:
    return simulate_hierarchical({"llm": 3, "retriever": 4}, 300, seed=11)


def _z(res: IRTResult, design: Design) -> npt.NDArray[np.float64]:
    s = float(np.exp(np.log(res.discrimination).mean()))
    effs = [np.array([res.effects[f.name][lvl][0] for lvl in f.levels]) for f in design.factors]
    return design.z_from_effects(effs) * s


def test_jackknife_equals_its_definition_computed_by_hand(grid: tuple[Responses, Truth]) -> None:
    data, _ = grid
    cfg = FitConfig(factors=FACTORS, se="jackknife", jackknife_groups=3, seed=5)
    res = fit_irt(data, config=cfg)
    design = Design([f for f in data.factors if f.name in FACTORS])
    # the same steps written out: full MAP fit, three refits without one group each, all on gm(d) = 1
    full = fit_responses(data, cfg)
    groups = draw_groups(data, FACTORS, 3, 5)
    reps = []
    for k in range(3):
        refit = fit_responses(data.subset_pipelines(groups != k), FitConfig(factors=FACTORS, se="none"), init=full)
        reps.append(_z(refit, design))
    Z = np.array(reps)
    z_jk = 3 * _z(full, design) - 2 * Z.mean(axis=0)
    cov = 2 / 3 * (Z - Z.mean(axis=0)).T @ (Z - Z.mean(axis=0))
    se_jk = np.concatenate([np.sqrt(np.diag(c)) for c in design.effect_cov(cov)])
    got = np.array([e for lv in res.effects.values() for e, _ in lv.values()])
    np.testing.assert_allclose(got, np.concatenate(design.effects(z_jk)), atol=1e-6)
    rec = [r for lv in res.effects_detail.values() for r in lv.values()]
    np.testing.assert_allclose([r["se_jackknife"] for r in rec], se_jk, rtol=1e-5, atol=1e-8)
    ses = np.array([se for lv in res.effects.values() for _, se in lv.values()])
    np.testing.assert_allclose(ses, np.maximum(se_jk, [r["se_observed"] for r in rec]), rtol=1e-6)
    np.testing.assert_allclose(res.theta, design.X @ z_jk, atol=1e-6)  # abilities follow the corrected effects
    assert abs(float(np.log(res.discrimination).mean())) < 1e-9  # reported on gm(d) = 1
    s = float(np.exp(np.log(full.discrimination).mean()))
    np.testing.assert_allclose(res.difficulty, full.difficulty * s)  # items: the MAP's, on the same unit
    assert res.se_method.startswith("jackknife over pipelines (G=3 groups")
    assert "geometric mean 1" in str(res.identifiability["scale"])


def test_groups_keep_every_level_and_are_seeded(grid: tuple[Responses, Truth]) -> None:
    data, _ = grid
    a = draw_groups(data, FACTORS, 20, 1)
    assert a.max() + 1 == len(data.pipelines) == 12  # at most one group per pipeline
    b = draw_groups(data, FACTORS, 4, 1)
    assert np.array_equal(b, draw_groups(data, FACTORS, 4, 1)) and set(b.tolist()) == {0, 1, 2, 3}
    for k in range(4):
        sub = data.subset_pipelines(b != k)
        for f in sub.factors:
            assert set(f.codes.tolist()) == set(range(len(f.levels)))


def test_a_level_with_one_pipeline_cannot_be_jackknifed(grid: tuple[Responses, Truth]) -> None:
    data, _ = grid
    # keep only one pipeline of llm0: leaving its group out would lose the level
    llm = next(f for f in data.factors if f.name == "llm")
    keep = (llm.codes != 0) | (np.cumsum(llm.codes == 0) == 1)
    small = data.subset_pipelines(keep)
    with pytest.raises(DataError, match=r"level\(s\) llm0 of factor 'llm' have a single pipeline"):
        fit_irt(small, config=FitConfig(factors=FACTORS, se="jackknife", jackknife_groups=4))


def test_jackknife_needs_factors_and_two_groups() -> None:
    with pytest.raises(ConfigError, match="needs factors"):
        FitConfig(se="jackknife")
    with pytest.raises(ConfigError, match="jackknife_groups"):
        FitConfig(factors=FACTORS, se="jackknife", jackknife_groups=1)


def test_cli_jackknife_writes_the_unit_and_method(
    tmp_path: Path, grid: tuple[Responses, Truth], capsys: pytest.CaptureFixture[str]
) -> None:
    from ragrade.cli.main import main
    from ragrade.irt.simulate import to_frame

    data, _ = grid
    src = tmp_path / "responses.parquet"
    to_frame(data).to_parquet(src)
    out = tmp_path / "fit" / "irt.json"
    argv = ["irt", "fit", str(src), "--factors", "llm,retriever", "--se", "jackknife", "--groups", "6"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "effect SEs: jackknife over pipelines (G=6 groups" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["identifiability"]["scale"].startswith("discriminations with geometric mean 1")
    assert all("se_jackknife" in rec for lv in doc["effects"].values() for rec in lv.values())
    assert main(["irt", "fit", str(src), "--se", "jackknife", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "needs --factors" in err and "Traceback" not in err and not (tmp_path / "x.json").exists()


def _coverage(seeds: range) -> tuple[float, float, float, float]:
    """95% coverage and mean estimate/truth ratio, jackknife vs MAP with observed SEs, truth on gm(d) = 1.

    The truth is put on the unit the jackknife reports (true effects times the geometric mean of the true
    discriminations); the MAP estimates are put on it the same way (times the geometric mean of theirs)."""
    hits, n = np.zeros(2), 0
    ratio: list[list[float]] = [[], []]
    factors = ("llm", "retriever", "icl")
    for seed in seeds:
        data, truth, mp = coverage_grid_fit(seed)  # the MAP fit, shared with the other coverage tests
        jk = fit_irt(data, config=FitConfig(factors=factors, se="jackknife", seed=seed))
        s_true = float(np.exp(np.log(truth.discrimination).mean()))
        s_map = float(np.exp(np.log(mp.discrimination).mean()))
        T = np.concatenate([truth.effects[f] * s_true for f in factors])
        for i, (res, s) in enumerate(((jk, 1.0), (mp, s_map))):
            E = np.array([e * s for lv in res.effects.values() for e, _ in lv.values()])
            S = np.array([se * s for lv in res.effects.values() for _, se in lv.values()])
            hits[i] += int((np.abs(E - T) <= 1.96 * S).sum())
            ratio[i].append(float(E @ T / (T @ T)))
        n += len(T)
    return hits[0] / n, hits[1] / n, float(np.mean(ratio[0])), float(np.mean(ratio[1]))


def test_jackknife_coverage_fast_check() -> None:
    cov_jk, _, r_jk, r_map = _coverage(range(300, 303))
    assert cov_jk >= 0.85 and abs(r_jk - 1) < abs(r_map - 1), (cov_jk, r_jk, r_map)


@pytest.mark.slow
def test_jackknife_effect_interval_coverage_over_30_grids() -> None:
    cov_jk, cov_map, r_jk, r_map = _coverage(range(200, 230))
    # measured on these 30 grids (390 effects): jackknife 0.962, ratio 1.010; MAP on the same unit 0.805, ratio 1.047
    # (over seeds 200-259, 780 effects: 0.953, 1.010; MAP 0.787, 1.048). 30 grids, not 60: each jackknife refits
    # the grid, ~2 s a grid on 2 cores, and the 60 took a sixth of the suite's time budget
    assert cov_jk >= 0.94, (cov_jk, cov_map, r_jk, r_map)
    assert abs(r_jk - 1.0) < 0.025 and r_map > 1.03, (r_jk, r_map)


def test_report_names_the_logit_unit() -> None:
    from ragrade.report.sections_irt import _logit_unit

    jk = {"identifiability": {"scale": "discriminations with geometric mean 1 (...)"}, "se_method": "jackknife over"}
    assert _logit_unit(jk).endswith("bias-corrected by a jackknife over pipelines")
    assert _logit_unit({"identifiability": {"scale": "set by the priors on abilities/effects"}}).endswith("priors")
    assert "geometric mean 1" in _logit_unit({"identifiability": {"scale": "discriminations normalised to ..."}})
