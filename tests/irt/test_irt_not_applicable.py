"""Factors that do not apply to some pipelines (the chunker of closed book and oracle): coding, design,
gradients, both solvers, recovery, equivalence with the subset fit, identifiability errors, files and CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tests.irt.irt_helpers import finite_diff as _fd
from tests.support.typed import dig

from ragrade.cli.main import main
from ragrade.errors import DataError
from ragrade.irt.fit import FitConfig, Problem, fit_irt, fit_responses
from ragrade.irt.hierarchical import Design, factor_block, helmert
from ragrade.irt.io import build_responses
from ragrade.irt.model import Priors
from ragrade.irt.simulate import simulate_not_applicable, to_frame

FACTORS = ("retriever", "chunker", "icl")


def _table(chunkers: dict[str, object]) -> pd.DataFrame:
    """Two questions per pipeline; ``chunkers`` maps pipeline -> its chunker cell."""
    rows = []
    for p, ch in chunkers.items():
        for q in ("q1", "q2"):
            rows.append({"pipeline": p, "question_id": q, "correct": int(q == "q1"), "chunker": ch})
    return pd.DataFrame(rows)


def test_not_applicable_values_are_coded_minus_one() -> None:
    df = _table({"a": "rec", "b": "sent", "c": "none", "d": None, "e": " None ", "f": "", "g": np.nan})
    (f,) = build_responses(df, ["chunker"]).factors
    assert f.levels == ["rec", "sent"]
    assert f.codes.tolist() == [0, 1, -1, -1, -1, -1, -1]
    assert f.n_not_applicable == 5 and f.not_applicable_seen == ["", "None", "none"]
    assert f.labels()[:3] == ["rec", "sent", "none|None"]
    # custom values, per factor or for every factor ('*'); case-insensitive
    df2 = _table({"a": "rec", "b": "N/A", "c": "none"})
    (g,) = build_responses(df2, ["chunker"], not_applicable={"*": ("n/a",)}).factors
    assert g.levels == ["none", "rec"] and g.codes.tolist() == [1, -1, 0]
    (h,) = build_responses(df2, ["chunker"], not_applicable={"chunker": ("n/a", "none"), "*": ()}).factors
    assert h.levels == ["rec"] and h.codes.tolist() == [0, -1, -1]


def test_strict_factor_and_clashes_are_errors() -> None:
    with pytest.raises(DataError, match="factor column 'chunker' is empty in 2 rows"):
        build_responses(_table({"a": "rec", "b": None}), ["chunker"], not_applicable={"chunker": ()})
    # with no not-applicable values 'none' is an ordinary level
    (f,) = build_responses(_table({"a": "rec", "b": "none"}), ["chunker"], not_applicable={"chunker": ()}).factors
    assert f.levels == ["none", "rec"] and f.n_not_applicable == 0
    # a pipeline with a real level in one row and 'none' in another is inconsistent
    df = _table({"a": "rec", "b": "none"})
    df.loc[1, "chunker"] = "sent"
    with pytest.raises(DataError, match="pipeline 'a' has several values of factor 'chunker'"):
        build_responses(df, ["chunker"])
    # 'none' and an empty cell are the same "not applicable" (no clash)
    df = _table({"a": "rec", "b": "none", "c": "sent"})
    df.loc[3, "chunker"] = None
    assert build_responses(df, ["chunker"]).factors[0].codes.tolist() == [0, -1, 1]


def test_design_rows_are_zero_where_a_factor_does_not_apply() -> None:
    C = helmert(3)
    codes = np.array([2, -1, 0, 1, -1])
    block = factor_block(C, codes)
    np.testing.assert_array_equal(block[[1, 4]], 0.0)
    np.testing.assert_allclose(block[[0, 2, 3]], C[[2, 0, 1]])
    data, _ = simulate_not_applicable(20, seed=1)
    design = Design(data.factors)
    ch = data.factors[1]
    sl = design.slices[1]
    assert np.all(design.X[~ch.applies, sl] == 0.0) and np.all(np.abs(design.X[ch.applies, sl]).sum(1) > 0)
    z = np.random.default_rng(0).normal(size=design.k)
    for e in design.effects(z):
        assert abs(e.sum()) < 1e-12  # sum to zero over the real levels
    # theta of a pipeline without a chunker = its retriever + icl effects only
    theta = design.X @ z
    eff = design.effects(z)
    m = int(np.flatnonzero(~ch.applies)[0])
    expect = eff[0][data.factors[0].codes[m]] + eff[2][data.factors[2].codes[m]]
    assert theta[m] == pytest.approx(expect, abs=1e-12)
    assert dig(design.describe(), "chunker", "constraint") == "sum-to-zero over the applicable levels"


def test_factor_that_never_applies_is_an_error() -> None:
    df = _table({"a": "none", "b": ""})
    df["icl"] = df["pipeline"].map({"a": 0, "b": 1})
    with pytest.raises(DataError, match="'chunker' does not apply to any pipeline"):
        fit_irt(df, factors=["icl", "chunker"])


@pytest.mark.parametrize("model,prior", [("3pl", "weak"), ("2pl", "none"), ("1pl", "weak")])
def test_objective_gradient_with_not_applicable_rows(model: str, prior: str) -> None:
    data, _ = simulate_not_applicable(9, indexed=2, index_free=2, chunkers=3, icl=2, seed=4)
    assert data.factors[1].n_not_applicable == 4
    cfg = FitConfig(model=model, factors=FACTORS, priors=Priors.named(prior), backend="numpy")
    prob = Problem(data, cfg, Design(data.factors))
    rng = np.random.default_rng(1)
    lo, hi = np.array(prob.box()).T
    x = lo + (hi - lo) * rng.uniform(0.3, 0.7, lo.size)
    _, grad = prob.objective(x)
    np.testing.assert_allclose(grad, _fd(lambda v: prob.objective(v)[0], x), rtol=1e-5, atol=1e-9)


def test_newton_and_lbfgs_agree_with_not_applicable_rows() -> None:
    data, _ = simulate_not_applicable(400, seed=12)
    fits = {
        s: fit_responses(data, FitConfig(factors=FACTORS, solver=s, gtol=0.005, se="none"), compute_se=False)
        for s in ("newton", "lbfgs")
    }
    new, old = fits["newton"], fits["lbfgs"]
    assert new.converged and old.converged
    assert new.fit["objective_per_response"] <= old.fit["objective_per_response"] + 1e-9
    for f in FACTORS:
        a = np.array([v[0] for v in new.effects[f].values()])
        b = np.array([v[0] for v in old.effects[f].values()])
        np.testing.assert_allclose(a, b, atol=0.01)
    np.testing.assert_allclose(new.theta, old.theta, atol=0.01)


def test_chunker_effect_on_indexed_pipelines_is_recovered_within_two_se() -> None:
    """A chunker effect that exists only where there is an index; every level's effect within 2 SE.

    The scale of the ability axis is set by the priors and only loosely by ~30 pipelines, so the truth is
    compared on the fit's scale (the least-squares slope of estimated on true abilities).
    """
    hits = {"all": [0, 0], "chunker": [0, 0]}
    for seed in range(6):
        data, truth = simulate_not_applicable(1000, seed=seed)
        res = fit_responses(data, FitConfig(factors=FACTORS))
        assert res.converged
        assert set(res.effects["chunker"]) == {"c1", "c2", "c3"}
        scale = float(res.theta @ truth.theta / (truth.theta @ truth.theta))
        assert 0.8 < scale < 1.25
        for name, levels in res.effects.items():
            est = np.array([v[0] for v in levels.values()])
            se = np.array([v[1] for v in levels.values()])
            assert abs(est.sum()) < 1e-9 and (se > 0).all()
            ok = np.abs(est - truth.effects[name] * scale) <= 2 * se
            for key in ("all", name) if name == "chunker" else ("all",):
                hits[key][0] += int(ok.sum())
                hits[key][1] += len(ok)
        # the closed-book/oracle pipelines' abilities are their retriever + icl effects
        free = ~data.factors[1].applies
        assert np.corrcoef(res.theta[free], truth.theta[free])[0, 1] > 0.95
    assert hits["all"][0] / hits["all"][1] >= 0.9, hits
    assert hits["chunker"][0] / hits["chunker"][1] >= 0.9, hits


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_equivalent_to_the_by_chunker_subset_fit(solver: str) -> None:
    """Without the closed/oracle pipelines' responses, the one fit with not-applicable rows gives the chunker
    effects (and SEs) of the old by_chunker fit on the indexed pipelines only; with their responses (which
    inform the shared item parameters and the icl effect) it stays within a standard error of it."""
    data, _ = simulate_not_applicable(600, seed=1)
    df = to_frame(data)
    cfg = FitConfig(factors=FACTORS, solver=solver)
    indexed = df[df["chunker"] != "none"].reset_index(drop=True)
    subset = fit_irt(indexed, config=cfg)
    masked_df = df.copy()
    masked_df.loc[masked_df["chunker"] == "none", "correct"] = np.nan
    masked = fit_irt(masked_df, config=cfg)
    full = fit_irt(df, config=cfg)
    assert subset.converged and masked.converged and full.converged
    assert masked.not_applicable["chunker"]["n_pipelines"] == 6
    for lvl, (e_sub, se_sub) in subset.effects["chunker"].items():
        e_m, se_m = masked.effects["chunker"][lvl]
        e_f, _ = full.effects["chunker"][lvl]
        assert abs(e_m - e_sub) <= 0.15 * se_sub and abs(e_m - e_sub) < 0.01, (lvl, e_m, e_sub)
        assert se_m == pytest.approx(se_sub, rel=0.03)
        assert abs(e_f - e_sub) <= 1.0 * se_sub, (lvl, e_f, e_sub)
    # the indexed pipelines' abilities agree up to a common shift (the location sits in the difficulties)
    pos = {p: i for i, p in enumerate(masked.pipelines)}
    idx = [pos[p] for p in subset.pipelines]
    diff = masked.theta[idx] - subset.theta
    assert np.ptp(diff) < 0.02
    for f in ("icl",):
        for lvl, (e_sub, se_sub) in subset.effects[f].items():
            assert abs(masked.effects[f][lvl][0] - e_sub) <= 0.15 * se_sub


def _confounded_frame() -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    pipes = [("bm25", "rec"), ("dense", "sent"), ("closed", "none"), ("oracle", "none")]
    for ret, ch in pipes:
        for icl in (0, 1):
            for q in range(30):
                rows.append(
                    {
                        "pipeline": f"{ret}|{ch}|{icl}",
                        "question_id": f"q{q}",
                        "correct": int(rng.random() < 0.6),
                        "retriever": ret,
                        "chunker": ch,
                        "icl": icl,
                    }
                )
    return pd.DataFrame(rows)


def test_factor_confounded_where_it_applies_is_rejected() -> None:
    """bm25 always with 'rec', dense always with 'sent': the chunker cannot be told from the retriever."""
    df = _confounded_frame()
    with pytest.raises(DataError, match="not separately identifiable") as err:
        fit_irt(df, factors=list(FACTORS))
    msg = str(err.value)
    assert "e.g. retriever and chunker" in msg and "not applicable: chunker: 4 pipelines" in msg
    # strict: 'none' is a level, collinear with closed/oracle over the full grid (the behaviour before)
    full = df.copy()
    full = pd.concat([full, full.assign(chunker=full["chunker"].map({"rec": "sent", "sent": "rec", "none": "none"}))])
    full["pipeline"] = full["retriever"] + "|" + full["chunker"] + "|" + full["icl"].astype(str)
    full = full.drop_duplicates(["pipeline", "question_id"])
    with pytest.raises(DataError, match="not separately identifiable"):
        fit_irt(full, factors=list(FACTORS), not_applicable={"chunker": ()})
    assert fit_irt(full, factors=list(FACTORS)).effects["chunker"].keys() == {"rec", "sent"}


def test_irt_json_records_not_applicable(tmp_path: Path) -> None:
    data, _ = simulate_not_applicable(60, indexed=2, index_free=2, chunkers=2, icl=2, seed=3)
    out = tmp_path / "irt.json"
    fit_irt(to_frame(data), factors=list(FACTORS), out=out)
    doc = json.loads(out.read_text())
    na = doc["not_applicable"]["chunker"]
    assert na["values"] == ["none", ""] and na["seen"] == ["none"]
    assert na["n_pipelines"] == 4 and na["n_pipelines_applicable"] == 8 and len(na["pipelines"]) == 4
    assert doc["not_applicable"]["retriever"]["n_pipelines"] == 0
    assert doc["config"]["not_applicable"]["chunker"] == ["none", ""]
    ident = doc["identifiability"]
    assert "average applicable level" in ident["location"]
    assert ident["factors"]["chunker"]["not_applicable"]["n_pipelines"] == 4
    assert set(doc["effects"]["chunker"]) == {"c1", "c2"}
    chunk_of = {p: a["chunker"] for p, a in doc["abilities"].items()}
    assert sorted(set(chunk_of.values())) == ["c1", "c2", "none"]
    assert all(a["se"] > 0 for a in doc["abilities"].values())
    effects_csv = pd.read_csv(tmp_path / "irt_effects.csv")
    assert "none" not in set(effects_csv.loc[effects_csv["factor"] == "chunker", "level"])


def test_cli_not_applicable_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, _ = simulate_not_applicable(60, indexed=2, index_free=2, chunkers=2, icl=2, seed=3)
    df = to_frame(data)
    df["chunker"] = df["chunker"].replace("none", "n/a")
    path = tmp_path / "responses.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "irt.json"
    args = ["irt", "fit", str(path), "--factors", "retriever,chunker,icl", "--out", str(out)]
    assert main([*args, "--not-applicable", "chunker=N/A"]) == 0
    text = capsys.readouterr().out
    assert "not applicable to 4 pipelines: n/a" in text
    assert set(json.loads(out.read_text())["effects"]["chunker"]) == {"c1", "c2"}
    # without it 'n/a' is a level, collinear with the index-free retrievers
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragrade: error:") and "not separately identifiable" in err and "Traceback" not in err
    assert main([*args, "--not-applicable", "chunker"]) == 2
    assert "--not-applicable expects FACTOR=VALUE" in capsys.readouterr().err
