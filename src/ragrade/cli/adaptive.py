"""``ragrade exam take --adaptive``: run the grid adaptively and print the estimates (or, in a dry run, the plan)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ragrade.cli.common import LOADING, command_progress, echo_json, is_tty
from ragrade.cli.exam import print_notes

if TYPE_CHECKING:
    from ragrade.run.spec import SweepConfig


def take_adaptive(
    exam: Path,
    cfg: SweepConfig,
    out: Path,
    *,
    overwrite: bool,
    as_json: bool,
    config: Path | None,
) -> None:
    """Run ``cfg``'s grid adaptively by its ``adaptive`` settings (the ``[adaptive]`` table under the adaptive
    flags, merged by :meth:`ragrade.cli.sweep.TakeFlags.sweep_config`), or plan it under ``--dry-run``."""
    from ragrade import api

    if cfg.llm_options.dry_run:
        plan = api.plan_adaptive(exam, cfg)
        if as_json:
            echo_json({"adaptive_plan": plan.as_dict()})
        else:
            typer.echo(
                f"adaptive plan: {plan.pipelines} pipelines x {plan.questions} questions "
                f"(full grid {plan.full_grid_requests} requests); at most {plan.upper_bound_requests} "
                f"requests, about {plan.expected_requests} expected ({plan.calibration} calibration)"
            )
        print_notes(plan.notes)
        return
    show = is_tty() and not as_json
    shown = command_progress("exam take --adaptive", status=LOADING)

    def on_round(rec: dict[str, Any]) -> None:
        shown.update("requests", int(rec["requests"]), int(rec.get("budget") or 0))  # the default cap included
        if show:
            se = rec.get("max_se")
            typer.echo(
                f"round {rec['round']}: {rec['asked_this_round']} requests ({rec['requests']} in all), "
                f"{rec['alive']} pipelines running" + (f", max SE {se:.3f}" if se is not None else ""),
                err=True,
            )

    with shown:
        result = api.take_exam_adaptive(
            exam, out, config=cfg, overwrite=overwrite, on_round=on_round, config_files=[config] if config else []
        )
    print_adaptive(
        result.summary, result.cost, as_json, result.run_dir, warnings=result.warnings, diagnostics=result.diagnostics
    )
    print_notes(result.notes)
    from ragrade.cli.pipelines import check_grid_failures

    # a server that is down, rejects the key or is too slow fails the command (exit 2) as it does `exam take`; other
    # failed requests are missing data, listed above, and the run's estimates already leave them out
    check_grid_failures(result.responses, None, backends_only=True)


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def print_adaptive(
    summary: Any,
    cost: dict[str, Any],
    as_json: bool,
    run_dir: Path,
    *,
    warnings: list[str] | None = None,
    diagnostics: dict[str, Any] | None = None,
) -> None:
    """The adaptive leaderboard (estimate, 95% interval, probability of being the best), then the warnings."""
    cols = ["pipeline", "status", "n_asked", "accuracy", "accuracy_estimate", "accuracy_estimate_low"]
    cols += ["accuracy_estimate_high", "p_best", "n_failed", "n_errors"]
    table = summary.reindex(columns=cols).sort_values("accuracy_estimate", ascending=False, na_position="last")
    if as_json:
        recs = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in table.to_dict(orient="records")
        ]
        doc = {"run_dir": str(run_dir), "cost": cost, "pipelines": recs}
        echo_json({**doc, "warnings": warnings or [], "diagnostics": diagnostics or {}})
        return
    width = max(len(str(p)) for p in table["pipeline"])
    typer.echo(
        f"{'pipeline':<{width}}  {'status':<10}  {'asked':>5}  {'failed':>6}  {'observed':>8}  estimate  "
        "95% interval     P(best)"
    )
    for r in table.itertuples(index=False):
        label = "predicted" if r.status == "predicted" else r.status
        failed = r.n_failed if isinstance(r.n_failed, (int, float)) and not math.isnan(r.n_failed) else 0
        typer.echo(
            f"{r.pipeline:<{width}}  {label:<10}  {int(r.n_asked):>5}  {int(failed):>6}  {_fmt(r.accuracy, '8.1%')}  "
            f"{_fmt(r.accuracy_estimate, '8.1%')}  [{_fmt(r.accuracy_estimate_low, '.1%')}, "
            f"{_fmt(r.accuracy_estimate_high, '.1%')}]  {_fmt(r.p_best, '6.1%')}"
        )
    diag = diagnostics or {}
    typer.echo(
        f"requests: {cost['requests']} of the full grid's {cost['full_grid_requests']} "
        f"({cost['share']:.1%}) in {cost['rounds']} rounds; estimates: {diag.get('estimate_basis', '?')}; "
        f"run directory: {run_dir}"
    )
    calib = diag.get("calibration_source")
    if calib:
        typer.echo(f"calibration: {calib}")
    if diag.get("calibration_written"):
        typer.echo(f"calibration for the next run: --calibration {diag['calibration_written']}")
    for w in warnings or []:
        typer.echo(f"warning: {w}", err=True)


__all__ = ["print_adaptive", "take_adaptive"]
