"""The layout of a written fit: a small ``irt.json`` plus columnar per-item and CSV tables next to it.

The document itself is built by :func:`ragrade.irt.result.result_doc` and written by
:func:`ragrade.irt.result.write_result` (``IRTResult.write``); this module holds its constants
and the record, summary and table helpers they use.

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
from typing import Any

import numpy as np
import pandas as pd

from ragrade.io import JSONObject, atomic_write_bytes

IRT_KIND = "irt"
IRT_VERSION = 2
ITEMS_INLINE_MAX = 2000
PARAM_COLUMNS = ("discrimination", "difficulty", "guessing")


def num(v: object) -> Any:
    """A JSON-friendly number: rounded float (None for NaN/inf), int, or the value itself."""
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else round(float(v), 6)
    if isinstance(v, np.integer):
        return int(v)
    return v


def clean(rec: dict[object, object]) -> JSONObject:
    """A record with JSON-friendly numbers."""
    return {str(k): num(v) for k, v in rec.items()}


def records(df: pd.DataFrame, key: str) -> dict[str, JSONObject]:
    return {str(r.pop(key)): clean(r) for r in df.to_dict("records")}


def items_summary(items: pd.DataFrame) -> JSONObject:
    """Quantiles of the item parameters (what a reader wants when the items are not inline)."""
    out: JSONObject = {"n_items": len(items)}
    for col in (*PARAM_COLUMNS, "se_difficulty", "p_value"):
        v = items[col].to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size:
            q = np.quantile(v, [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0])
            out[col] = dict(zip(("min", "p05", "p25", "median", "p75", "p95", "max"), map(num, q), strict=True))
    return out


def csv_ready(df: pd.DataFrame) -> pd.DataFrame:
    """A copy with list cells joined by ``|``, for CSV."""
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
    "csv_ready",
    "info_long",
    "items_summary",
    "num",
    "write_parquet",
]
