"""Iterative exam improvement: drop the least discriminative items, refit, repeat.

Each round removes the ``drop`` fraction (0.1 = the 10th percentile, not the
0.1th) of the current items with the lowest discrimination, then refits
warm-started from the previous estimates matched by question id, so response
columns and parameters can never be misaligned. Every step records the items
kept and dropped, the fit, and the information curves on one fixed theta grid.

Each refit sets its own ability scale (the priors standardise whatever items
remain), so information curves of two steps are not comparable as fitted: a
step that keeps only the better items can look *less* informative. Every step
is therefore also linked to the scale of the first fit by the mean/mean method
on the items it kept (all of which the first fit estimated):
``A = mean(d_s) / mean(d_0)``, ``B = mean(b_0) - A mean(b_s)``, then
``theta* = A theta + B``, ``b* = A b + B``, ``d* = d / A`` (the likelihood is
unchanged). The ``linked`` record of each step holds the constants, the linked
curves, and the mean item information at the pipelines' own (linked)
abilities, the improvement the step really makes for these pipelines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragrade.errors import ConfigError, DataError
from ragrade.io import JSONObject, now_iso, write_json
from ragrade.irt import information as info
from ragrade.irt.fit import FitConfig, fit_responses
from ragrade.irt.io import Responses, groups_from_tags
from ragrade.irt.result import IRTResult

FIT_KEYS = (
    "log_likelihood",
    "aic",
    "bic",
    "rmse",
    "rmse_baseline",
    "converged",
    "iterations",
    "max_step_in_se",
    "time_s",
)


@dataclass
class Improvement:
    """The evolution of an iterative improvement and the final fit."""

    steps: list[dict[str, Any]]
    final: IRTResult
    grid: list[float]
    drop: float
    kept: list[str] = field(default_factory=list)

    def to_dict(self) -> JSONObject:
        """The evolution document (kind ``irt-improve``, version 1)."""
        return {
            "kind": "irt-improve",
            "version": 1,
            "created": now_iso(),
            "drop": self.drop,
            "rule": "each round drops the floor(drop * n) items (at least 1) with the lowest discrimination; "
            "ties broken by question id",
            "theta_grid": self.grid,
            "linking": "each step's linked record is on the scale of step 0 (mean/mean on the kept items); "
            "compare information across steps there, not in information_mean (each refit's own scale)",
            "steps": self.steps,
            "kept": self.kept,
        }


def _n_drop(n: int, drop: float) -> int:
    return max(1, math.floor(drop * n + 1e-9))


def check_drop(drop: float, steps: int) -> None:
    """Validate the drop fraction and the number of rounds."""
    if not 0.0 < drop < 1.0:
        hint = f" (for {drop:g}% pass {drop / 100:g})" if 1.0 <= drop < 100.0 else ""
        raise ConfigError(f"$drop is a fraction in (0, 1), got {drop:g}{hint}")
    if steps < 0:
        raise ConfigError(f"$steps must be >= 0, got {steps}")


def _step_record(
    step: int,
    res: IRTResult,
    grid: np.ndarray,
    groups_tags: dict[str, Any],
    dropped: list[str],
    threshold: float | None,
) -> JSONObject:
    d, b, g = res.discrimination, res.difficulty, res.guessing
    groups = groups_from_tags(res.items, groups_tags)
    return {
        "step": step,
        "n_items": len(res.items),
        "dropped": dropped,
        "drop_threshold_discrimination": threshold,
        "fit": {k: res.fit.get(k) for k in FIT_KEYS},
        "discrimination": {"mean": float(d.mean()), "median": float(np.median(d)), "min": float(d.min())},
        "information_mean": info.mean_information(grid, d, b, g).round(6).tolist(),
        "information_test": info.test_information(grid, d, b, g).round(6).tolist(),
        "information_groups": info.grouped_information(grid, d, b, g, groups),
        "abilities": dict(zip(res.pipelines, np.round(res.theta, 6).tolist(), strict=True)),
    }


def link_to_reference(res: IRTResult, ref: IRTResult) -> tuple[float, float]:
    """Mean/mean linking constants ``(A, B)`` that put ``res`` on the scale of ``ref`` (common items)."""
    pos = {item: i for i, item in enumerate(ref.items)}
    common = [(j, pos[item]) for j, item in enumerate(res.items) if item in pos]
    if not common:
        return 1.0, 0.0
    js, ks = (np.array(v) for v in zip(*common, strict=True))
    A = float(res.discrimination[js].mean() / ref.discrimination[ks].mean())
    B = float(ref.difficulty[ks].mean() - A * res.difficulty[js].mean())
    return A, B


def _linked_record(res: IRTResult, ref: IRTResult, grid: np.ndarray) -> JSONObject:
    A, B = link_to_reference(res, ref)
    d, b, g = res.discrimination / A, A * res.difficulty + B, res.guessing
    theta = A * res.theta + B
    at_abilities = float(info.item_information(theta, d, b, g).mean())
    return {
        "method": "mean/mean on the kept items against step 0",
        "A": A,
        "B": B,
        "information_mean": info.mean_information(grid, d, b, g).round(6).tolist(),
        "information_test": info.test_information(grid, d, b, g).round(6).tolist(),
        "mean_information_at_abilities": at_abilities,
    }


def improve(
    data: Responses,
    cfg: FitConfig | None = None,
    *,
    steps: int = 4,
    drop: float = 0.1,
    tags: dict[str, JSONObject] | None = None,
    min_items: int = 5,
) -> Improvement:
    """Run ``steps`` drop-and-refit rounds after an initial fit (the paper's k = steps + 1 exams)."""
    cfg = cfg or FitConfig()
    check_drop(drop, steps)
    tags = tags or {}
    res = fit_responses(data, cfg)
    grid = res.theta_grid()
    first = res
    records = [_step_record(0, res, grid, tags, [], None)]
    records[0]["linked"] = _linked_record(res, first, grid)
    current = data
    for step in range(1, steps + 1):
        n = len(current.items)
        k = _n_drop(n, drop)
        if n - k < min_items:
            records[-1]["stopped"] = f"dropping {k} more items would leave fewer than {min_items}"
            break
        # order by discrimination, ties by id: deterministic
        order = sorted(range(n), key=lambda i: (res.discrimination[i], current.items[i]))
        drop_idx = set(order[:k])
        threshold = float(res.discrimination[order[k - 1]])
        keep = [i for i in range(n) if i not in drop_idx]
        dropped = [current.items[i] for i in order[:k]]
        current = current.subset_items(keep)
        res = fit_responses(current, cfg, init=res)
        if res.items != current.items:  # pragma: no cover - guarded by construction
            raise DataError("internal error: item labels and parameters are misaligned")
        records.append(_step_record(step, res, grid, tags, dropped, threshold))
        records[-1]["linked"] = _linked_record(res, first, grid)
    res.tags = tags
    return Improvement(records, res, grid.round(6).tolist(), drop, list(res.items))


def write_improvement(
    imp: Improvement, out_dir: str | Path, exam_path: str | Path | None, data: Responses
) -> JSONObject:
    """Write the improved exam (when the exam is known), the evolution and the final irt.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary: JSONObject = {
        "out_dir": str(out),
        "n_items_start": imp.steps[0]["n_items"],
        "n_items_end": len(imp.kept),
        "steps": len(imp.steps) - 1,
    }
    doc = imp.to_dict()
    if exam_path:
        from ragrade.exam.files import read_exam, write_exam

        header, questions = read_exam(exam_path)
        keep = set(imp.kept)
        in_responses = set(data.items)
        kept_q = [q for q in questions if q.id in keep]
        meta = dict(header.meta) if header else {}
        meta.pop("package_version", None)
        meta["irt_improve"] = {
            "source_exam": str(exam_path),
            "drop": imp.drop,
            "steps": len(imp.steps) - 1,
            "n_items_start": imp.steps[0]["n_items"],
            "n_items_end": len(kept_q),
        }
        exam_out = out / "exam.improved.jsonl"
        write_exam(exam_out, kept_q, meta=meta)
        doc["exam"] = {
            "source": str(exam_path),
            "improved": exam_out.name,
            "n_written": len(kept_q),
            "n_exam_without_responses": sum(1 for q in questions if q.id not in in_responses),
            "n_responses_without_exam_question": len(in_responses - {q.id for q in questions}),
        }
        summary["exam"] = str(exam_out)
    else:
        doc["exam"] = None
    fitted = Path(data.source) / "responses.parquet" if data.source and Path(data.source).is_dir() else None
    if fitted is None and data.source and Path(data.source).is_file():
        fitted = Path(data.source)
    if fitted is not None and fitted.is_file():  # what the improvement was computed from (ragrade.provenance)
        from ragrade.provenance import source_record

        doc["responses"] = imp.final.responses = source_record(fitted)
    write_json(out / "irt_improve.json", doc)
    imp.final.exam_path = str(exam_path) if exam_path else None
    imp.final.write(out / "irt.json")
    summary["evolution"] = str(out / "irt_improve.json")
    return summary


__all__ = ["Improvement", "check_drop", "improve", "link_to_reference", "write_improvement"]
