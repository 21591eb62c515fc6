"""Stage timings of ``irt fit``: the fit covers every optimiser pass, so the statistics stage is not billed for it."""

from __future__ import annotations

from typing import Any

import pytest

import ragrade.irt.fit as fit_mod
from ragrade.irt.fit import FitConfig, fit_irt
from ragrade.irt.model import Bounds, Priors
from ragrade.irt.simulate import simulate_flat


def test_fit_time_counts_both_passes_when_bounds_force_a_refinement(monkeypatch: pytest.MonkeyPatch) -> None:
    reports: list[dict[str, Any]] = []
    real = fit_mod.optimise

    def recording(prob: Any, x0: Any) -> Any:
        x, report = real(prob, x0)
        reports.append(dict(report))
        return x, report

    monkeypatch.setattr(fit_mod, "optimise", recording)
    data, _ = simulate_flat(20, 60, seed=2)
    cfg = FitConfig(priors=Priors.named("none"), bounds=Bounds.parse("theta=-1:4,b=-4:4,d=0.2:3,g=0:0.3"))
    res = fit_irt(data, config=cfg)
    assert len(reports) == 2 and "anchor_penalty" in res.fit  # the bounds made it refine
    assert res.fit["time_s"] == pytest.approx(reports[0]["time_s"] + reports[1]["time_s"], abs=2e-4)
    assert res.timings["fit"] == res.fit["time_s"]
    assert res.fit["iterations"] == reports[0]["iterations"] + reports[1]["iterations"]
    t = res.timings
    assert 0.0 <= t["se"] <= t["se_stats"] <= t["fit_se_stats"]
    assert t["fit"] <= t["fit_se_stats"] - t["se_stats"] + 1e-3  # the optimiser's time is not in the statistics'


def test_one_pass_fit_time_is_that_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    reports: list[dict[str, Any]] = []
    real = fit_mod.optimise

    def recording(prob: Any, x0: Any) -> Any:
        x, report = real(prob, x0)
        reports.append(dict(report))
        return x, report

    monkeypatch.setattr(fit_mod, "optimise", recording)
    data, _ = simulate_flat(20, 60, seed=2)
    res = fit_irt(data, config=FitConfig())
    assert len(reports) == 1 and "anchor_penalty" not in res.fit
    assert res.fit["time_s"] == reports[0]["time_s"]
