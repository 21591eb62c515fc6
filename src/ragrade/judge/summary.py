"""Per-configuration summaries and metric agreement, computed from score records only.

Every statistic says how many answers it used and how many were ``unparsed``,
``failed`` or ``skipped``: means are over ``ok`` records, and the counts make
the denominators visible. Intervals are 95%: Wilson for 0/1 rates, percentile
bootstrap (seeded) for means.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragrade.io import JSONObject
from ragrade.judge.agreement import binarize, cohen_kappa, spearman
from ragrade.judge.claims_metrics import METRICS as CLAIM_METRICS
from ragrade.stats import bootstrap_ci, wilson_interval

SUMMARY_VERSION = 1
STATUSES = ("ok", "unparsed", "failed", "skipped")
CSV_COLUMNS = (
    "schema_version",
    "config",
    "metric",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "n_used",
    "n_items",
    "n_ok",
    "n_unparsed",
    "n_failed",
    "n_skipped",
)
# metric -> statistics (name, how to read the value from a record, binary?)
_STATS: dict[str, list[tuple[str, str, bool]]] = {
    "bertscore": [
        ("f1", "values.f1", False),
        ("precision", "values.precision", False),
        ("recall", "values.recall", False),
    ],
    "exact": [("em", "values.em", True), ("f1", "values.f1", False)],
    "correctness": [("mean", "score", False)],
    "faithfulness": [("rate", "score", True)],
    "relevancy": [("rate", "score", True)],
    "claims": [(m, f"values.{m}", False) for m in sorted(CLAIM_METRICS, key=lambda m: m != "f1")],  # f1 first
}


def _read(rec: Mapping[str, object], path: str) -> float | None:
    cur: Any = rec
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return None if cur is None else float(cur)


def _interval(values: Sequence[float], binary: bool, n_boot: int, seed: int) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    if binary and all(v in (0.0, 1.0) for v in values):
        return wilson_interval(int(sum(values)), len(values))
    if len(values) < 2:
        return None, None  # a bootstrap of one value says nothing
    low, high = bootstrap_ci(values, n_boot=n_boot, seed=seed)
    return low, high


def _stat_row(name: str, values: list[float], binary: bool, n_boot: int, seed: int) -> JSONObject:
    low, high = _interval(values, binary, n_boot, seed)
    return {
        "statistic": name,
        "value": float(np.mean(values)) if values else None,
        "ci_low": low,
        "ci_high": high,
        "n_used": len(values),
    }


def summarise_metric(
    metric: str, records: Sequence[Mapping[str, Any]], *, pass_threshold: float = 4.0, n_boot: int = 2000, seed: int = 0
) -> JSONObject:
    """Counts, statistics with 95% intervals, and self-consistency spread of one metric in one configuration."""
    counts = {f"n_{s}": sum(1 for r in records if r.get("status") == s) for s in STATUSES}
    ok = [r for r in records if r.get("status") == "ok"]
    out: dict[str, Any] = {"n_items": len(records), **counts}
    reasons: dict[str, int] = defaultdict(int)
    for r in records:
        if r.get("status") == "skipped":
            reasons[str(r.get("skip_reason"))] += 1
    if reasons:
        out["skip_reasons"] = dict(sorted(reasons.items()))
    if metric == "claims":  # abstaining answers: no claims, left out of the means over answer claims
        out["n_abstained"] = sum(1 for r in ok if r.get("abstained"))
    stats = []
    for name, path, binary in _STATS.get(metric, [("mean", "score", False)]):
        values = [v for v in (_read(r, path) for r in ok) if v is not None]
        stats.append(_stat_row(name, values, binary, n_boot, seed))
    if metric == "correctness":
        scores = [float(r["score"]) for r in ok if r.get("score") is not None]
        stats.append(
            _stat_row(
                f"pass_rate_ge_{pass_threshold:g}",
                binarize(scores, pass_threshold),  # type: ignore[arg-type]
                True,
                n_boot,
                seed,
            )
        )
    out["statistics"] = stats
    samples = [r for r in records if r.get("n_samples")]
    if samples:
        out["samples"] = {f"n_{s}": int(sum(r.get(f"n_{s}", 0) for r in samples)) for s in ("ok", "unparsed", "failed")}
        out["samples"]["n_total"] = int(sum(r["n_samples"] for r in samples))
        spreads = [r["spread"] for r in ok if isinstance(r.get("spread"), Mapping)]
        if spreads:
            key = "std" if "std" in spreads[0] else "agreement"
            vals = [float(s[key]) for s in spreads if s.get(key) is not None]
            out["self_consistency"] = {
                "measure": key,
                "mean": float(np.mean(vals)) if vals else None,
                "n": len(vals),
                "unanimous_share": float(
                    np.mean(
                        [(s.get("std", 1.0) == 0.0) if key == "std" else (s.get("agreement") == 1.0) for s in spreads]
                    )
                ),
            }
    return out


def group_records(records: Iterable[Mapping[str, object]]) -> dict[str, dict[str, list[Mapping[str, object]]]]:
    """``{config: {metric: [records]}}``."""
    out: dict[str, dict[str, list[Mapping[str, object]]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        out[str(r["config"])][str(r["metric"])].append(r)
    return {c: dict(m) for c, m in sorted(out.items())}


def summarise(
    records: Sequence[Mapping[str, object]], *, pass_threshold: float = 4.0, n_boot: int = 2000, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """``{config: {metric: summary}}`` over every configuration and metric present."""
    return {
        config: {
            metric: summarise_metric(metric, recs, pass_threshold=pass_threshold, n_boot=n_boot, seed=seed)
            for metric, recs in sorted(metrics.items())
        }
        for config, metrics in group_records(records).items()
    }


def csv_rows(summary: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[JSONObject]:
    """Long-format rows (one per config x metric x statistic) for ``summary.csv``."""
    rows = []
    for config, metrics in summary.items():
        for metric, s in metrics.items():
            for st in s["statistics"]:
                rows.append(
                    {
                        "schema_version": SUMMARY_VERSION,
                        "config": config,
                        "metric": metric,
                        "statistic": st["statistic"],
                        "value": st["value"],
                        "ci_low": st["ci_low"],
                        "ci_high": st["ci_high"],
                        "n_used": st["n_used"],
                        "n_items": s["n_items"],
                        "n_ok": s["n_ok"],
                        "n_unparsed": s["n_unparsed"],
                        "n_failed": s["n_failed"],
                        "n_skipped": s["n_skipped"],
                    }
                )
    return rows


def _aligned(
    by_metric: Mapping[str, list[Mapping[str, object]]], a: tuple[str, str], b: tuple[str, str]
) -> tuple[list[float | None], list[float | None]]:
    def table(metric: str, path: str) -> dict[str, float | None]:
        return {str(r["id"]): (_read(r, path) if r.get("status") == "ok" else None) for r in by_metric.get(metric, [])}

    ta, tb = table(*a), table(*b)
    ids = sorted(set(ta) & set(tb))
    return [ta[i] for i in ids], [tb[i] for i in ids]


def agreement(records: Sequence[Mapping[str, object]], *, pass_threshold: float = 4.0) -> JSONObject:
    """Spearman and Cohen's kappa between metrics, per configuration and over all answers.

    - ``spearman_bertscore_correctness``: BERTScore F1 vs judge correctness;
    - ``spearman_tokenf1_correctness``: token F1 vs judge correctness;
    - ``kappa_correctness_exact``: correctness >= threshold (binarised) vs exact match.
    """
    groups = group_records(records)
    pooled: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for config, metrics in groups.items():
        for metric, recs in metrics.items():
            pooled[metric].extend({**r, "id": f"{config}\x1f{r['id']}"} for r in recs)

    def one(by_metric: Mapping[str, list[Mapping[str, object]]]) -> JSONObject:
        out: JSONObject = {}
        if "correctness" in by_metric and "bertscore" in by_metric:
            out["spearman_bertscore_correctness"] = spearman(
                *_aligned(by_metric, ("bertscore", "values.f1"), ("correctness", "score"))
            )
        if "correctness" in by_metric and "exact" in by_metric:
            out["spearman_tokenf1_correctness"] = spearman(
                *_aligned(by_metric, ("exact", "values.f1"), ("correctness", "score"))
            )
            judge, em = _aligned(by_metric, ("correctness", "score"), ("exact", "values.em"))
            out["kappa_correctness_exact"] = {
                **cohen_kappa(binarize(judge, pass_threshold), em),
                "threshold": pass_threshold,
            }
        return out

    return {
        "version": SUMMARY_VERSION,
        "kind": "judge_agreement",
        "pass_threshold": pass_threshold,
        "all": one(pooled),
        "configs": {c: one(m) for c, m in groups.items()},
    }


__all__ = ["CSV_COLUMNS", "SUMMARY_VERSION", "agreement", "csv_rows", "group_records", "summarise", "summarise_metric"]
