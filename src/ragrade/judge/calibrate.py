"""``ragrade judge calibrate``: how far to believe a judge, from a few hundred human labels.

Reads a judge output (``scores.jsonl``, or its folder) or an exam file and a
labels file (one ``{"id", "metric", "label"}`` object per line, ``label`` on
the metric's own scale, as ``ragrade label`` exports it). For every metric and
configuration with labels it writes, to ``DIR/calibration.json``:

- ``ppi_estimate`` / ``ppi_ci``: the PPI++ estimate of the mean a human would
  give over *all* judged items (:mod:`ragrade.judge.ppi`);
- ``human_mean`` / ``human_only_ci``: the classical estimate from the labels alone;
- ``judge_mean`` / ``judge_ci``: the uncorrected judge mean over all items;
- ``bias`` (judge minus human on the labelled items, with its interval) and
  agreement (accuracy and Cohen's kappa for yes/no scales; exact and within-one
  accuracy, kappa and Spearman for 1-5; Spearman and mean absolute error for
  0-1 scores).

Labels must be a uniform random sample of each configuration's items (the
labelling page samples so). An exam file is read as metric ``validity``: every
question the generator kept counts as judged valid (1), and the labels (1 valid,
0 not) give the corrected share of valid questions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ragrade.errors import DataError
from ragrade.io import JSONObject, file_in_folder, iter_jsonl, read_jsonl, write_json
from ragrade.judge.agreement import cohen_kappa, spearman
from ragrade.judge.ppi import classical_mean, combine_strata, estimate

CALIBRATION_FILE = "calibration.json"
CALIBRATION_KIND = "judge_calibration"
CALIBRATION_VERSION = 1
EXAM_METRIC = "validity"
EXAM_CONFIG = "exam"


@dataclass(frozen=True)
class Scale:
    """A metric's human scale: ``binary`` (0/1), ``ordinal`` (whole numbers low-high) or ``continuous``."""

    kind: Literal["binary", "ordinal", "continuous"]
    low: float
    high: float

    def check(self, value: object) -> float | None:
        """The label as a number, or None when it is not on this scale."""
        if isinstance(value, bool):
            value = float(value) if self.kind == "binary" else None
        if not isinstance(value, (int, float)) or value != value:
            return None
        v = float(value)
        if not self.low <= v <= self.high:
            return None
        if self.kind in ("binary", "ordinal") and v != round(v):
            return None
        return v

    def describe(self) -> str:
        """``0/1``, ``1-5`` or ``0-1 (any number)``."""
        if self.kind == "binary":
            return "0/1"
        if self.kind == "ordinal":
            return f"{self.low:g}-{self.high:g} (whole numbers)"
        return f"{self.low:g}-{self.high:g} (any number)"


SCALES: dict[str, Scale] = {
    "correctness": Scale("ordinal", 1, 5),
    "faithfulness": Scale("binary", 0, 1),
    "relevancy": Scale("binary", 0, 1),
    "exact": Scale("binary", 0, 1),
    "bertscore": Scale("continuous", 0, 1),
    "claims": Scale("continuous", 0, 1),
    EXAM_METRIC: Scale("binary", 0, 1),
}


class CalibrationConfig(BaseModel):
    """Options of ``ragrade judge calibrate`` (or a ``[calibration]`` table of a job config)."""

    model_config = ConfigDict(extra="forbid")

    human: str | None = None  # the labels file
    level: float = Field(0.95, gt=0.5, lt=1.0)
    min_labels: int = Field(10, ge=2)


@dataclass
class ScoreTable:
    """Judged items of one scores (or exam) file: ``scores[metric][(config, id)] = score`` (None: not ok)."""

    path: Path
    kind: str
    scores: dict[str, dict[tuple[str, str], float | None]] = field(default_factory=dict)
    label_ids: dict[str, tuple[str, str]] = field(default_factory=dict)

    def configs(self, metric: str) -> list[str]:
        """Configurations holding records of ``metric``."""
        return sorted({c for c, _ in self.scores.get(metric, {})})


def resolve_scores_path(path: str | Path) -> Path:
    """A judge output folder means its ``scores.jsonl``; anything else must be a file."""
    return file_in_folder(path, "scores.jsonl", "give a judge output directory or its scores file")


def label_id(config: str, item_id: str, unique: bool) -> str:
    """The id a label names: the answer id when no other configuration uses it, else ``config::id``."""
    return item_id if unique else f"{config}::{item_id}"


def _index_ids(table: ScoreTable) -> None:
    keys = {k for by_key in table.scores.values() for k in by_key}
    count: dict[str, int] = defaultdict(int)
    for _, item_id in keys:
        count[item_id] += 1
    for config, item_id in keys:
        table.label_ids[f"{config}::{item_id}"] = (config, item_id)
        if count[item_id] == 1:
            table.label_ids[item_id] = (config, item_id)


def load_scores(path: str | Path) -> ScoreTable:
    """Read a judge ``scores.jsonl`` (or folder) or an exam file; DataError naming a missing field."""
    p = resolve_scores_path(path)
    header, records = read_jsonl(p)
    kind = header.kind if header is not None else "judge_scores"
    table = ScoreTable(p, kind)
    if kind == "exam":
        for n, rec in enumerate(records, start=2 if header else 1):
            if "id" not in rec:
                raise DataError(f"{p}:{n}: exam question without the field 'id'")
            table.scores.setdefault(EXAM_METRIC, {})[(EXAM_CONFIG, str(rec["id"]))] = 1.0
    elif kind == "judge_scores":
        for n, rec in enumerate(records, start=2 if header else 1):
            for need in ("config", "id", "metric", "status"):
                if need not in rec:
                    raise DataError(f"{p}:{n}: score record without the field '{need}'")
            ok = rec["status"] == "ok"
            if ok and "score" not in rec:
                raise DataError(f"{p}:{n}: an ok score record without the field 'score'")
            score = rec.get("score") if ok else None
            table.scores.setdefault(str(rec["metric"]), {})[(str(rec["config"]), str(rec["id"]))] = (
                None if score is None else float(score)
            )
    else:
        raise DataError(f"{p}: a '{kind}' file; calibrate reads a judge scores.jsonl (or its folder) or an exam file")
    if not table.scores:
        raise DataError(f"{p}: no judged items")
    _index_ids(table)
    return table


@dataclass
class Label:
    """One human label and where it was read."""

    key: tuple[str, str]
    value: float
    line: int


def read_labels(path: str | Path, table: ScoreTable, *, min_labels: int = 10) -> dict[str, dict[str, list[Label]]]:
    """``{metric: {config: [Label]}}``, every line checked; DataError naming ``file:line`` otherwise."""
    p = Path(path)
    out: dict[str, dict[str, list[Label]]] = defaultdict(lambda: defaultdict(list))
    seen: dict[tuple[str, str, str], int] = {}
    for line, rec in iter_jsonl(p):
        if line == 1 and len(rec) == 1 and isinstance(rec.get("ragrade"), dict):
            continue
        for need in ("id", "metric", "label"):
            if need not in rec:
                raise DataError(
                    f'{p}:{line}: a label without the field \'{need}\' (expected {{"id", "metric", "label"}})'
                )
        metric, raw_id = str(rec["metric"]), str(rec["id"])
        if metric not in table.scores:
            raise DataError(
                f"{p}:{line}: metric '{metric}' is not in {table.path} (judged: {', '.join(sorted(table.scores))})"
            )
        key = table.label_ids.get(raw_id)
        if key is None or key not in table.scores[metric]:
            raise DataError(f"{p}:{line}: unknown id '{raw_id}' (no {metric} item with that id in {table.path})")
        scale = SCALES.get(metric, Scale("continuous", -np.inf, np.inf))
        value = scale.check(rec["label"])
        if value is None:
            raise DataError(f"{p}:{line}: label {rec['label']!r} is outside the {metric} scale {scale.describe()}")
        dup = (metric, *key)
        if dup in seen:
            raise DataError(
                f"{p}:{line}: duplicate label for id '{raw_id}', metric '{metric}' (first on line {seen[dup]})"
            )
        seen[dup] = line
        out[metric][key[0]].append(Label(key, value, line))
    if not seen:
        raise DataError(f"{p}: no labels")
    for metric, by_config in out.items():
        for config, labels in by_config.items():
            if len(labels) < min_labels:
                lines = ", ".join(str(lab.line) for lab in labels[:8]) + (", ..." if len(labels) > 8 else "")
                raise DataError(
                    f"{p}:{labels[-1].line}: only {len(labels)} {metric} label(s) for configuration '{config}' "
                    f"(lines {lines}); calibration needs at least {min_labels} per configuration ($min_labels)"
                )
    return {m: dict(c) for m, c in out.items()}


def agreement_for(scale: Scale, judge: Sequence[float], human: Sequence[float]) -> JSONObject:
    """Judge-human agreement on the labelled items, as fits the scale."""
    f, y = np.asarray(judge, float), np.asarray(human, float)
    if scale.kind == "binary":
        fb = (f >= 0.5).astype(float)
        return {"accuracy": float(np.mean(fb == y)), "kappa": cohen_kappa(list(fb), list(y))["kappa"], "n": len(y)}
    if scale.kind == "ordinal":
        fr = np.clip(np.round(f), scale.low, scale.high)
        return {
            "accuracy": float(np.mean(fr == y)),
            "within_one": float(np.mean(np.abs(fr - y) <= 1)),
            "kappa": cohen_kappa(list(fr), list(y))["kappa"],
            "spearman": spearman(list(f), list(y))["rho"],
            "n": len(y),
        }
    return {"spearman": spearman(list(f), list(y))["rho"], "mae": float(np.mean(np.abs(f - y))), "n": len(y)}


def calibrate_one(
    metric: str, judged: Mapping[tuple[str, str], float | None], labels: Sequence[Label], *, level: float
) -> dict[str, Any]:
    """PPI++, human-only and judge-only estimates, bias and agreement for one metric in one configuration."""
    scale = SCALES.get(metric, Scale("continuous", -np.inf, np.inf))
    labelled = {lab.key: lab.value for lab in labels}
    pairs = [(labelled[k], judged[k]) for k in labelled if judged.get(k) is not None]
    y = np.array([p[0] for p in pairs], float)
    f = np.array([p[1] for p in pairs], float)
    fu = np.array([v for k, v in judged.items() if v is not None and k not in labelled], float)
    row: JSONObject = {
        "scale": scale.kind,
        "n_items": len(judged),
        "n_judged": int(sum(v is not None for v in judged.values())),
        "n_labels_without_judge_score": len(labelled) - len(pairs),
    }
    if len(pairs) < 2:
        row.update(n_labels=len(pairs), note="fewer than 2 labelled items carry a judge score")
        return row
    if fu.size >= 2:
        est = estimate(y, f, fu, level=level).to_dict()
    else:  # every judged item is labelled: the human mean is all there is
        hm, hlo, hhi = classical_mean(y, level=level)
        jm, jlo, jhi = classical_mean(f, level=level)
        est = {
            "n_labels": len(y),
            "n_unlabeled": int(fu.size),
            "ppi_estimate": float(hm),
            "ppi_ci": [float(hlo), float(hhi)],
            "lambda": 0.0,
            "human_mean": float(hm),
            "human_only_ci": [float(hlo), float(hhi)],
            "judge_mean": float(jm),
            "judge_ci": [float(jlo), float(jhi)],
            "note": "every judged item is labelled: the estimate is the human mean",
        }
    bias, blo, bhi = classical_mean(f - y, level=level)
    lo, hi = est["ppi_ci"]
    row.update(est)
    row.update(
        bias=float(bias),
        bias_ci=[float(blo), float(bhi)],
        judge_outside_ppi_ci=not lo <= est["judge_mean"] <= hi,
        agreement=agreement_for(scale, f.tolist(), y.tolist()),
    )
    return row


def _pooled(rows: Mapping[str, Mapping[str, Any]], configs: Sequence[str], level: float) -> JSONObject:
    missing = [c for c in configs if "ppi_ci" not in rows.get(c, {})]
    if missing:
        return {"note": f"no calibration for configuration(s) {', '.join(missing)}: no pooled estimate"}
    out: JSONObject = {"n_labels": sum(int(rows[c]["n_labels"]) for c in configs)}
    for est_key, ci_key in (("ppi_estimate", "ppi_ci"), ("human_mean", "human_only_ci"), ("judge_mean", "judge_ci")):
        parts = [(rows[c][est_key], *rows[c][ci_key], float(rows[c]["n_judged"])) for c in configs]
        pooled = combine_strata(parts, level=level)
        out[est_key] = pooled["estimate"]
        out[ci_key] = pooled["ci"]
    out["weights"] = "configurations weighted by their number of judged items"
    return out


def calibrate(scores: str | Path, labels_path: str | Path, cfg: CalibrationConfig | None = None) -> dict[str, object]:
    """The calibration of every labelled metric (see the module docstring)."""
    cfg = cfg or CalibrationConfig.model_validate({})
    table = load_scores(scores)
    labels = read_labels(labels_path, table, min_labels=cfg.min_labels)
    metrics: dict[str, object] = {}
    for metric, by_config in sorted(labels.items()):
        configs = table.configs(metric)
        rows = {}
        for config in configs:
            judged = {k: v for k, v in table.scores[metric].items() if k[0] == config}
            rows[config] = (
                calibrate_one(metric, judged, by_config[config], level=cfg.level)
                if config in by_config
                else {"n_labels": 0, "n_items": len(judged), "note": "no labels"}
            )
        metrics[metric] = {
            "scale": SCALES.get(metric, Scale("continuous", -np.inf, np.inf)).describe(),
            "configs": rows,
            "all": _pooled(rows, configs, cfg.level),
        }
    return {
        "kind": CALIBRATION_KIND,
        "version": CALIBRATION_VERSION,
        "scores": str(table.path),
        "labels": str(labels_path),
        "level": cfg.level,
        "method": "PPI++ (power-tuned, lambda clipped to [0, 1]); human-only and judge intervals are normal (CLT)",
        "metrics": metrics,
    }


def run_calibration(
    scores: str | Path, labels_path: str | Path, out_dir: str | Path, cfg: CalibrationConfig | None = None
) -> dict[str, Any]:
    """Validate everything, then write ``out_dir/calibration.json``; returns its content."""
    result = calibrate(scores, labels_path, cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / CALIBRATION_FILE, result)
    return result


__all__ = [
    "CALIBRATION_FILE",
    "SCALES",
    "CalibrationConfig",
    "Scale",
    "ScoreTable",
    "agreement_for",
    "calibrate",
    "calibrate_one",
    "label_id",
    "load_scores",
    "read_labels",
    "resolve_scores_path",
    "run_calibration",
]
