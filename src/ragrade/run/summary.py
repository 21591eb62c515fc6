"""The response matrix on disk (responses.parquet) and its summaries (summary.csv, summary_by_tag.csv)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ragrade.io import atomic_write_bytes, atomic_write_text
from ragrade.schemas import RESPONSES_FILE, read_responses
from ragrade.stats import wilson_interval

SUMMARY_FILE = "summary.csv"
SUMMARY_BY_TAG_FILE = "summary_by_tag.csv"
RESPONSES_VERSION = 1
SUMMARY_VERSION = 3  # 2: decision_rule, acc_sum, acc_per_char and ll_source columns; 3: partial (run/partial.py)
# how `correct` was decided (responses' score_norm, or the method when no score decided it), named for people
RULE_NAMES = {
    "per_char": "log-likelihood per character (acc_norm)",
    "sum": "summed log-likelihood (acc)",
    "per_token": "log-likelihood per token",
    "letter": "generated letter",
    "external": "the external system's answer",
}
FACTORS = ("llm", "retriever", "k", "icl", "chunker", "prompt", "query", "post", "temperature", "max_tokens")
# columns that legitimately differ between two runs of the same sweep
VOLATILE_COLUMNS = ("latency_s", "cached")

_LIST_F = pa.list_(pa.float64())
_LIST_S = pa.list_(pa.string())
RESPONSES_SCHEMA = pa.schema(
    [
        ("pipeline", pa.string()),
        ("llm", pa.string()),
        ("retriever", pa.string()),
        ("k", pa.int64()),
        ("icl", pa.int64()),
        ("chunker", pa.string()),
        ("prompt", pa.string()),
        ("query", pa.string()),
        ("post", pa.string()),
        ("question_id", pa.string()),
        ("method", pa.string()),
        ("chosen", pa.int64()),
        ("answer", pa.int64()),
        ("correct", pa.int64()),
        ("score_norm", pa.string()),
        ("ll_source", pa.string()),
        ("scores", _LIST_F),
        ("ll_sum", _LIST_F),
        ("ll_per_token", _LIST_F),
        ("ll_per_char", _LIST_F),
        ("retrieved", _LIST_S),
        ("retrieved_docs", _LIST_S),
        ("gold_doc_retrieved", pa.bool_()),
        ("output", pa.string()),
        ("parse_failed", pa.bool_()),
        ("error", pa.string()),
        ("transform_error", pa.string()),
        ("latency_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("cached", pa.bool_()),
        ("topic", pa.string()),
        ("bloom", pa.string()),
        ("qword", pa.string()),
    ]
)


def write_responses(path: str | Path, rows: Sequence[Mapping[str, object]], *, kind: str = "responses") -> None:
    """Write rows as Parquet atomically, with the column types of :data:`RESPONSES_SCHEMA`.

    Extra keys in rows (e.g. from a QA worker) are kept as inferred columns.
    """
    known = [f.name for f in RESPONSES_SCHEMA]
    extra = sorted({k for r in rows for k in r} - set(known) - {"item_id"})
    schema_fields = [f for f in RESPONSES_SCHEMA if any(f.name in r for r in rows)] if rows else list(RESPONSES_SCHEMA)
    arrays: dict[str, pa.Array] = {}
    for f in schema_fields:
        arrays[f.name] = pa.array([r.get(f.name) for r in rows], type=f.type)
    for name in extra:
        arrays[name] = pa.array([r.get(name) for r in rows])
    table = pa.table(arrays)
    table = table.replace_schema_metadata({"ragrade": f'{{"kind": "{kind}", "version": {RESPONSES_VERSION}}}'})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    atomic_write_bytes(path, buf.getvalue())


def _accuracy_row(group: pd.DataFrame) -> dict[str, int | float]:
    """Accuracy over the answered rows: a failed request (``correct`` empty) is missing, counted in n_errors."""
    scored = group["correct"].dropna()
    n = len(scored)
    k = int(scored.sum())
    lo, hi = wilson_interval(k, n)
    errors = int(group["error"].notna().sum()) if "error" in group else len(group) - n
    parse = int(group["parse_failed"].fillna(False).astype(bool).sum()) if "parse_failed" in group else 0
    return {
        "n": n,
        "n_correct": k,
        "accuracy": k / n if n else float("nan"),
        "ci_low": lo,
        "ci_high": hi,
        "n_errors": errors,
        "n_parse_failures": parse,
    }


def summarise(df: pd.DataFrame, order: Sequence[str] | None = None) -> pd.DataFrame:
    """Accuracy with a Wilson 95% CI per pipeline, plus error and parse-failure counts.

    ``n`` counts the answered questions; failed requests are missing (``n_errors``), never wrong.
    ``accuracy`` is decided by the run's rule (``decision_rule``); ``acc_sum`` / ``acc_per_char`` give
    the accuracy under either log-likelihood rule; ``method`` and ``ll_source`` say how the pipeline was
    scored (``ll_source`` reads ``mixed: ...`` when the way changed part-way).
    """
    out = []
    pipelines = list(order) if order is not None else list(dict.fromkeys(df["pipeline"]))
    for pid in pipelines:
        g = df[df["pipeline"] == pid]
        if g.empty:
            continue
        first = g.iloc[0]
        row: dict[str, object] = {"pipeline": pid, **{f: first[f] for f in FACTORS if f in g}}
        row.update(_accuracy_row(g))
        if "transform_error" in g:
            row["n_transform_failures"] = int(g["transform_error"].notna().sum())
        methods = sorted(str(m) for m in g["method"].dropna().unique()) if "method" in g else []
        row["method"] = "+".join(methods) if methods else "none"
        row["ll_source"] = ll_source(g)
        row.update(decision_columns(g))
        if "latency_s" in g:
            row["mean_latency_s"] = float(g["latency_s"].mean())
        for col in ("prompt_tokens", "completion_tokens"):
            if col in g:
                row[col] = int(g[col].sum())
        if "gold_doc_retrieved" in g and g["gold_doc_retrieved"].notna().any():
            row["gold_doc_hit_rate"] = float(g["gold_doc_retrieved"].dropna().astype(float).mean())
        else:
            row["gold_doc_hit_rate"] = float("nan")
        out.append(row)
    return pd.DataFrame(out)


def ll_source(group: pd.DataFrame) -> str | None:
    """How a pipeline's log-likelihoods were obtained: one source, ``mixed: a 12, b 28`` when it changed, or None."""
    if "ll_source" not in group:
        return None
    counts = group["ll_source"].dropna().astype(str).value_counts()
    if counts.empty:
        return None
    if len(counts) == 1:
        return str(counts.index[0])
    return "mixed: " + ", ".join(f"{name} {int(n)}" for name, n in sorted(counts.items()))


def _pick(values: Iterable[float | None]) -> int:
    """Index of the largest finite value (lowest on ties); -1 when none is finite (as run.answer.argmax)."""
    best, best_i = -math.inf, -1
    for i, v in enumerate(values):
        if v is not None and not math.isnan(v) and v > best:
            best, best_i = float(v), i
    return best_i


def _accuracy_by(rows: pd.DataFrame, column: str) -> float:
    """Accuracy of answered log-likelihood rows when the highest ``column`` score decides; NaN without any."""
    if column not in rows or "answer" not in rows:
        return float("nan")
    hits = [
        int(_pick(v) == int(a))
        for v, a in zip(rows[column], rows["answer"], strict=True)
        if v is not None and not isinstance(v, float) and len(v)
    ]
    return sum(hits) / len(hits) if hits else float("nan")


def decision_columns(group: pd.DataFrame) -> dict[str, str | float]:
    """``decision_rule`` (what decided ``correct``: per_char, sum, per_token, letter, external; ``+``-joined when
    several) and the accuracy under either log-likelihood rule, ``acc_sum`` and ``acc_per_char``
    (lm-evaluation-harness ``acc`` and ``acc_norm``), over the answered log-likelihood rows."""
    answered = group[group["error"].isna()] if "error" in group else group
    rules: list[str] = []
    if "score_norm" in answered:
        rules += sorted({str(x) for x in answered["score_norm"].dropna()})
    if "method" in answered and (answered["method"] == "generate").any():
        rules.append("letter")
    return {
        "decision_rule": "+".join(rules) if rules else "none",
        "acc_sum": _accuracy_by(answered, "ll_sum"),
        "acc_per_char": _accuracy_by(answered, "ll_per_char"),
    }


def summarise_by_tag(df: pd.DataFrame, order: Sequence[str] | None = None) -> pd.DataFrame:
    """Long format: accuracy with a Wilson 95% CI per pipeline x tag (topic, bloom, qword) x value.

    A question with several Bloom levels counts once under each level.
    """
    out = []
    pipelines = list(order) if order is not None else list(dict.fromkeys(df["pipeline"]))
    for tag in ("topic", "bloom", "qword"):
        if tag not in df:
            continue
        col = df[["pipeline", "correct", "error", "parse_failed", tag]].copy()
        col[tag] = col[tag].fillna("")
        if tag == "bloom":
            col[tag] = col[tag].astype(str).str.split(",")
            col = col.explode(tag)
        col = col[col[tag].astype(str) != ""]
        for pid in pipelines:
            g = col[col["pipeline"] == pid]
            for value in sorted(g[tag].astype(str).unique()):
                row: dict[str, object] = {"pipeline": pid, "tag": tag, "value": value}
                row.update(_accuracy_row(g[g[tag].astype(str) == value]))
                out.append(row)
    cols = [
        "pipeline",
        "tag",
        "value",
        "n",
        "n_correct",
        "accuracy",
        "ci_low",
        "ci_high",
        "n_errors",
        "n_parse_failures",
    ]
    return pd.DataFrame(out, columns=cols)


def write_csv(path: str | Path, df: pd.DataFrame) -> None:
    """Write a CSV atomically, floats at full precision (each reads back as the very same float: an interval
    rounded on the way out could exclude its own point estimate)."""
    atomic_write_text(path, df.to_csv(index=False))


def write_csv_rows(path: str | Path, rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> None:
    """Write dict rows as a CSV atomically: exactly ``columns``, in order; None (or absent) as an empty cell."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    atomic_write_text(path, buf.getvalue())


__all__ = [
    "FACTORS",
    "RESPONSES_FILE",
    "RESPONSES_SCHEMA",
    "RESPONSES_VERSION",
    "SUMMARY_BY_TAG_FILE",
    "SUMMARY_FILE",
    "SUMMARY_VERSION",
    "VOLATILE_COLUMNS",
    "decision_columns",
    "ll_source",
    "read_responses",
    "summarise",
    "summarise_by_tag",
    "write_csv",
    "write_csv_rows",
    "write_responses",
]
