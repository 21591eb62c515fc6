"""Report section "What it cost": an adaptive run's requests against the full grid, its leaderboard, its rounds.

Reads ``adaptive/`` of a job (``summary.csv``, ``adaptive_rounds.jsonl``,
``manifest.json``, ``comparison.json`` when the run replayed a full sweep), or
an adaptive ``exam take`` directory on its own (read as ``sweep/``). Predicted
pipelines (never asked) are labelled "predicted" in every table.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from ragrade.report import charts
from ragrade.report.html import Section, Table
from ragrade.report.sections_core import absent, short_pipeline
from ragrade.report.sources import RunFiles

FULL_SUMMARY = "sweep/summary.csv"


def _prefix(files: RunFiles) -> str | None:
    if files.has("adaptive/summary.csv"):
        return "adaptive/"
    manifest = files.json("sweep/manifest.json")
    if isinstance(manifest, dict) and "adaptive" in manifest and files.has("sweep/summary.csv"):
        return "sweep/"
    return None


def _rounds(files: RunFiles, rel: str) -> list[dict[str, Any]]:
    path = files.path(rel)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def cost_section(files: RunFiles) -> Section:
    """Requests spent vs the full grid, the adaptive leaderboard (beside the full one), per-round curves."""
    sec = Section("cost", "What it cost")
    prefix = _prefix(files)
    if prefix is None:
        return absent(sec, "adaptive/summary.csv")
    summary_rel, manifest_rel = f"{prefix}summary.csv", f"{prefix}manifest.json"
    df = files.csv(summary_rel)
    manifest = files.json(manifest_rel) or {}
    adaptive = manifest.get("adaptive", {}) if isinstance(manifest, dict) else {}
    cost = adaptive.get("cost", {})
    calib = adaptive.get("calibration", {})
    if df is None or df.empty or not cost:
        return absent(sec, summary_rel, manifest_rel)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(cost.get("status_counts", {}).items()))
    sec.add_text(
        f"The adaptive run asked {cost['requests']} of the full grid's {cost['full_grid_requests']} questions "
        f"({cost['share']:.1%}) in {cost['rounds']} rounds ({counts}); items calibrated by "
        f"{calib.get('mode', '?')} ({calib.get('source', '?')}). Failed requests: {cost.get('n_failed_requests', 0)} "
        "(missing, never counted wrong). Accuracy estimates cover the whole exam: observed answers plus an "
        "estimate of the answers not asked, checked against a uniformly random audit sample of questions "
        f"({_basis(adaptive)}), with 95% intervals and the probability that each pipeline is the best.",
        manifest_rel,
    )
    for warning in adaptive.get("warnings", []):
        sec.add_text(f"Warning: {warning}", manifest_rel)
    comparison = files.json(f"{prefix}comparison.json") if prefix == "adaptive/" else None
    if comparison:
        sec.add_text(
            f"Against the full sweep it replayed: top-1 agreement {'yes' if comparison['top1'] else 'no'}, "
            f"Kendall tau {comparison['kendall_tau']:.3f}, mean absolute error {comparison['mae']:.3f}, "
            f"95% intervals covering the full-grid accuracy for {comparison['coverage']:.0%} of the pipelines.",
            f"{prefix}comparison.json",
        )
    full = files.csv(FULL_SUMMARY) if prefix == "adaptive/" else None
    sec.add(_leaderboard(df, full, summary_rel))
    rounds = _rounds(files, f"{prefix}adaptive_rounds.jsonl")
    if rounds:
        _curves(sec, rounds, f"{prefix}adaptive_rounds.jsonl")
    return sec


def _basis(adaptive: dict[str, Any]) -> str:
    basis = (adaptive.get("diagnostics") or {}).get("estimate_basis")
    if basis == "audit":
        return "here the estimates rest on the audit sample alone (design-based)"
    if basis == "model+audit":
        return "here the IRT model's expected score, corrected by the audit residuals"
    return "basis not recorded"


def _leaderboard(df: pd.DataFrame, full: pd.DataFrame | None, source: str) -> Table:
    df = df.sort_values(["accuracy_estimate", "pipeline"], ascending=[False, True], na_position="last")
    full_acc = dict(zip(full["pipeline"], full["accuracy"], strict=True)) if full is not None else {}
    cols = ["rank", "pipeline", "status", "asked", "observed", "estimate", "low", "high", "P(best)"]
    if full_acc:
        cols.append("full grid")
    rows = []
    for i, r in enumerate(df.to_dict(orient="records")):
        status = "predicted" if r["status"] == "predicted" else str(r["status"])
        row = [i + 1, short_pipeline(str(r["pipeline"])), status, int(r["n_asked"]), r.get("accuracy")]
        row += [r["accuracy_estimate"], r["accuracy_estimate_low"], r["accuracy_estimate_high"], r.get("p_best")]
        if full_acc:
            row.append(full_acc.get(_original(str(r["pipeline"]))))
        rows.append(row)
    return Table(
        cols,
        rows,
        caption="Adaptive leaderboard: full-exam accuracy estimates (status 'predicted': never asked)",
        source=source,
    )


def _original(pid: str) -> str:
    """The full sweep's id of a replayed pipeline (``llm=replay/X`` -> ``llm=X``)."""
    return "|".join(p.replace("llm=replay/", "llm=", 1) for p in pid.split("|"))


def _curves(sec: Section, rounds: list[dict[str, Any]], source: str) -> None:
    x = [r["round"] for r in rounds]
    table = Table(
        ["round", "requests", "pipelines running", "max SE", "median SE"],
        [[r["round"], r["requests"], r["alive"], r.get("max_se"), r.get("median_se")] for r in rounds],
        caption="Per round",
        source=source,
    )
    sec.add(
        charts.lines(
            "adaptive-se",
            "Standard error of ability per round (pipelines still running)",
            [("largest", x, [r.get("max_se") for r in rounds]), ("median", x, [r.get("median_se") for r in rounds])],
            source=source,
            x_title="round",
            y_title="SE of ability",
            markers=True,
        )
    )
    sec.add(
        charts.lines(
            "adaptive-alive",
            "Pipelines running and requests spent, per round",
            [("pipelines running", x, [r.get("alive") for r in rounds])],
            source=source,
            x_title="round",
            y_title="pipelines running",
            table=table,
            markers=True,
        )
    )


__all__ = ["cost_section"]
