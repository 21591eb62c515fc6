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

The retrieval factors (:data:`RETRIEVAL_ONLY_FACTORS`: k, chunker, query, post)
do not apply to closed-book and oracle pipelines (column ``retriever``), whatever
their cell says (closed book is k=0, the oracle k=1), unless that factor's
not-applicable values are given or every factor is made strict (``*`` empty).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
# factors of the retrieval step, which closed book (no passages) and the oracle (handed the gold passage) lack:
# for these pipelines they are not applicable unless a factor's not-applicable values are given explicitly
RETRIEVAL_ONLY_FACTORS = ("k", "chunker", "query", "post")
NO_INDEX_LABEL = "n/a"  # the not-applicable value shown for them


def no_index_rows(df: pd.DataFrame) -> npt.NDArray[np.bool_]:
    """Per row: a pipeline whose retriever is registered as searching no index (closed book, the oracle), by
    column ``retriever`` (case-insensitive); all False without that column."""
    from ragrade.retrieval.base import retriever_caps

    if "retriever" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    text = df["retriever"].map(lambda v: "" if pd.isna(v) else str(v).strip())
    free = {
        name
        for name in set(text)
        if name and not (retriever_caps(name).needs_index and retriever_caps(name.lower()).needs_index)
    }
    return np.asarray(text.isin(free).to_numpy(), dtype=bool)


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


def _retrieval_default(name: str, spec: NotApplicable | None) -> bool:
    """Whether closed book and oracle are not applicable to factor ``name`` by default: a retrieval factor
    whose values were not given (its own entry), unless every factor was made strict (``*`` empty)."""
    if name not in RETRIEVAL_ONLY_FACTORS:
        return False
    if spec is None:
        return True
    return name not in spec and not (ALL_FACTORS in spec and not tuple(spec[ALL_FACTORS]))


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

    def subset_pipelines(self, keep: npt.NDArray[np.bool_]) -> Responses:
        """The same items answered by the pipelines where ``keep`` is true (factor codes subset alike)."""
        idx = np.flatnonzero(keep)
        return replace(
            self,
            pipelines=[self.pipelines[i] for i in idx],
            R=np.ascontiguousarray(self.R[:, idx]),
            factors=[replace(f, codes=f.codes[idx]) for f in self.factors],
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

    def fmt(v: object) -> str:
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
            df = _read_parquet(path)
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
    if pd.api.types.is_integer_dtype(col.dtype) and not isinstance(col.dtype, pd.api.extensions.ExtensionDtype):
        ints = col.to_numpy()
        if ((ints == 0) | (ints == 1)).all():  # the common case, without NaN bookkeeping
            return ints.astype(np.float64), 0
    if col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
        col = col.astype(object)
        words = {"true": 1.0, "false": 0.0, **dict.fromkeys(("", "nan", "none", "na", "n/a", "null"), np.nan)}

        def norm(v: object) -> object:
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
    p_codes, pipelines = _label_codes(df["pipeline"])
    q_codes, items = _label_codes(df["question_id"])
    R = _fill_matrix(df, p_codes, q_codes, correct, len(items), len(pipelines), source)
    ok = ~np.isnan(correct)
    no_index = no_index_rows(df) if any(f in RETRIEVAL_ONLY_FACTORS for f in factors) else None
    coded = [
        _code_factor(
            df,
            name,
            p_codes,
            pipelines,
            source,
            not_applicable_values(name, not_applicable),
            no_index if _retrieval_default(name, not_applicable) else None,
        )
        for name in factors
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


def _read_parquet(path: Path) -> pd.DataFrame:
    """A Parquet file with its text columns dictionary-encoded (pandas categoricals: small and fast)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    table = pq.read_table(path, read_dictionary=text)
    df: pd.DataFrame = table.to_pandas(self_destruct=True, split_blocks=True)
    return df


def _label_codes(col: pd.Series) -> tuple[npt.NDArray[np.int32], list[str]]:
    """Per row: the position of its label among the sorted labels (as text); and those labels.

    Works on the distinct values only (a categorical's categories, or a factorisation), so a long
    table costs one pass over its codes.
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = np.asarray(col.cat.codes.to_numpy())  # no -1: empty labels were rejected before
        uniques = pd.Series(np.asarray(col.cat.categories, dtype=object))
        used = np.bincount(codes, minlength=len(uniques)) > 0
    else:
        codes, uniq = pd.factorize(col, sort=False)
        uniques = pd.Series(np.asarray(uniq, dtype=object))
        used = np.ones(len(uniques), dtype=bool)
    texts = _as_text(uniques)
    levels = sorted_levels(texts[used].tolist())
    lookup = pd.Index(levels).get_indexer(pd.Index(texts)).astype(np.int32)
    if np.array_equal(lookup, np.arange(len(lookup))):  # already in sorted order: no gather
        return codes.astype(np.int32, copy=False), levels
    return lookup[codes], levels


FILL_CHUNK = 1 << 24


def _fill_matrix(
    df: pd.DataFrame,
    p_codes: npt.NDArray[np.int32],
    q_codes: npt.NDArray[np.int32],
    correct: npt.NDArray[np.float64],
    n_items: int,
    n_pipelines: int,
    source: str,
) -> npt.NDArray[np.int8]:
    """The items-major matrix (-1 missing); a (pipeline, question_id) pair given twice is a DataError."""
    R = np.full((n_items, n_pipelines), -2, dtype=np.int8)  # -2: no row yet
    for lo in range(0, len(correct), FILL_CHUNK):
        sl = slice(lo, lo + FILL_CHUNK)
        c = correct[sl]
        R[q_codes[sl], p_codes[sl]] = np.where(np.isnan(c), -1, c).astype(np.int8)
    n_cells = int(np.count_nonzero(R != -2))
    if n_cells < len(correct):
        dup = pd.DataFrame({"p": p_codes, "q": q_codes}).duplicated()
        first = df.loc[dup.to_numpy()].iloc[0]
        raise DataError(
            f"{source}: {int(dup.sum())} duplicate (pipeline, question_id) rows, "
            f"e.g. ({first['pipeline']}, {first['question_id']})"
        )
    R[R == -2] = -1
    return R


def _code_factor(
    df: pd.DataFrame,
    name: str,
    p_codes: npt.NDArray[np.int32],
    pipelines: list[str],
    source: str,
    na_values: tuple[str, ...],
    forced: npt.NDArray[np.bool_] | None = None,
) -> Factor:
    """Code one factor per pipeline; rows where ``forced`` is set are not applicable whatever their value."""
    forced = forced if forced is not None and forced.any() else None
    na_keys = {_na_key(v) for v in na_values}
    col = df[name]
    empty = col.isna().to_numpy() if forced is None else col.isna().to_numpy() & ~forced
    if empty.any() and "" not in na_keys:
        raise DataError(
            f"{source}: factor column '{name}' is empty in {int(empty.sum())} rows "
            "(declare empty cells not applicable to this factor, or fill them)"
        )
    if isinstance(col.dtype, pd.CategoricalDtype):
        v_codes = np.asarray(col.cat.codes.to_numpy(), dtype=np.int64)
        uniques = pd.Series(np.asarray(col.cat.categories, dtype=object))
    else:
        v_codes, uniq = pd.factorize(col, sort=False)
        uniques = pd.Series(np.asarray(uniq, dtype=object))
    texts = [*_as_text(uniques).tolist(), "", NO_INDEX_LABEL]  # the last two: an empty cell, a forced row
    v_codes = np.where(v_codes < 0, len(texts) - 2, v_codes)
    is_na = np.array([_na_key(t) in na_keys for t in texts])
    if forced is not None:  # a closed-book k=0 reads as n/a; a value already not applicable stays as written
        moved = forced & ~is_na[v_codes]
        if moved.any():
            v_codes = np.where(moved, len(texts) - 1, v_codes)
            is_na[-1] = True
            if _na_key(NO_INDEX_LABEL) not in na_keys:
                na_values = (*na_values, NO_INDEX_LABEL)
    # one marker for every not-applicable value, so that 'none' and an empty cell do not clash per pipeline
    first: dict[str, int] = {}
    key = np.array([first.setdefault(t, k) for k, t in enumerate(texts)])  # equal texts, one key
    key[is_na] = -1
    row_key = key[v_codes]
    per_pipe = np.full(len(pipelines), -2, dtype=np.int64)
    per_pipe[p_codes] = row_key
    clash = row_key != per_pipe[p_codes]
    if clash.any():
        bad = pipelines[int(p_codes[np.flatnonzero(clash)[0]])]
        raise DataError(f"{source}: pipeline '{bad}' has several values of factor '{name}'")
    levels = sorted_levels([texts[k] for k in set(per_pipe.tolist()) if k >= 0])
    level_pos = {lvl: j for j, lvl in enumerate(levels)}
    codes = np.array([level_pos[texts[k]] if k >= 0 else -1 for k in per_pipe], dtype=np.int64)
    present = np.bincount(v_codes, minlength=len(texts)) > 0
    seen = sorted_levels(list({texts[k].strip() for k in np.flatnonzero(is_na & present)}))
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


def load_item_params(path: str | Path) -> pd.DataFrame:
    """Item parameters of a fit, from ``irt.json`` (items inline, version 1 and small exams) or the
    per-item Parquet table it names (``tables.items``, version 2): one row per question, indexed by
    ``question_id``, with ``discrimination``, ``difficulty``, ``guessing`` and, where present, their SEs
    and the other per-item columns."""
    from ragrade.io import read_json

    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("kind") != "irt":
        raise DataError(f"{path}: not an irt.json file")
    _check_version(doc.get("version"), path)
    if isinstance(doc.get("items"), dict):
        items = doc["items"]
        bad = next((q for q, rec in items.items() if not isinstance(rec, dict)), None)
        if bad is not None:
            raise DataError(f"{path}: item '{bad}' is not an object of parameters")
        df = pd.DataFrame.from_dict(items, orient="index")
        df.index = df.index.astype(str)
        df.index.name = "question_id"
        return _checked_items(df, path)
    table = (doc.get("tables") or {}).get("items")
    if not table or not str(table).endswith(".parquet") or not (path.parent / table).is_file():
        raise DataError(f"{path}: no item parameters (neither inline nor a per-item Parquet table)")
    where = path.parent / str(table)
    try:
        df = pd.read_parquet(where)
    except Exception as exc:  # pyarrow raises its own types (ArrowInvalid, OSError, ...) for a damaged file
        raise DataError(f"{where}: not a readable Parquet table of item parameters ({str(exc)[:200]})") from exc
    if "question_id" not in df.columns:
        raise DataError(f"{where}: missing column 'question_id' (columns: {', '.join(map(str, df.columns)) or 'none'})")
    ids = df["question_id"]
    if ids.isna().any():
        raise DataError(f"{where}: {int(ids.isna().sum())} row(s) without a question_id")
    df = df.assign(question_id=ids.astype(str)).set_index("question_id")
    return _checked_items(df, where)


ITEM_PARAMS = ("discrimination", "difficulty", "guessing")  # numeric columns of an item table (difficulty required)


def _check_version(version: object, path: Path) -> None:
    """DataError for a version this ragrade does not read (files of the first releases carried none: 1)."""
    from ragrade.io import check_file_version
    from ragrade.irt.output import IRT_VERSION

    if version is not None:
        check_file_version(version, path, "irt.json", IRT_VERSION, "fit again with this one (`ragrade irt fit`)")


def _check_ranges(df: pd.DataFrame, where: Path) -> None:
    """DataError for a question without a difficulty, or a guessing parameter outside [0, 1)."""
    empty = df["difficulty"].isna()
    if empty.any():
        q = df.index[int(np.flatnonzero(empty.to_numpy())[0])]
        raise DataError(f"{where}: question '{q}' has no difficulty ({int(empty.sum())} such); fit again")
    if "guessing" in df.columns:
        g = pd.to_numeric(df["guessing"], errors="coerce")
        bad = g.notna() & ((g < 0) | (g >= 1))
        if bad.any():
            pos = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(
                f"{where}: guessing must lie in [0, 1) (a probability below certainty), got {float(g.iloc[pos])!r} "
                f"for question '{df.index[pos]}'"
            )


def _checked_items(df: pd.DataFrame, where: Path) -> pd.DataFrame:
    """``df`` when it is a usable item table (one row per question, numeric parameters); DataError otherwise."""
    if df.empty:
        raise DataError(f"{where}: no items")
    if "difficulty" not in df.columns:
        raise DataError(f"{where}: missing column 'difficulty' (columns: {', '.join(map(str, df.columns))})")
    dup = df.index[df.index.duplicated()]
    if len(dup):
        raise DataError(f"{where}: question '{dup[0]}' appears {int((df.index == dup[0]).sum())} times")
    for col in ITEM_PARAMS:
        if col not in df.columns:
            continue
        values = df[col]
        numbers = pd.to_numeric(values.where(~values.map(lambda v: isinstance(v, bool))), errors="coerce")
        wrong = numbers.isna() & values.notna()
        if wrong.any():
            pos = int(np.flatnonzero(wrong.to_numpy())[0])
            got, q = values.iloc[pos], df.index[pos]
            raise DataError(f"{where}: '{col}' must hold numbers, got {got!r} for question '{q}'")
    _check_ranges(df, where)
    return df


def exam_tags(path: str | Path | None) -> dict[str, dict[str, Any]]:
    """Question id -> tags (bloom list, qword, topic) read from an exam file; {} when no path."""
    if not path:
        return {}
    from ragrade.exam.files import read_exam

    _, questions = read_exam(path)
    return {q.id: dict(q.tags) for q in questions}


def groups_from_tags(items: Sequence[str], tags: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, list[int]]]:
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
    "load_item_params",
    "load_responses",
    "not_applicable_values",
    "read_table",
    "sorted_levels",
]
