"""Adaptive exam sweeps on a run directory: calibration, rounds through the journal, files.

``ragrade exam take --adaptive`` runs :func:`run_adaptive`. The run directory is
that of a sweep (:mod:`ragrade.run.sweep`) with these differences:

* ``responses.parquet`` holds only the (pipeline, question) pairs asked;
* ``summary.csv`` keeps ``accuracy`` (observed, on the items asked) and adds
  ``accuracy_estimate`` with ``accuracy_estimate_low`` / ``_high`` (the
  full-exam estimate and its 95% interval), ``status`` (``measured``,
  ``eliminated``, ``predicted`` -- never asked, predicted by the additive
  model -- or ``failed``: every request failed), ``theta``, ``theta_se``,
  ``n_asked`` and ``stop_reason``;
* ``adaptive_rounds.jsonl``: one record per round (requests, pipelines alive,
  standard errors, eliminations);
* ``calibration/irt.json`` when the items were calibrated in the run
  (reference pipelines, cold start, or a sampled run's answers), reusable as
  ``--calibration`` for the next run on the same exam (its ``source`` is this
  run directory, whose responses the next run's misfit check reads);
* ``manifest.json`` has an ``adaptive`` block: the settings, the calibration
  source, the requests spent against the full grid, ``diagnostics`` (estimate
  basis, misfit checks, failed requests, negative-discrimination questions,
  the leader and its probability of being the best) and ``warnings``.

Every answer goes through the journal, and the scheduler is deterministic for a
fixed seed, so a rerun after ``kill -9`` replays the journaled answers round by
round, asks only what is missing and ends with the same result.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragrade import interrupt
from ragrade.adaptive.calibration import (
    CALIBRATION_DIR,
    calibration_data,
    calibration_mode,
    cold_params,
    fit_item_params,
    load_calibration,
    misfit_fallback,
    refitter,
    resolve_references,
    write_calibration,
)
from ragrade.adaptive.estimate import MisfitResult, calibration_check, smallest_useful_budget
from ragrade.adaptive.notes import run_notes
from ragrade.adaptive.scheduler import Scheduler, run_rounds
from ragrade.adaptive.state import ItemParams
from ragrade.errors import ConfigError
from ragrade.exam.files import Question, read_exam
from ragrade.io import atomic_write_text, dumps_line
from ragrade.run.adaptive_config import AdaptiveConfig
from ragrade.run.answer import EXAM_WORKER
from ragrade.run.executors import Executor, Shard, run_shards
from ragrade.run.grid import executor_for, prepare_grid
from ragrade.run.manifest import write_manifest
from ragrade.run.records import WorkerContext
from ragrade.run.setup import GridInput, GridSetup, grid_setup, plan_items
from ragrade.run.spec import PipelineSpec, SweepConfig, expand_pipelines
from ragrade.run.store import JOURNAL_FILE, Journal
from ragrade.run.summary import (
    RESPONSES_FILE,
    SUMMARY_BY_TAG_FILE,
    SUMMARY_FILE,
    summarise,
    summarise_by_tag,
    write_csv,
    write_responses,
)
from ragrade.run.sweep import SweepResult, clear_run_dir
from ragrade.runlock import run_lock

ROUNDS_FILE = "adaptive_rounds.jsonl"
ADAPTIVE_COLUMNS = (
    "status",
    "accuracy_estimate",
    "accuracy_estimate_low",
    "accuracy_estimate_high",
    "theta",
    "theta_se",
    "n_asked",
    "n_audit",
    "n_failed",
    "p_best",
    "estimate_basis",
    "misfit_warning",
    "stop_reason",
)
RoundFn = Callable[[dict[str, Any]], None]


@dataclass
class AdaptiveResult(SweepResult):
    """A finished adaptive sweep: the sweep's fields plus the round log and the cost."""

    rounds: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    diagnostics: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Setup:
    specs: list[PipelineSpec]
    questions: list[Question]
    items: list[str]
    pool: list[str]
    mode: str
    refs: list[str]
    params: ItemParams
    acfg: AdaptiveConfig
    calib_fit: MisfitResult | None = None
    exam_ids: list[str] = field(default_factory=list)  # every question of the exam, the ICL pool's too


def _setup(exam_path: Path, cfg: SweepConfig, acfg: AdaptiveConfig) -> _Setup:
    """Validate everything before the first write: exam, grid, calibration, budget."""
    acfg.check()
    _, questions = read_exam(exam_path)
    specs = expand_pipelines(cfg)
    ids = [q.id for q in questions]
    pool, items = plan_items(ids, specs, cfg)
    mode = calibration_mode(acfg, len(specs))
    by_id = {q.id: q for q in questions}
    smallest = smallest_useful_budget(len(specs))
    if acfg.budget is not None and acfg.budget < smallest:
        raise ConfigError(
            f"$budget {acfg.budget} cannot give every pipeline an estimate: the smallest useful budget for "
            f"{len(specs)} pipelines is {smallest} requests (2 answers each, for an interval); more buys "
            "narrower intervals"
        )
    calib_fit = None
    if mode == "file":
        params = load_calibration(str(acfg.calibration), items)
        data = calibration_data(str(acfg.calibration), items)
        if data is not None and len(data) >= 3:
            calib_fit = calibration_check(
                data, params.d, params.b, params.g, alpha=acfg.calibration_misfit_alpha, seed=cfg.seed
            )
    else:
        params = cold_params(items, {q: len(by_id[q].choices) for q in items})
    refs = resolve_references(acfg, specs, cfg.seed) if mode == "reference" else []
    first = len(refs) * len(items) + 2 * max(1, len(specs) - len(refs))
    if refs and acfg.budget is not None and acfg.budget < first:
        raise ConfigError(
            f"$budget {acfg.budget} is less than the {first} requests a reference calibration needs "
            f"({len(refs)} reference pipeline(s) x {len(items)} questions, then 2 per other pipeline): with this "
            f"budget use $calibration_mode sample (or auto), which spends any budget from {smallest} requests up"
        )
    if mode == "sample":
        acfg = acfg.model_copy(update={"audit_share": 1.0})
    acfg = misfit_fallback(acfg, calib_fit)  # calibration data misfit: sample at random instead
    return _Setup(specs, [by_id[i] for i in items], items, pool, mode, refs, params, acfg, calib_fit, ids)


def _groups(questions: Sequence[Question], balance: str) -> list[str] | None:
    if balance == "none":
        return None
    out = []
    for q in questions:
        value = (q.tags or {}).get(balance)
        if isinstance(value, list):
            value = value[0] if value else None
        out.append("" if value is None else str(value))
    return out


def adaptive_plan(exam_path: str | Path, cfg: SweepConfig, acfg: AdaptiveConfig) -> dict[str, Any]:
    """What an adaptive run would cost, without asking anything: the upper bound and the expected requests.

    The expectation simulates the run with the calibration's items (or uninformed ones) and abilities
    drawn N(0, 1): a rough guide, since the real abilities are unknown before the run.
    """
    from ragrade.irt.simulate import sample_matrix

    s = _setup(Path(exam_path), cfg, acfg)
    acfg = s.acfg
    n_p, n_i = len(s.specs), len(s.items)
    cap = min(n_i, acfg.max_items or n_i)
    ids = [sp.id for sp in s.specs]
    sched = Scheduler(s.params, ids, acfg, factors=[sp.factors() for sp in s.specs], seed=cfg.seed)
    upper = len(s.refs) * n_i + (n_p - len(s.refs)) * cap
    if sched.budget is not None:
        upper = min(upper, sched.budget)
    rng = np.random.default_rng(cfg.seed)
    R = sample_matrix(rng.normal(0.0, 1.0, n_p), s.params.d, s.params.b, s.params.g, rng).T
    for r in s.refs:
        sched.record(ids.index(r), list(range(n_i)), [int(v) for v in R[ids.index(r)]])
    sched.reestimate()
    log = run_rounds(sched, lambda plan: {p: [int(R[p, i]) for i in items] for p, items in plan.items()})
    return {
        "pipelines": n_p,
        "questions": n_i,
        "full_grid_requests": n_p * n_i,
        "upper_bound_requests": int(upper),
        "expected_requests": int(sched.spent),
        "expected_rounds": len(log),
        "calibration": s.mode,
        "reference_pipelines": s.refs,
    }


def run_adaptive(
    exam_path: str | Path,
    cfg: SweepConfig,
    acfg: AdaptiveConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    on_round: RoundFn | None = None,
    executor: Executor | None = None,
    config_files: Sequence[str] = (),
) -> AdaptiveResult:
    """Run (or resume) an adaptive sweep of ``cfg`` on the exam at ``exam_path``; write the run directory."""
    exam_path, run_dir = Path(exam_path), Path(out_dir)
    s = _setup(exam_path, cfg, acfg)
    exe = executor or executor_for(cfg)
    # what the answers depend on (not the adaptive settings: a rerun with a larger budget or another target
    # reuses every journaled answer and asks only what is new)
    setup = grid_setup(
        "exam-adaptive",
        GridInput("exam", exam_path, s.exam_ids),
        cfg,
        settings=WorkerContext(answer=cfg.answer.model_dump(mode="json")),
        executor=exe,
        specs=s.specs,
        config_files=config_files,
        fingerprint_extra={"kind": "adaptive"},
    )
    from ragrade.run.pipeline import resources_for

    manifest = setup.manifest
    prepare_grid(exe, resources_for(setup.context), s.specs, cfg, len(s.items), manifest)  # before the first write
    manifest["adaptive"] = {
        "settings": acfg.model_dump(mode="json"),
        "calibration": {"mode": s.mode, "source": s.params.source, "reference_pipelines": s.refs},
    }
    manifest["outputs"] = {RESPONSES_FILE: {"version": 1}, SUMMARY_FILE: {"version": 1}, ROUNDS_FILE: {"version": 1}}
    from ragrade.run.exit_status import recorded_exit

    with run_lock(run_dir), recorded_exit(run_dir, manifest, setup.order, s.items, files=False):
        if overwrite:
            clear_run_dir(run_dir)
            for extra in (run_dir / ROUNDS_FILE, run_dir / CALIBRATION_DIR):
                shutil.rmtree(extra, ignore_errors=True) if extra.is_dir() else extra.unlink(missing_ok=True)
        return _run_locked(run_dir, setup, s, exe, cfg, on_round)


def _run_locked(
    run_dir: Path, setup: GridSetup, s: _Setup, exe: Executor, cfg: SweepConfig, on_round: RoundFn | None
) -> AdaptiveResult:
    """The adaptive run in a folder this process holds (:func:`ragrade.runlock.run_lock`)."""
    context, pipelines, worker_specs = setup.context, setup.journal_specs, setup.worker_specs
    run_dir.mkdir(parents=True, exist_ok=True)
    journal = Journal(run_dir / JOURNAL_FILE)
    try:
        journal.check_provenance(setup.provenance, "adaptive run")
        journal.register_pipelines(pipelines)
        write_manifest(run_dir, setup.manifest)
        runner = _Runner(journal, worker_specs, context, exe, cfg.shard_size, len(s.items))
        added_before = journal.count()
        sched, rounds = _drive(run_dir, s, cfg.seed, runner, on_round)
        rows = [
            r
            for p, sp in enumerate(s.specs)
            for r in journal.rows(sp.id, [s.items[i] for i in np.flatnonzero(sched.asked[p])])
        ]
        added = journal.count() - added_before
    finally:
        journal.close()
    written, note = None, ""
    if s.mode in ("cold", "sample"):  # a calibration for the next run on this exam
        written, note = write_calibration(run_dir, rows, s.acfg.calibration_model)
    notes = run_notes(sched, s.items, s.mode, written, note)
    return _finalise(run_dir, setup, s, sched, rounds, rows, added, notes)


class _Runner:
    """Asks (pipeline, items) through the journal: journaled rows are reused, the rest run on the executor."""

    def __init__(
        self,
        journal: Journal,
        specs: Mapping[str, Mapping[str, Any]],
        context: Any,
        exe: Executor,
        shard: int,
        n_items: int = 0,
    ) -> None:
        self.journal, self.specs, self.context, self.exe, self.shard = journal, specs, context, exe, shard
        self.n_items = n_items  # questions of the exam: the full grid has specs x n_items rows

    def ask(self, plan: Mapping[str, Sequence[str]]) -> dict[str, dict[str, dict[str, Any]]]:
        shards = []
        for pid, items in plan.items():
            done = self.journal.done_items(pid)
            todo = [i for i in items if i not in done]
            for start in range(0, len(todo), self.shard):
                shards.append(Shard(pid, dict(self.specs[pid]), tuple(todo[start : start + self.shard])))
        total = len(self.specs) * self.n_items

        def tell(_shard: Shard, _n: int) -> None:  # what an interruption reports
            interrupt.progress(self.journal.count(), total, "rows of the full grid")

        run_shards(self.journal, shards, EXAM_WORKER, self.context, self.exe, tell)
        return {pid: {r["question_id"]: r for r in self.journal.rows(pid, list(items))} for pid, items in plan.items()}


def _answer(row: Mapping[str, Any] | None) -> int | None:
    """1 / 0, or None (missing) when the request failed."""
    if row is None or row.get("error") is not None or row.get("correct") is None:
        return None
    return 1 if int(row["correct"]) else 0


def _drive(
    run_dir: Path, s: _Setup, seed: int, runner: _Runner, on_round: RoundFn | None
) -> tuple[Scheduler, list[dict[str, Any]]]:
    """Calibration, then rounds until every pipeline stopped; the round log is rewritten after each round."""
    acfg = s.acfg
    ids = [sp.id for sp in s.specs]
    params = s.params
    ref_rows: list[dict[str, Any]] = []
    if s.refs:
        got = runner.ask({r: s.items for r in s.refs})
        ref_rows = [row for r in s.refs for row in got[r].values()]
        params = fit_item_params(ref_rows, s.items, acfg.calibration_model, s.params)
        write_calibration(run_dir, ref_rows, acfg.calibration_model)
    groups = _groups(s.questions, acfg.balance)
    refit = (
        refitter(ids, s.items, acfg.calibration_model, params) if s.mode in ("cold", "reference", "sample") else None
    )
    factors = [sp.factors() for sp in s.specs]
    sched = Scheduler(
        params, ids, acfg, factors=factors, groups=groups, seed=seed, refit=refit, calibration_fit=s.calib_fit
    )
    for r in s.refs:
        rows = {row["question_id"]: row for row in ref_rows if row["pipeline"] == r}
        sched.record(ids.index(r), list(range(len(s.items))), [_answer(rows.get(q)) for q in s.items])
    sched.reestimate()
    log: list[dict[str, Any]] = []
    while True:
        plan = sched.plan()
        if not plan:
            break
        got = runner.ask({ids[p]: [s.items[i] for i in items] for p, items in plan.items()})
        for p, items in plan.items():
            sched.record(p, items, [_answer(got[ids[p]].get(s.items[i])) for i in items])
        rec = sched.finish_round()
        rec["asked_this_round"] = sum(len(v) for v in plan.values())
        log.append(rec)
        atomic_write_text(run_dir / ROUNDS_FILE, "".join(dumps_line(r) + "\n" for r in log))
        if on_round is not None:
            on_round(rec)
        if sched.done:
            break
    return sched, log


def _finalise(
    run_dir: Path,
    setup: GridSetup,
    s: _Setup,
    sched: Scheduler,
    rounds: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    added: int,
    notes: tuple[dict[str, Any], list[str]],
) -> AdaptiveResult:
    manifest = setup.manifest
    write_responses(run_dir / RESPONSES_FILE, rows)
    df = pd.DataFrame(rows)
    order = [sp.id for sp in s.specs]
    summary = adaptive_summary(df, s.specs, sched)
    write_csv(run_dir / SUMMARY_FILE, summary)
    if not df.empty:
        write_csv(run_dir / SUMMARY_BY_TAG_FILE, summarise_by_tag(df, order))
    full = len(s.specs) * len(s.items)
    cost = {
        "requests": int(sched.spent),
        "full_grid_requests": full,
        "share": round(sched.spent / full, 6) if full else None,
        "rounds": len(rounds),
        "n_failed_requests": int(sched.n_failed.sum()),
        "status_counts": summary["status"].value_counts().to_dict(),
    }
    manifest["adaptive"]["cost"] = cost
    manifest["adaptive"]["calibration"]["source"] = sched.params.source
    manifest["adaptive"]["calibration"]["written"] = notes[0]["calibration_written"]
    manifest["adaptive"]["diagnostics"], manifest["adaptive"]["warnings"] = notes
    n_errors = int(df["error"].notna().sum()) if "error" in df else 0  # failed requests: missing answers
    setup.finish(len(rows), added, n_errors=n_errors)
    write_manifest(run_dir, manifest)
    return AdaptiveResult(
        run_dir,
        order,
        len(s.items),
        added,
        df,
        summary,
        rounds=rounds,
        cost=cost,
        warnings=notes[1],
        diagnostics=notes[0],
    )


def adaptive_summary(df: pd.DataFrame, specs: Sequence[PipelineSpec], sched: Scheduler) -> pd.DataFrame:
    """summary.csv of an adaptive run: the observed columns of every asked pipeline plus the estimates."""
    order = [sp.id for sp in specs]
    observed = summarise(df, order) if not df.empty else pd.DataFrame({"pipeline": []})
    est = pd.DataFrame(sched.results()).rename(columns={"n_answered": "n_answered_adaptive"})
    est["misfit_warning"] = bool(sched.misfit_warning)
    est = est[["pipeline", *ADAPTIVE_COLUMNS]]
    base = pd.DataFrame([{"pipeline": sp.id, **sp.factors()} for sp in specs])
    extra = [c for c in observed.columns if c not in base.columns]
    out = base.merge(observed[["pipeline", *extra]], on="pipeline", how="left").merge(est, on="pipeline", how="left")
    if "n" in out:
        out["n"] = out["n"].fillna(0).astype(int)
    return out


__all__ = ["ADAPTIVE_COLUMNS", "CALIBRATION_DIR", "ROUNDS_FILE", "AdaptiveResult", "adaptive_plan", "run_adaptive"]
