"""What an adaptive run must say out loud: misfit, failed requests, excluded items, calibration, the decision.

:func:`run_notes` turns a finished :class:`~ragrade.adaptive.scheduler.Scheduler` into a
JSON-ready block (the manifest's ``adaptive.diagnostics``) and a list of plain
warnings that the terminal, the manifest and the report all show.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragrade.adaptive.estimate import MisfitResult, sig4
from ragrade.adaptive.scheduler import Scheduler

MISFIT_WARNING = "the one-dimensional IRT model does not describe these responses"
MISFIT_SAMPLED = (
    "so the questions were sampled at random (every pipeline the same ones, paired) instead of chosen by the "
    "model: design-based estimates and intervals, as random sampling of the same budget"
)
MISFIT_KEPT = (
    "the estimates are the model's predictions corrected by each pipeline's own audit sample (biases shrunk "
    "with their spread integrated out, so the intervals widen by what the audits cannot rule out)"
)
MISFIT_NO_MODEL = "the estimates are design-based (no model); the calibration this run writes is suspect"


def _check(res: MisfitResult | None) -> dict[str, Any] | None:
    if res is None:
        return None
    stat, pval = sig4(res.statistic), sig4(res.p_value)
    out: dict[str, Any] = {"statistic": stat, "p_value": pval, "warn": bool(res.warn), "n_answers": res.n_audit}
    if res.parts:  # the tests behind a combined p-value, each by name
        out["tests"] = {k: sig4(v) for k, v in res.parts.items()}
    if res.largest:
        out["largest_component_bias"] = _largest_text(res.largest)
    return out


def _largest_text(largest: tuple[str, float, float]) -> str:
    label, bias, z = largest
    side = "above" if bias > 0 else "below"
    return f"{label}, audits {100 * abs(bias):.1f} points {side} the model's predictions (z {z:.1f})"


TEST_NAMES = {"residual_eigenvalue": "residual pattern", "component_bias": "audit bias by component"}


def _run_check_text(res: MisfitResult) -> str:
    """The run's misfit check in words: one test, or several joined by Bonferroni."""
    named = [(TEST_NAMES.get(k, k), v) for k, v in res.parts.items()]
    if len(named) == 1:
        text = f"this run's answers: {named[0][0]} p = {res.p_value:.3g}"
    elif not named:
        text = f"this run's answers p = {res.p_value:.3g}"
    else:
        each = " and ".join(f"{name} {v:.3g}" for name, v in named)
        text = f"this run's answers p = {res.p_value:.3g} ({len(named)} x the smaller of {each})"
    return text + (f"; largest: {_largest_text(res.largest)}" if res.largest else "")


def _source(sched: Scheduler, mode: str) -> str:
    if sched.use_model:
        return f"{mode}: {sched.params.source}"
    if mode == "file":
        return f"file: {sched.params.source} (misfit: not used to choose questions; sampled at random)"
    return "none (sample: no model)"


def run_notes(
    sched: Scheduler, items: Sequence[str], mode: str, calibration_written: str | None, calibration_note: str = ""
) -> tuple[dict[str, Any], list[str]]:
    """The diagnostics block and the warnings of a finished run."""
    warnings: list[str] = []
    if sched.misfit_warning:
        parts = []
        if sched.calibration_fit is not None and sched.calibration_fit.warn:
            parts.append(f"calibration data p = {sched.calibration_fit.p_value:.3g}")
        if sched.misfit is not None and sched.misfit.warn:
            parts.append(_run_check_text(sched.misfit))
        if sched.calibration_fit is not None and sched.calibration_fit.warn and not sched.use_model:
            what = MISFIT_SAMPLED
        else:
            what = MISFIT_KEPT if sched.use_model else MISFIT_NO_MODEL
        warnings.append(f"MISFIT: {MISFIT_WARNING} ({'; '.join(parts)}): {what}")
    failed = {sched.pipelines[p]: int(n) for p, n in enumerate(sched.n_failed) if n > 0}
    for pid, n in failed.items():
        p = sched.pipelines.index(pid)
        warnings.append(
            f"failed requests: {pid}: {n} of {int(sched.n_asked[p])} "
            "(missing, never counted wrong; a rerun retries them)"
        )
    neg = [items[int(i)] for i in np.flatnonzero(sched.excluded)]
    if neg:
        shown = ", ".join(neg[:10]) + (f" and {len(neg) - 10} more" if len(neg) > 10 else "")
        warnings.append(
            f"{len(neg)} question(s) with negative discrimination in the calibration (mis-keyed?) were never "
            f"chosen by the model (the audit may still ask them): {shown}"
        )
    if sched.calibration_fit is None and mode == "file":
        warnings.append(
            "the calibration file's responses were not found: the dimensionality check on the calibration data "
            "did not run (only this run's answers were checked)"
        )
    if calibration_note:
        warnings.append(calibration_note)
    res = sched.results()
    ranked = sorted((r for r in res if not math.isnan(r["p_best"])), key=lambda r: -r["p_best"])
    decision: dict[str, Any] = {}
    if ranked:
        top = ranked[0]
        decision = {"leader": top["pipeline"], "p_best": round(top["p_best"], 4)}
        if top["p_best"] < 0.95 and len(ranked) > 1:
            others = ", ".join(f"{r['pipeline']} {r['p_best']:.0%}" for r in ranked[1:4] if r["p_best"] >= 0.01)
            warnings.append(
                f"not decided: the leader {top['pipeline']} is the best with probability {top['p_best']:.0%}"
                + (f" (then {others})" if others else "")
                + "; a larger --budget narrows the intervals"
            )
    diag = {
        "estimate_basis": "audit" if sched.design_only else "model+audit",
        "misfit_warning": bool(sched.misfit_warning),
        "misfit_check_calibration": _check(sched.calibration_fit),
        "misfit_check_run": _check(sched.misfit),
        "audit_bias_sd": round(sched.tau, 5),
        "audit_answers": int((sched.audit & (sched.y >= 0)).sum()),
        "failed_requests": failed,
        "negative_discrimination_items": neg,
        "calibration_written": calibration_written,
        "calibration_source": _source(sched, mode),
        "decision": decision,
    }
    return diag, warnings


__all__ = ["MISFIT_KEPT", "MISFIT_NO_MODEL", "MISFIT_SAMPLED", "MISFIT_WARNING", "run_notes"]
