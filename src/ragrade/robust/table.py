"""Paper-shaped tables of robustness results: one row per model, one column per noise ratio (or metric).

Each testbed says which cells it contributes (:meth:`ragrade.robust.testbeds.Testbed.table_cells`).
Noise and integration tables also carry, per model and requested ratio, the noise ratio the documents
actually had (``actual_columns``, "actual noise 0.2", ...: a share of documents, 0 to 1), because a short
pool can make "ratio 0" run with noise.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragrade.errors import DataError
from ragrade.io import JSONObject, atomic_write_text, read_json
from ragrade.robust.protocol import get_testbed

TABLE_VERSION = 2  # 2: actual noise ratio columns


def pct(m: Mapping[str, Any] | None) -> float | None:
    """A metric's value as a percentage rounded to 2 decimals (None when not measured)."""
    if not m or m.get("value") is None:
        return None
    return round(100.0 * float(m["value"]), 2)


def table_cells(metrics: Mapping[str, object]) -> dict[str, float | None]:
    """The cells of one run (metrics.json): column label -> percentage (None when not measured); the
    testbed decides its columns."""
    return get_testbed(str(metrics["testbed"])).table_cells(metrics)


def actual_cells(metrics: Mapping[str, object]) -> dict[str, float | None]:
    """Column label -> mean actual noise ratio of the documents shown (testbeds with noise-ratio columns)."""
    return get_testbed(str(metrics["testbed"])).actual_cells(metrics)


def build_table(runs: Sequence[Mapping[str, Any]]) -> JSONObject:
    """Rows (one per model) over the union of columns; prefixed by language when several are mixed.

    All runs must be of one testbed (the paper has one table per testbed).
    """
    if not runs:
        raise DataError("no runs to tabulate")
    testbeds = {r["testbed"] for r in runs}
    if len(testbeds) > 1:
        raise DataError(f"runs of different testbeds cannot share a table: {', '.join(sorted(testbeds))}")
    langs = sorted({r["lang"] for r in runs}, key=lambda x: (x != "en", x))
    columns: list[str] = []
    actual_columns: list[str] = []
    rows: dict[str, JSONObject] = {}
    for lang in langs:
        for run in (r for r in runs if r["lang"] == lang):
            cells = table_cells(run)
            row = rows.setdefault(run["model"], {"model": run["model"]})
            for label, value in cells.items():
                col = f"{lang} {label}" if len(langs) > 1 else label
                if col not in columns:
                    columns.append(col)
                row[col] = value
            for label, value in actual_cells(run).items():
                col = f"actual noise {lang} {label}" if len(langs) > 1 else f"actual noise {label}"
                if col not in actual_columns:
                    actual_columns.append(col)
                row[col] = value
    return {
        "version": TABLE_VERSION,
        "testbed": next(iter(testbeds)),
        "unit": "percent",
        "scoring": sorted({r.get("scoring", "default") for r in runs}),
        "columns": columns,
        "actual_columns": actual_columns,
        "rows": list(rows.values()),
    }


def table_csv(table: Mapping[str, Any]) -> str:
    """The table as CSV text (empty cells where a value was not measured)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    actual = list(table.get("actual_columns") or [])
    writer.writerow(["model", *table["columns"], *actual])
    for row in table["rows"]:
        writer.writerow(
            [
                row["model"],
                *("" if row.get(c) is None else f"{row[c]:.2f}" for c in table["columns"]),
                *("" if row.get(c) is None else f"{row[c]:.3f}" for c in actual),
            ]
        )
    return buf.getvalue()


def render_table(table: Mapping[str, Any]) -> str:
    """A plain-text rendering (fixed-width columns) for the terminal."""
    head = ["model", *table["columns"]]
    actual = {c.removeprefix("actual noise "): c for c in table.get("actual_columns") or []}
    body = []
    for row in table["rows"]:
        body.append([row["model"], *("-" if row.get(c) is None else f"{row[c]:.2f}" for c in table["columns"])])
        if actual:  # the noise share the documents really had, under each requested ratio
            body.append(
                [
                    "  actual noise ratio",
                    *("-" if row.get(actual.get(c, "")) is None else f"{row[actual[c]]:.2f}" for c in table["columns"]),
                ]
            )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    note = "; columns: requested noise ratio" if actual else ""
    lines = [f"{table['testbed']} ({'/'.join(table['scoring'])} scoring, %{note})"]
    for r in (head, *body):
        lines.append(
            "  ".join(
                str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return "\n".join(lines)


def write_table(table: Mapping[str, object], path: str | Path) -> None:
    """Write the CSV form of ``table`` atomically."""
    atomic_write_text(path, table_csv(table))


def load_run_metrics(path: str | Path) -> list[JSONObject]:
    """metrics.json files of a run directory: the file itself, DIR/metrics.json, or DIR/*/metrics.json."""
    p = Path(path)
    files = (
        [p]
        if p.is_file()
        else ([p / "metrics.json"] if (p / "metrics.json").exists() else sorted(p.glob("*/metrics.json")))
    )
    if not files:
        raise DataError(f"{p}: no metrics.json found")
    out = []
    for f in files:
        obj = read_json(f)
        meta = obj.get("ragrade") if isinstance(obj, dict) else None
        if not isinstance(obj, dict) or not isinstance(meta, dict) or meta.get("kind") != "robust_metrics":
            raise DataError(f"{f}: not a robustness metrics file")
        out.append(obj)
    return out


__all__ = [
    "TABLE_VERSION",
    "actual_cells",
    "build_table",
    "load_run_metrics",
    "pct",
    "render_table",
    "table_cells",
    "table_csv",
    "write_table",
]
