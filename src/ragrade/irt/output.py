"""Writing a fit: a small ``irt.json`` plus columnar per-item and CSV tables next to it.

``irt.json`` (kind ``irt``, version 2) holds what a reader needs at a glance: the model, fit
statistics, convergence, identifiability, abilities, factor effects (in logits and as differences in
accuracy on this exam, in percentage points, observed or partly predicted, with intervals), a summary of the item
parameters and the information curves. The per-item table (parameters, SEs, statistics, flags)
is ``<stem>_items.parquet``; it is also inline under ``items`` (and written as
``<stem>_items.csv``) when the exam has at most :data:`ITEMS_INLINE_MAX` questions, as in
version 1. :func:`ragrade.irt.io.load_item_params` reads item parameters from either layout.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ragrade.io import atomic_write_bytes, atomic_write_text, now_iso, write_json

if TYPE_CHECKING:
    from ragrade.irt.result import IRTResult

IRT_KIND = "irt"
IRT_VERSION = 2
ITEMS_INLINE_MAX = 2000
PARAM_COLUMNS = ("discrimination", "difficulty", "guessing")


def num(v: Any) -> Any:
    """A JSON-friendly number: rounded float (None for NaN/inf), int, or the value itself."""
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else round(float(v), 6)
    if isinstance(v, np.integer):
        return int(v)
    return v


def clean(rec: dict[Any, Any]) -> dict[str, Any]:
    """A record with JSON-friendly numbers."""
    return {str(k): num(v) for k, v in rec.items()}


def _records(df: pd.DataFrame, key: str) -> dict[str, dict[str, Any]]:
    return {str(r.pop(key)): clean(r) for r in df.to_dict("records")}


def items_summary(items: pd.DataFrame) -> dict[str, Any]:
    """Quantiles of the item parameters (what a reader wants when the items are not inline)."""
    out: dict[str, Any] = {"n_items": len(items)}
    for col in (*PARAM_COLUMNS, "se_difficulty", "p_value"):
        v = items[col].to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size:
            q = np.quantile(v, [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0])
            out[col] = dict(zip(("min", "p05", "p25", "median", "p75", "p95", "max"), map(num, q), strict=True))
    return out


def effects_doc(res: IRTResult) -> dict[str, Any]:
    """Per factor and level: the effect in logits with its SE and 95% interval, and in percentage points."""
    out: dict[str, Any] = {}
    for f, levels in res.effects.items():
        out[f] = {}
        for lvl, (est, se) in levels.items():
            rec: dict[str, Any] = {"estimate": num(est), "se": num(se)}
            if math.isfinite(se):
                rec["ci95"] = [num(est - 1.96 * se), num(est + 1.96 * se)]
            rec.update({k: num(v) for k, v in res.effects_detail.get(f, {}).get(lvl, {}).items()})
            out[f][lvl] = rec
    return out


def effects_table(res: IRTResult) -> pd.DataFrame:
    """One row per (factor, level): logits with SE and interval, and the accuracy difference in points."""
    rows = []
    for f, levels in effects_doc(res).items():
        for lvl, rec in levels.items():
            ci = rec.get("ci95") or [None, None]
            row = {"factor": f, "level": lvl, "estimate": rec["estimate"], "se": rec["se"]}
            row.update(ci95_low=ci[0], ci95_high=ci[1])
            row.update({k: v for k, v in rec.items() if k not in ("estimate", "se", "ci95")})
            rows.append(row)
    return pd.DataFrame(rows)


def to_dict(res: IRTResult, items: pd.DataFrame | None = None) -> dict[str, Any]:
    """The irt.json document (items inline only for small exams)."""
    from ragrade import __version__

    items = res.items_frame() if items is None else items
    pipes = res.pipelines_frame()
    flag_counts: dict[str, int] = {}
    for flags in items["flags"]:
        for fl in flags:
            flag_counts[fl] = flag_counts.get(fl, 0) + 1
    doc: dict[str, Any] = {
        "kind": IRT_KIND,
        "version": IRT_VERSION,
        "package_version": __version__,
        "created": now_iso(),
        "model": res.model,
        "source": res.source,
        "exam": res.exam_path,
        "config": res.config,
        "counts": res.counts,
        "identifiability": res.identifiability,
        "not_applicable": res.not_applicable,
        "se_method": res.se_method,
        "fit": res.fit,
        "timings_s": {k: round(v, 3) for k, v in res.timings.items()},
        "abilities": _records(pipes, "pipeline"),
        "items_summary": items_summary(items),
        "item_flags": flag_counts,
        "effects": effects_doc(res),
        "effects_units": {
            "estimate": "logits (ability units); the unit is set by the priors / anchoring, see identifiability",
            "accuracy_pp": "how much more accurate, on this exam, in percentage points, the pipelines where the "
            "factor applies are with this level than on average over the factor's levels (other components "
            "as they are): from the observed accuracies of the pipelines with each combination; a combination "
            "absent from the data is predicted (the model moves the pipeline from its level to this one); in a "
            "full factorial, the observed marginal mean minus the grand mean",
            "accuracy_pp_se / accuracy_pp_ci95_low/high": "SE conditional on this exam's questions (observed "
            "part: binomial variance of the responses under the fitted model; predicted part: delta method "
            "from the effect covariance; the SE is the sum of the two, a bound for their correlation) and "
            "accuracy_pp +/- 1.96 SE",
            "accuracy_pp_source": "observed, or partly predicted (k of m cells: predicted combinations of this "
            "level, then over the factor's levels, whose mean every level's value uses; accuracy_pp_cells, "
            "accuracy_pp_cells_predicted: this level's)",
            "se_observed / se_sandwich": "observed-information and robust (questions as units) SEs in logits; "
            "se is the one of se_method (with se_method jackknife: the larger of se_jackknife and se_observed)",
        },
        "information": res.information(),
    }
    if len(items) <= ITEMS_INLINE_MAX:
        doc["items"] = _records(items.copy(), "question_id")
    return doc


def _csv_ready(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for col in df.columns:
        if df[col].dtype == object and df[col].map(lambda v: isinstance(v, list)).any():
            df[col] = df[col].map(lambda v: "|".join(map(str, v)) if isinstance(v, list) else v)
    return df


def write_parquet(path: Path, df: pd.DataFrame) -> None:
    """A DataFrame as Parquet, written atomically."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    atomic_write_bytes(path, buf.getvalue())


def write_result(res: IRTResult, out: str | Path) -> list[Path]:
    """Write irt.json at ``out`` and ``<stem>_items.parquet``, ``<stem>_pipelines.csv`` etc. next to it."""
    out = Path(out)
    stem = out.with_suffix("")
    items = res.items_frame()
    doc = to_dict(res, items)
    paths = [out]
    doc["tables"] = {}
    items_pq = Path(f"{stem}_items.parquet")
    write_parquet(items_pq, items)
    doc["tables"]["items"] = items_pq.name
    paths.append(items_pq)
    tables = {"pipelines": res.pipelines_frame()}
    if "items" in doc:
        tables["items_csv"] = items
    if res.effects:
        tables["effects"] = effects_table(res)
    tables["information"] = info_long(doc["information"])
    for name, df in tables.items():
        path = Path(f"{stem}_{name.removesuffix('_csv')}.csv")
        atomic_write_text(path, _csv_ready(df).to_csv(index=False))
        doc["tables"][name] = path.name
        paths.append(path)
    write_json(out, doc)
    return paths


def info_long(doc: dict[str, Any]) -> pd.DataFrame:
    """The information curves as one long table (grouping, level, theta, mean, sum)."""
    grid = doc["theta_grid"]
    frames = [
        pd.DataFrame(
            {"grouping": "all", "level": "all", "n_items": None, "theta": grid, "mean": doc["mean"], "sum": doc["test"]}
        )
    ]
    for name, levels in doc["groups"].items():
        for level, cur in levels.items():
            frames.append(
                pd.DataFrame(
                    {
                        "grouping": name,
                        "level": level,
                        "n_items": cur["n_items"],
                        "theta": grid,
                        "mean": cur["mean"],
                        "sum": cur["sum"],
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


__all__ = [
    "IRT_KIND",
    "IRT_VERSION",
    "ITEMS_INLINE_MAX",
    "clean",
    "effects_doc",
    "effects_table",
    "info_long",
    "items_summary",
    "num",
    "to_dict",
    "write_parquet",
    "write_result",
]
