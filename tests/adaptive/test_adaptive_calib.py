"""In-run calibration of adaptive runs: the default mode and a cold 3PL start on a simulated grid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.support.adaptive_sim import adaptive_on_matrix, score_run, simulate_grid

from ragrade.adaptive import AdaptiveConfig, Scheduler
from ragrade.adaptive.calibration import COLD_MIN_PIPELINES, calibration_mode, cold_params, fit_item_params, refitter
from ragrade.errors import ConfigError


def test_auto_mode_calibrates_large_grids_cold_and_samples_small_ones(tmp_path: Path) -> None:
    auto = AdaptiveConfig()
    assert auto.calibration_model == "3pl"
    assert calibration_mode(auto, COLD_MIN_PIPELINES) == "cold"
    assert calibration_mode(auto, 63) == "cold"
    assert calibration_mode(auto, COLD_MIN_PIPELINES - 1) == "sample"
    assert calibration_mode(auto, 2) == "sample"
    assert calibration_mode(AdaptiveConfig(calibration=str(tmp_path / "irt.json")), 63) == "file"
    assert calibration_mode(AdaptiveConfig(calibration_mode="reference"), 63) == "reference"
    assert calibration_mode(AdaptiveConfig(calibration_mode="cold"), 2) == "cold"
    with pytest.raises(ConfigError, match="needs calibration"):
        calibration_mode(AdaptiveConfig(calibration_mode="file"), 63)


def test_cold_start_with_3pl_refits_estimates_the_grid_from_its_own_answers() -> None:
    sd = {"llm": 1.0, "retriever": 0.8, "icl": 0.4}
    sim = simulate_grid({"llm": 3, "retriever": 4, "icl": 2}, 300, seed=5, effect_sd=sd)
    cfg = AdaptiveConfig(default_share=None, default_items=None)  # no budget cap: the stopping rules decide
    assert calibration_mode(cfg, len(sim.pipelines)) == "cold"
    params = cold_params(sim.truth.items, {})
    refit = refitter(sim.pipelines, sim.truth.items, cfg.calibration_model, params)
    sched, _ = adaptive_on_matrix(sim.R, params, sim.pipelines, cfg, factors=sim.factors, seed=2, refit=refit)
    score = score_run(sched, sim.accuracy, sim.R.size)
    assert sched.params.source.startswith("fit:3pl")  # the final estimates use re-fitted items
    assert np.median(sched.n_asked) < 0.5 * sim.R.shape[1]  # no reference pipelines took the whole exam first
    assert score["requests_share"] < 0.6
    assert score["top1"] == 1.0
    assert score["kendall_tau"] > 0.75
    assert score["mae"] < 0.05  # the audit correction buys valid intervals with some point precision
    assert score["coverage"] >= 0.85
    # uninformed items are ties, picked at random: the answers spread over the exam and calibrate it
    assert (sched.asked.sum(axis=0) > 0).mean() > 0.9


def test_warm_started_refit_reaches_the_fresh_fit() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 3}, 120, seed=7, effect_sd=1.0)
    cfg = AdaptiveConfig()
    params = cold_params(sim.truth.items, {})
    sched = Scheduler(params, sim.pipelines, cfg, factors=sim.factors, seed=0)
    rng = np.random.default_rng(0)
    refit = refitter(sim.pipelines, sim.truth.items, "3pl", params)
    for share in (0.3, 0.6):  # a first fit, then a warm-started one on more answers
        for p in range(len(sim.pipelines)):
            items = sorted(int(i) for i in np.flatnonzero(rng.random(120) < share))
            sched.record(p, items, [int(sim.R[p, i]) for i in items])
        warm = refit(sched)
    rows = [
        {"pipeline": sim.pipelines[p], "question_id": sim.truth.items[i], "correct": int(sched.y[p, i])}
        for p, i in zip(*np.nonzero(sched.y >= 0), strict=True)
    ]
    fresh = fit_item_params(rows, sim.truth.items, "3pl", params)
    assert warm.source == fresh.source == f"fit:3pl on {len(rows)} answers"
    assert np.abs(warm.b - fresh.b).max() < 0.05 and np.abs(warm.d - fresh.d).max() < 0.05


def test_calibration_reads_the_per_item_parquet_of_a_large_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    from ragrade.adaptive.calibration import load_calibration
    from ragrade.irt import output
    from ragrade.irt.fit import fit_irt

    rng = np.random.default_rng(0)
    rows = [
        {"pipeline": f"p{p}", "question_id": f"q{q}", "correct": int(rng.random() < 0.3 + 0.05 * p)}
        for p in range(8)
        for q in range(40)
    ]
    res = fit_irt(pd.DataFrame(rows), model="2pl")
    res.write(tmp_path / "small" / "irt.json")
    monkeypatch.setattr(output, "ITEMS_INLINE_MAX", 10)  # as for an exam of more than 2,000 questions
    res.write(tmp_path / "large" / "irt.json")
    import json

    assert "items" not in json.loads((tmp_path / "large" / "irt.json").read_text())
    items = [f"q{q}" for q in range(40)]
    inline, parquet = (
        load_calibration(tmp_path / "small" / "irt.json", items),
        load_calibration(tmp_path / "large" / "irt.json", items),
    )
    for a, b in ((inline.d, parquet.d), (inline.b, parquet.b), (inline.g, parquet.g)):
        assert np.allclose(a, b, atol=1e-5)  # irt.json rounds to 6 decimals; the Parquet table keeps full floats
    partial = load_calibration(tmp_path / "large" / "irt.json", [*items, "q-other"])  # the rest start uninformed
    assert "40 of 41 questions" in partial.source and partial.d[-1] == 1.0 and partial.b[-1] == 0.0
    with pytest.raises(ConfigError, match="covers 3 of the exam's 43"):
        load_calibration(tmp_path / "large" / "irt.json", [*items[:3], *(f"x{i}" for i in range(40))])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 99}, "irt.json file version 99 is newer than this ragrade supports"),
        ({"version": "2"}, "version must be a positive whole number"),
        ({"items.q1.difficulty": None}, "question 'q1' has no difficulty"),
        ({"items.q2.guessing": 1.5}, r"guessing must lie in \[0, 1\).*1.5 for question 'q2'"),
        ({"items.q0.guessing": -0.1}, r"guessing must lie in \[0, 1\)"),
    ],
)
def test_a_calibration_file_that_cannot_be_right_is_refused(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    # issue 38.3: these were read without a word (null difficulty as 0, guessing clipped to 0.99, any version)
    import json

    from ragrade.adaptive.calibration import load_calibration

    items = {f"q{i}": {"discrimination": 1.0, "difficulty": 0.1 * i, "guessing": 0.25} for i in range(4)}
    doc: dict[str, object] = {"kind": "irt", "version": 2, "items": items}
    for key, value in change.items():
        parts = key.split(".")
        if parts[0] == "items":
            items[parts[1]][parts[2]] = value  # type: ignore[assignment]
        else:
            doc[key] = value
    path = tmp_path / "irt.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_calibration(path, list(items))
    doc["version"], items["q1"]["difficulty"] = 2, 0.1  # the same file, set right, is read
    for q in items:
        items[q]["guessing"] = 0.25
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert load_calibration(path, list(items)).source.startswith("file:")


def test_a_fit_from_a_data_frame_finds_the_responses_beside_it(tmp_path: Path) -> None:
    """``source: <dataframe>``: the run directory holding irt.json and responses.parquet gives the check its data."""
    import pandas as pd

    from ragrade.adaptive.calibration import calibration_data
    from ragrade.irt.fit import fit_irt
    from ragrade.run.summary import write_responses

    rows = [
        {"pipeline": f"p{p}", "question_id": f"q{q}", "correct": int((p + q) % 3 != 0)}
        for p in range(5)
        for q in range(12)
    ]
    rows[0]["correct"] = None  # a failed request: missing, never wrong
    res = fit_irt(pd.DataFrame([r for r in rows if r["correct"] is not None]), model="1pl")
    res.write(tmp_path / "irt.json")
    import json

    assert json.loads((tmp_path / "irt.json").read_text())["source"] == "<dataframe>"
    items = [f"q{q}" for q in range(12)]
    assert calibration_data(tmp_path / "irt.json", items) is None  # no responses on disk yet: nothing to check
    write_responses(tmp_path / "responses.parquet", rows)
    R = calibration_data(tmp_path / "irt.json", items)
    assert R is not None and R.shape == (5, 12)
    assert R[0, 0] == -1 and R[0, 1] == 1 and R[1, 2] == 0  # (0 + 0) % 3 == 0 failed; (0 + 1): right; (1 + 2): wrong
    assert (R >= 0).sum() == 59
