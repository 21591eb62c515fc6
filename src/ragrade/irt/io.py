"""Reading responses for IRT: a run directory, a Parquet/CSV file or a pandas DataFrame.

The long table (one row per pipeline x question: ``pipeline``, ``question_id``,
``correct`` and one column per factor) becomes an items-major ``int8`` matrix
with -1 for missing responses. Pipelines, items and factor levels are sorted
(numbers numerically, otherwise as text), never in hash order.

A factor need not apply to every pipeline: a closed-book pipeline has no
chunker. Per factor, a set of *not applicable* values (default
:data:`DEFAULT_NOT_APPLICABLE`: ``"none"`` and the empty cell, i.e. ``""``,
NaN or None; compared as stripped, case-insensitive text) marks such
pipelines; they get the code -1 and no level. An empty set makes the factor
strict: every pipeline must then have a real level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ragrade.errors import DataError

REQUIRED = ("pipeline", "question_id", "correct")
DEFAULT_NOT_APPLICABLE: tuple[str, ...] = ("none", "")
ALL_FACTORS = "*"  # key of a not-applicable mapping that sets the values of every factor not named
# factors whose "none" is a real level (the untransformed query, no post-processing); "n/a" marks index-free pipelines
FACTOR_NOT_APPLICABLE: dict[str, tuple[str, ...]] = {"query": ("n/a", ""), "post": ("n/a", "")}
NotApplicable = Mapping[str, Sequence[str]]


@dataclass
class Factor:
    """One factor of the pipelines (llm, retriever, ...): sorted levels and each pipeline's level index.

    ``codes`` is -1 for a pipeline where the factor does not apply; ``not_applicable`` holds the values
    configured as "not applicable" and ``not_applicable_seen`` the ones that occurred (as written).
    """

    name: str
    levels: list[str]
    codes: npt.NDArray[np.int64]  # (n_pipelines,), -1 = not applicable
    not_applicable: tuple[str, ...] = DEFAULT_NOT_APPLICABLE
    not_applicable_seen: list[str] = field(default_factory=list)

    @property
    def applies(self) -> npt.NDArray[np.bool_]:
        """Per pipeline: whether the factor applies (has a real level)."""
        return np.asarray(self.codes >= 0)

    @property
    def n_not_applicable(self) -> int:
        """Number of pipelines where the factor does not apply."""
        return int((self.codes < 0).sum())

    def labels(self) -> list[str]:
        """Per pipeline: its level, or the not-applicable value seen (``none`` when that was an empty cell)."""
        na = "|".join(dict.fromkeys(v or "none" for v in self.not_applicable_seen)) or "none"
        return [self.levels[c] if c >= 0 else na for c in self.codes]

    def describe_not_applicable(self) -> dict[str, Any]:
        """JSON-friendly: configured and seen not-applicable values, and how many pipelines they cover."""
        return {
            "values": list(self.not_applicable),
            "seen": list(self.not_applicable_seen),
            "n_pipelines": self.n_not_applicable,
            "n_pipelines_applicable": int(len(self.codes) - self.n_not_applicable),
        }


def not_applicable_values(name: str, spec: NotApplicable | None) -> tuple[str, ...]:
    """The not-applicable values of factor ``name`` under ``spec`` (its own entry, else ``*``, else the default)."""
    if spec is None:
        return FACTOR_NOT_APPLICABLE.get(name, DEFAULT_NOT_APPLICABLE)
    if name in spec:
        return tuple(spec[name])
    if name in FACTOR_NOT_APPLICABLE:
        return FACTOR_NOT_APPLICABLE[name]
    if ALL_FACTORS in spec:
        return tuple(spec[ALL_FACTORS])
    return DEFAULT_NOT_APPLICABLE


_NA_MARK = "\x00not applicable"


def _na_key(value: str) -> str:
    return value.strip().lower()


@dataclass
class Responses:
    """The response matrix with its labels and the counts of what was missing."""

    pipelines: list[str]
    items: list[str]
    R: npt.NDArray[np.int8]  # (n_items, n_pipelines): 1, 0 or -1 (missing)
    factors: list[Factor] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    source: str = "<dataframe>"
    exam_path: str | None = None

    @property
    def n_observed(self) -> int:
        """Number of observed (non-missing) responses."""
        return int((self.R >= 0).sum())

    def subset_items(self, keep: Sequence[int]) -> Responses:
        """The same pipelines on the items at positions ``keep`` (rows stay aligned with labels)."""
        idx = np.asarray(keep, dtype=np.int64)
        counts = dict(self.counts)
        counts["n_items"] = len(idx)
        return Responses(
            pipelines=self.pipelines,
            items=[self.items[i] for i in idx],
            R=np.ascontiguousarray(self.R[idx]),
            factors=self.factors,
            counts=counts,
            source=self.source,
            exam_path=self.exam_path,
        )


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        num = float(value)
    except ValueError:
        return (1, 0.0, value)
    return (0, num, value) if math.isfinite(num) else (1, 0.0, value)


def sorted_levels(values: Sequence[str]) -> list[str]:
    """Unique values sorted numerically when they parse as numbers, else as text."""
    return sorted(set(values), key=_sort_key)


def _as_text(series: pd.Series) -> pd.Series:
    """Labels as strings; integral floats lose their ``.0`` (k=5.0 -> '5')."""

    def fmt(v: Any) -> str:
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    return series.map(fmt)


def read_table(source: str | Path) -> tuple[pd.DataFrame, str | None, str]:
    """Load the long response table from a run dir, Parquet or CSV; returns (df, exam path, label)."""
    path = Path(source)
    exam_path: str | None = None
    if path.is_dir():
        manifest = path / "manifest.json"
        if manifest.exists():
            from ragrade.io import read_json

            man = read_json(manifest)
            exam = man.get("exam") if isinstance(man, dict) else None
            if isinstance(exam, dict) and exam.get("path"):
                exam_path = str(exam["path"])
                if not Path(exam_path).is_absolute() and not Path(exam_path).exists():
                    cand = path / exam_path
                    exam_path = str(cand) if cand.exists() else exam_path
        for name in ("responses.parquet", "responses.csv"):
            if (path / name).exists():
                path = path / name
                break
        else:
            raise DataError(f"{source}: no responses.parquet in this run directory")
    if not path.exists():
        raise DataError(f"{source}: file not found")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        elif path.suffix.lower() in (".csv", ".tsv"):
            # only empty cells are missing: labels such as 'NA', 'None' or 'n/a' stay text (a factor's
            # not-applicable values decide what they mean)
            df = pd.read_csv(
                path, sep="\t" if path.suffix.lower() == ".tsv" else ",", keep_default_na=False, na_values=[""]
            )
        else:
            raise DataError(f"{path}: expected a run directory, a .parquet or a .csv file")
    except DataError:
        raise
    except Exception as exc:  # pyarrow / parser errors on a corrupt file
        raise DataError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from exc
    return df, exam_path, str(path)


def _parse_correct(col: pd.Series, where: str) -> tuple[npt.NDArray[np.float64], int]:
    """0/1 (bool, int, float, 'true'/'false' text) -> float array with NaN for missing."""
    if col.dtype == bool:
        return col.to_numpy(dtype=np.float64), 0
    if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
        col = col.astype(object)
        words = {"true": 1.0, "false": 0.0, **dict.fromkeys(("", "nan", "none", "na", "n/a", "null"), np.nan)}

        def norm(v: Any) -> Any:
            if isinstance(v, str):
                key = v.strip().lower()
                return words.get(key, v)
            return v

        col = col.map(norm)
    vals = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
    raw_missing = col.isna().to_numpy()
    bad = np.isnan(vals) & ~raw_missing
    bad |= ~np.isnan(vals) & (vals != 0) & (vals != 1)
    if bad.any():
        example = col[bad].iloc[0]
        raise DataError(
            f"{where}: column 'correct' must be 0/1 (or empty for a failed answer); "
            f"{int(bad.sum())} rows are not, e.g. {example!r}"
        )
    return vals, int(np.isnan(vals).sum())


def build_responses(
    df: pd.DataFrame,
    factors: Sequence[str] = (),
    *,
    source: str = "<dataframe>",
    not_applicable: NotApplicable | None = None,
) -> Responses:
    """Validate the long table and build the response matrix (DataError on bad input).

    ``not_applicable`` maps a factor (or ``*``) to its not-applicable values; see the module docstring.
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"{source}: expected a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in (*REQUIRED, *factors) if c not in df.columns]
    if missing:
        raise DataError(f"{source}: missing column(s) {', '.join(missing)}; found {', '.join(map(str, df.columns))}")
    if df.empty:
        raise DataError(f"{source}: no responses")
    if df["pipeline"].isna().any() or df["question_id"].isna().any():
        n_bad = int(df[["pipeline", "question_id"]].isna().any(axis=1).sum())
        raise DataError(f"{source}: empty 'pipeline' or 'question_id' in {n_bad} rows")
    correct, n_nan = _parse_correct(df["correct"], source)
    pipe = _as_text(df["pipeline"])
    qid = _as_text(df["question_id"])
    dup = pd.DataFrame({"p": pipe, "q": qid}).duplicated()
    if dup.any():
        first = df.loc[dup.to_numpy()].iloc[0]
        raise DataError(
            f"{source}: {int(dup.sum())} duplicate (pipeline, question_id) rows, "
            f"e.g. ({first['pipeline']}, {first['question_id']})"
        )
    pipelines = sorted_levels(pipe.tolist())
    items = sorted_levels(qid.tolist())
    p_idx = pd.Index(pipelines).get_indexer(pd.Index(pipe))
    q_idx = pd.Index(items).get_indexer(pd.Index(qid))
    R = np.full((len(items), len(pipelines)), -1, dtype=np.int8)
    ok = ~np.isnan(correct)
    R[q_idx[ok], p_idx[ok]] = correct[ok].astype(np.int8)
    coded = [
        _code_factor(df, name, pipe, pipelines, source, not_applicable_values(name, not_applicable)) for name in factors
    ]
    counts = {
        "n_rows": len(df),
        "n_pipelines": len(pipelines),
        "n_items": len(items),
        "n_missing_correct": n_nan,
        "n_absent_pairs": len(items) * len(pipelines) - len(df),
        "n_observed": int(ok.sum()),
    }
    return Responses(pipelines, items, R, coded, counts, source)


def _code_factor(
    df: pd.DataFrame, name: str, pipe: pd.Series, pipelines: list[str], source: str, na_values: tuple[str, ...]
) -> Factor:
    na_keys = {_na_key(v) for v in na_values}
    empty = df[name].isna()
    if empty.any() and "" not in na_keys:
        raise DataError(
            f"{source}: factor column '{name}' is empty in {int(empty.sum())} rows "
            "(declare empty cells not applicable to this factor, or fill them)"
        )
    values = _as_text(df[name]).where(~empty, "")
    na_found = [v for v in pd.unique(values) if _na_key(v) in na_keys]
    is_na = values.isin(na_found).to_numpy(dtype=bool)
    # one marker for every not-applicable value, so that 'none' and an empty cell do not clash per pipeline
    coded = values.where(~is_na, _NA_MARK)
    per_pipe = pd.DataFrame({"p": pipe, "v": coded}).drop_duplicates()
    clash = per_pipe["p"].duplicated(keep=False)
    if clash.any():
        bad = per_pipe.loc[clash, "p"].iloc[0]
        raise DataError(f"{source}: pipeline '{bad}' has several values of factor '{name}'")
    levels = sorted_levels([v for v in per_pipe["v"] if v != _NA_MARK])
    mapping = dict(zip(per_pipe["p"], per_pipe["v"], strict=True))
    codes = pd.Index(levels).get_indexer(pd.Index([mapping[p] for p in pipelines])).astype(np.int64)
    seen = sorted_levels([v.strip() for v in na_found])
    return Factor(name, levels, codes, tuple(na_values), seen)


def load_responses(
    data: pd.DataFrame | str | Path, factors: Sequence[str] = (), not_applicable: NotApplicable | None = None
) -> Responses:
    """Responses from a DataFrame, a run directory or a Parquet/CSV file."""
    if isinstance(data, pd.DataFrame):
        return build_responses(data, factors, not_applicable=not_applicable)
    df, exam_path, label = read_table(data)
    resp = build_responses(df, factors, source=label, not_applicable=not_applicable)
    resp.exam_path = exam_path
    return resp


def exam_tags(path: str | Path | None) -> dict[str, dict[str, Any]]:
    """Question id -> tags (bloom list, qword, topic) read from an exam file; {} when no path."""
    if not path:
        return {}
    from ragrade.exam.files import read_exam

    _, questions = read_exam(path)
    return {q.id: dict(q.tags) for q in questions}


def groups_from_tags(items: Sequence[str], tags: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, list[int]]]:
    """Grouping name -> level -> item positions, for bloom (multi-level), qword and topic."""
    out: dict[str, dict[str, list[int]]] = {}
    for key in ("bloom", "qword", "topic"):
        table: dict[str, list[int]] = {}
        for pos, item in enumerate(items):
            value = tags.get(item, {}).get(key)
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if v is not None and str(v) != "":
                    table.setdefault(str(v), []).append(pos)
        if table:
            out[key] = {lvl: table[lvl] for lvl in sorted_levels(list(table))}
    return out


__all__ = [
    "ALL_FACTORS",
    "DEFAULT_NOT_APPLICABLE",
    "REQUIRED",
    "Factor",
    "Responses",
    "build_responses",
    "exam_tags",
    "groups_from_tags",
    "load_responses",
    "not_applicable_values",
    "read_table",
    "sorted_levels",
]
