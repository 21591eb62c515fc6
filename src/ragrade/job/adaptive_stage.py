"""The ``adaptive`` stage of ``ragrade run``: the sweep's grid run adaptively into ``adaptive/``.

With ``replay = true`` (the demo) the pipelines' LLMs are replaced by ``replay/<LLM>``, which answer
from the full sweep's ``responses.parquet``; the stage then compares the adaptive estimates with the
full grid (``adaptive/comparison.json``: requests share, top-1 agreement, Kendall tau, mean absolute
error, interval coverage).
"""

from __future__ import annotations

import math
from typing import Any

from ragrade.io import write_json
from ragrade.job.config import JobConfig
from ragrade.job.layout import RunLayout
from ragrade.job.stages import Stage, StageContext, sweep_config

COMPARISON_FILE = "comparison.json"


def adaptive_stage(cfg: JobConfig, layout: RunLayout) -> Stage:
    """The stage object (needs the sweep when replaying, else the exam and the indexes)."""
    labels = cfg.sweep.chunkers or [c.label for c in cfg.chunkers]
    needs = ["sweep"] if cfg.adaptive.replay else ["exam", *(f"index:{c}" for c in labels)]
    key = {"adaptive": cfg.adaptive.model_dump(), "sweep": cfg.sweep.stage_key(), "llm": cfg.llm.stage_key()}
    out = layout.root / "adaptive"
    return Stage("adaptive", key, needs, [out / "summary.csv"], run_adaptive_stage, resumable=True)


def adaptive_configs(cfg: JobConfig, layout: RunLayout) -> tuple[Any, Any]:
    """The sweep and adaptive settings the stage runs with (``replay``: the LLMs answer from the sweep);
    ``ragrade run --check`` validates them the same way before the first stage."""
    from ragrade.adaptive import AdaptiveConfig

    acfg = AdaptiveConfig.model_validate({**cfg.adaptive.model_dump(exclude={"replay"}), "enabled": True})
    scfg = sweep_config(cfg, layout)
    if cfg.adaptive.replay:
        grid = scfg.grid.model_copy(update={"llms": [f"replay/{m}" for m in scfg.grid.llms]})
        opts = scfg.llm_options.model_copy(update={"replay_from": str(layout.sweep.resolve())})
        scfg = scfg.model_copy(update={"grid": grid, "llm_options": opts})
    return scfg, acfg


def run_adaptive_stage(ctx: StageContext) -> dict[str, Any]:
    """Run (or resume) the adaptive sweep; compare with the full sweep when replaying it."""
    from ragrade.adaptive import run_adaptive
    from ragrade.run.store import JournalMismatch

    section = ctx.cfg.adaptive
    cfg, acfg = adaptive_configs(ctx.cfg, ctx.layout)
    out = ctx.layout.root / "adaptive"

    def on_round(rec: dict[str, Any]) -> None:
        ctx.progress("adaptive", int(rec["round"]), 0)

    try:
        result = run_adaptive(ctx.layout.exam, cfg, acfg, out, on_round=on_round)
    except JournalMismatch:  # answers of another exam or other settings: start over
        result = run_adaptive(ctx.layout.exam, cfg, acfg, out, on_round=on_round, overwrite=True)
    summary: dict[str, Any] = {"share": result.cost["share"]}
    if section.replay:
        comparison = compare_with_full(result.summary, ctx.layout.sweep / "summary.csv", result.cost)
        write_json(out / COMPARISON_FILE, comparison)
        summary.update({k: comparison[k] for k in ("top1", "kendall_tau", "mae", "coverage")})
    summary.update({"requests": result.cost["requests"], "rounds": result.cost["rounds"]})
    return summary


def compare_with_full(adaptive: Any, full_summary: Any, cost: dict[str, Any]) -> dict[str, Any]:
    """How close the adaptive estimates came to the full grid's accuracies (pipelines matched by id)."""
    import pandas as pd

    from ragrade.adaptive.compare import agreement

    full = pd.read_csv(full_summary)
    ids = adaptive["pipeline"].str.replace("llm=replay/", "llm=", regex=False)
    merged = pd.DataFrame(
        {
            "pipeline": ids,
            "estimate": adaptive["accuracy_estimate"],
            "low": adaptive["accuracy_estimate_low"],
            "high": adaptive["accuracy_estimate_high"],
            "status": adaptive["status"],
        }
    ).merge(full[["pipeline", "accuracy"]], on="pipeline")
    ok = merged[merged["estimate"].notna()]
    est, acc = ok["estimate"].to_numpy(), ok["accuracy"].to_numpy()
    agree = agreement(est, ok["low"].to_numpy(), ok["high"].to_numpy(), acc, float(full["accuracy"].max()))
    return {
        "version": 1,
        "pipelines": len(merged),
        "compared": len(ok),
        "requests": cost["requests"],
        "full_grid_requests": cost["full_grid_requests"],
        "share": cost["share"],
        # the estimated best has the full grid's best accuracy (identical twins tie)
        "top1": agree.top1,
        "kendall_tau": None if math.isnan(agree.kendall_tau) else round(agree.kendall_tau, 4),
        "mae": round(agree.mae, 4) if len(ok) else None,
        "coverage": round(agree.coverage, 4) if len(ok) else None,
    }


__all__ = ["COMPARISON_FILE", "adaptive_configs", "adaptive_stage", "compare_with_full", "run_adaptive_stage"]
