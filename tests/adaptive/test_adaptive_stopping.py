"""Stopping with error control, the precision floor, the misfit check in sample mode, the McNemar pick check."""

from __future__ import annotations

import math

import numpy as np
from tests.support.adaptive_sim import adaptive_on_matrix, mcnemar_worse, simulate_grid

from ragrade.adaptive import AdaptiveConfig, Scheduler
from ragrade.adaptive.calibration import cold_params, refitter
from ragrade.adaptive.estimate import elimination_z
from ragrade.adaptive.scheduler import STOP_MAX_SD


def test_mcnemar_by_hand() -> None:
    # discordant items: b = best right / pick wrong, c = the reverse; p = min(1, 2 P(Bin(b + c, 1/2) >= max))
    def grid(b: int, c: int, ties: int = 5) -> np.ndarray:
        best = [1] * b + [0] * c + [1] * ties
        pick = [0] * b + [1] * c + [1] * ties
        return np.array([best, pick], dtype=np.int8)

    assert mcnemar_worse(grid(6, 0), 1, 0)  # 2 / 2^6 = 0.031
    assert not mcnemar_worse(grid(5, 0), 1, 0)  # 2 / 2^5 = 0.0625
    assert mcnemar_worse(grid(7, 0), 1, 0)  # 2 / 128 = 0.016
    assert not mcnemar_worse(grid(6, 1), 1, 0)  # 2 (7 + 1) / 128 = 0.125
    assert mcnemar_worse(grid(9, 1), 1, 0)  # 2 (10 + 1) / 1024 = 0.021
    assert not mcnemar_worse(grid(0, 6), 1, 0)  # the pick is better: never "worse"
    assert not mcnemar_worse(grid(9, 1), 0, 0)
    missing = grid(6, 0)
    missing[1, 0] = -1  # a failed answer leaves the pair out: b = 5
    assert not mcnemar_worse(missing, 1, 0)


def _measured_scheduler() -> Scheduler:
    """Four pipelines after one round of 40 answers each (12 audit), under a budget, at round 10."""
    sim = simulate_grid({"llm": 2, "retriever": 2}, 300, seed=0, effect_sd=0.8)
    cfg = AdaptiveConfig(budget=10_000, batch=40, min_items=30, min_share=0.0, min_audit=8)
    sched = Scheduler(sim.truth, sim.pipelines, cfg, seed=0)
    for p, items in sched.plan().items():
        sched.record(p, items, [int(sim.R[p, i]) for i in items])
    sched.round = 10
    return sched


def test_stopping_uses_the_simultaneous_bounds_of_elimination() -> None:
    sched = _measured_scheduler()
    z = elimination_z(0.05, 4, 10)  # one-sided at 0.05 / (4 * 10 * 11) = 1.14e-4: 3.687
    assert math.isclose(z, 3.687, abs_tol=1e-3)
    acc = np.array([0.80, 0.50, 0.68, 0.20])
    sd = np.array([0.0, 0.02, 0.04, 0.05])
    sched._stop_unlikely(acc, sd)
    # 1: 0.80 - (0.50 + 3.687 * 0.02) = 0.226 > 0, and precise: stopped
    assert sched.status[1] == "stopped" and "surely not the best" in sched.reason[1]
    # 2: P(best) = Phi(-3) = 0.001 < 0.01 (the old rule stopped it), but 0.80 - (0.68 + 3.687 * 0.04) = -0.027
    assert sched.status[2] == "active"
    # 3: far below, but its SD 0.05 is above the precision floor: it goes on (an estimate from few answers)
    assert STOP_MAX_SD < 0.05 and sched.status[3] == "active"
    assert sched.status[0] == "active"


def test_unlikely_pipelines_are_paused_not_stopped() -> None:
    sched = _measured_scheduler()
    sd = np.array([0.0, 0.02, 0.04, sched.cfg.pause_max_sd + 0.01])
    sched._stop_unlikely(np.array([0.80, 0.50, 0.68, 0.20]), sd)
    # 2: P(best) about 0.001 and SD at the floor: paused (still active); 3: too imprecise to pause
    assert sched.paused.tolist() == [False, False, True, False] and sched.status[2] == "active"
    assert sorted(sched.plan()) == [0, 3]  # the budget goes to the pipelines that can still change the decision
    sched._stop(0, "target SE")
    sched._stop(3, "target SE")
    assert sorted(sched.plan()) == [2]  # no contender running: the paused one is served again
    # a pause is recomputed every round: a probability back above stop_p_best serves the pipeline again
    sched._stop_unlikely(np.array([0.80, 0.50, 0.78, 0.20]), sd)
    assert not sched.paused.any()
    # a pause needs less precision than a stop: at an SD of 0.05 (above STOP_MAX_SD) 3 is paused, not stopped
    fresh = _measured_scheduler()
    fresh._stop_unlikely(np.array([0.80, 0.50, 0.68, 0.20]), np.array([0.0, 0.02, 0.04, 0.05]))
    assert fresh.paused.tolist() == [False, False, True, True] and fresh.status[3] == "active"


def test_no_stopping_without_a_budget_or_when_switched_off() -> None:
    for update in ({"budget": None, "default_share": None, "default_items": None}, {"stop_p_best": 0.0}):
        sched = _measured_scheduler()
        sched.cfg = sched.cfg.model_copy(update=update)
        sched.budget = sched.cfg.budget
        sched._stop_unlikely(np.array([0.8, 0.5, 0.68, 0.2]), np.array([0.0, 0.02, 0.04, 0.05]))
        assert (sched.status == "active").all()


def test_the_best_is_never_stopped_or_eliminated_and_no_estimate_is_far_off() -> None:
    """Sampled 10-pipeline grids, 25% budget: the best keeps going; no estimate is far off.

    With pauses at the stopping floor (``pause_max_sd`` 0.04) every estimate is within 0.15 of the truth; with
    the default (0.08) the paused pipelines are less precise, but every error stays within 3 of its own SDs.
    """
    for seed in range(6):
        sim = simulate_grid({"llm": 2, "retriever": 5}, 300, seed=seed, effect_sd={"llm": 1.0, "retriever": 0.8})
        for pause in (0.04, None):
            cfg = AdaptiveConfig(audit_share=1.0, **({} if pause is None else {"pause_max_sd": pause}))
            sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, cfg, seed=seed)
            res = sched.results()
            best = int(np.argmax(sim.accuracy))
            assert res[best]["status"] != "eliminated" and "surely not" not in res[best]["stop_reason"]
            est = np.array([r["accuracy_estimate"] for r in res])
            if pause is not None:
                assert np.abs(est - sim.accuracy).max() <= 0.15
            else:
                _, sd = sched.accuracy()
                assert (np.abs(est - sim.accuracy) <= 3 * sd).all()


def test_sample_mode_runs_the_misfit_check_on_its_own_answers() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 5}, 120, seed=1, effect_sd=0.8)
    params = cold_params(sim.truth.items, {})
    refit = refitter(sim.pipelines, sim.truth.items, "2pl", params)
    cfg = AdaptiveConfig(audit_share=1.0, calibration_mode="sample")
    sched, _ = adaptive_on_matrix(sim.R, params, sim.pipelines, cfg, seed=1, refit=refit)
    assert sched.misfit is not None and 0.0 < sched.misfit.p_value <= 1.0
    assert sched.params is params  # fitted for the check only: the design stays random sampling
    assert sched.design_only and sched.misfit_warning == sched.misfit.warn
    # without a fit there is nothing to check against (no model): no result, no warning
    plain, _ = adaptive_on_matrix(sim.R, params, sim.pipelines, cfg, seed=1)
    assert plain.misfit is None and not plain.misfit_warning


def test_a_decided_run_stops_before_its_budget() -> None:
    # the leader's simultaneous bounds against each other standing pipeline: z = 3.687 at round 10 (4 pipelines)
    sched = _measured_scheduler()
    acc = np.array([0.80, 0.50, 0.79, 0.30])
    sd = np.array([0.003, 0.03, 0.003, 0.03])
    sched._stop_if_settled(acc, sd)
    # 2 vs 0: upper bound of 0.79 - 0.80 is -0.01 + 3.687 * sqrt(2) * 0.003 = 0.0056 <= margin 0.02; 1 and 3 far below
    assert (sched.status == "stopped").all() and "decided" in sched.reason[2]
    # one pipeline could still beat the leader by more than the margin: nothing stops
    sched = _measured_scheduler()
    sched._stop_if_settled(acc, np.array([0.003, 0.03, 0.01, 0.03]))  # 2: -0.01 + 3.687 * 0.0104 = 0.028 > 0.02
    assert (sched.status == "active").all()
    # decided, but a running pipeline above the precision floor goes on (only it)
    sched = _measured_scheduler()
    sched._stop_if_settled(acc, np.array([0.003, 0.03, 0.003, STOP_MAX_SD + 0.01]))
    assert sched.status.tolist() == ["stopped", "stopped", "stopped", "active"]


def test_sampled_grid_on_a_long_exam_stops_before_the_cap() -> None:
    """Four well-separated pipelines, 1,500 questions: done long before the 25% cap, the best still picked."""
    sim = simulate_grid({"llm": 2, "retriever": 2}, 1500, seed=2, effect_sd={"llm": 1.5, "retriever": 1.2})
    acc = np.sort(sim.accuracy)
    assert acc[-1] - acc[-2] > 0.06  # the planted gap this test relies on
    sched, _ = adaptive_on_matrix(sim.R, sim.truth, sim.pipelines, AdaptiveConfig(audit_share=1.0), seed=2)
    res = sched.results()
    assert sched.spent < 0.2 * sim.R.size
    est = np.array([r["accuracy_estimate"] for r in res])
    assert int(np.argmax(est)) == int(np.argmax(sim.accuracy))
    # the leader stopped on its own precision: nobody overlapped it, so it raced no one to the item cap
    best = int(np.argmax(sim.accuracy))
    assert res[best]["stop_reason"] == "target SE" and res[best]["n_asked"] < 0.5 * sim.R.shape[1]
    assert np.abs(est - sim.accuracy).max() <= 0.15


def test_a_leader_nobody_overlaps_races_no_one() -> None:
    sim = simulate_grid({"llm": 2, "retriever": 2}, 400, seed=0, effect_sd=0.8)
    sched = Scheduler(sim.truth, sim.pipelines, AdaptiveConfig(), seed=0)
    assert sched.race_cap == 400  # the item cap by default
    assert Scheduler(sim.truth, sim.pipelines, AdaptiveConfig(race_items=30), seed=0).race_cap == 30
    sched.y[:, :5] = 1  # every pipeline answered (live)
    sd = np.full(4, 0.01)
    assert sched._contenders(np.array([0.9, 0.5, 0.4, 0.3]), sd) == set()
    assert sched._contenders(np.array([0.9, 0.89, 0.4, 0.3]), sd) == {0, 1}
