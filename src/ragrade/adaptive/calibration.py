"""Item calibration for adaptive runs: an earlier run's irt.json, reference pipelines, or a cold start.

* ``file``: :func:`load_calibration` reads the item parameters of an ``irt.json``
  fitted on an earlier run of the same exam (every evaluated question must be in
  it; a file for another exam is refused). This is the one place that knows the
  irt.json layout.
* ``reference``: a few reference pipelines (:func:`default_references`: closed
  book, oracle and one pipeline per retriever kind at the largest k, for the
  first LLM at the lowest ICL level) take the whole exam first; a flat IRT model
  is fitted on their answers (:func:`fit_item_params`).
* ``cold``: no calibration; items start at d=1, b=0, g=1/choices
  (:func:`cold_params`) and are re-fitted on every answer gathered so far every
  few rounds. Early item choices are therefore close to random, which spreads
  the first answers over the exam, and the estimates approximate a joint
  (JML-style) fit on a sparse matrix. The default in-run mode on grids of at
  least :data:`COLD_MIN_PIPELINES` pipelines: in ``benchmarks/bench_adaptive.py``
  (63 pipelines x 1,000 items, 20 seeds) it spent 19% of the full grid's requests
  for an accuracy error of 0.024 and 94% interval coverage, where 5 reference
  pipelines taking the whole exam first spent 25% for 0.029 and 87%: no pipeline
  takes the whole exam, and the first answers of every pipeline calibrate items.

In-run fits (reference and cold) use the 3PL model by default: a 2PL fit
ignores guessing and so misjudges the weaker pipelines' expected score on the
items they were not asked (in a 4-seed trial of the benchmark, cold 2PL re-fits
gave an accuracy error of 0.039 and 77% interval coverage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from ragrade.adaptive.estimate import MisfitResult
from ragrade.adaptive.pool import design_matrix, design_subset
from ragrade.adaptive.state import ItemParams
from ragrade.errors import ConfigError, DataError, RagradeError
from ragrade.run.adaptive_config import AdaptiveConfig
from ragrade.run.spec import PipelineSpec

CALIBRATION_DIR = "calibration"  # in a run directory: the irt.json an in-run calibration writes


def load_calibration(path: str | Path, items: Sequence[str]) -> ItemParams:
    """Item parameters of ``items`` from an ``irt.json`` (ConfigError when it does not cover them all).

    Reads either layout (items inline, or the ``irt_items.parquet`` table that large fits write beside it).
    """
    from ragrade.irt.io import load_item_params

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: calibration file not found")
    try:
        table = load_item_params(path)
    except DataError as exc:
        raise ConfigError(f"{path}: not a usable irt.json ({exc})") from exc
    missing = [q for q in items if q not in table.index]
    covered = len(items) - len(missing)
    if missing and covered < MIN_COVERAGE * len(items):
        raise ConfigError(
            f"{path}: the calibration covers {covered} of the exam's {len(items)} questions "
            f"(e.g. '{missing[0]}' is not in it); it was fitted on another exam or a subset"
        )
    known = [q for q in items if q in table.index]
    try:
        rows = table.loc[known].reindex(list(items))
        d = _column(rows, "discrimination", 1.0)
        b = np.asarray(rows["difficulty"].astype(float).fillna(0.0), dtype=np.float64)
        g = _column(rows, "guessing", 0.0)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: malformed item parameters ({exc})") from exc
    if not (np.isfinite(d).all() and np.isfinite(b).all() and np.isfinite(g).all()):
        raise ConfigError(f"{path}: item parameters are not all finite")
    negative = d <= 0
    if "flags" in rows:
        negative |= np.array([_has_flag(f, "negative_discrimination") for f in rows["flags"]])
    source = f"file:{path.resolve()}"
    if missing:  # e.g. the file of a sampled run, which asked part of the exam: the rest start uninformed
        source += f" ({covered} of {len(items)} questions; the rest uninformed)"
    params = ItemParams(list(items), np.maximum(d, 1e-3), b, np.clip(g, 0.0, 0.99), source)
    params.negative = negative
    return params


MIN_COVERAGE = 0.1  # a calibration covering fewer of the exam's questions is for another exam


def _has_flag(flags: Any, name: str) -> bool:
    if isinstance(flags, str):
        return name in flags
    if flags is None or (isinstance(flags, float) and np.isnan(flags)):
        return False
    try:
        return name in list(flags)
    except TypeError:
        return False


def calibration_data(path: str | Path, items: Sequence[str]) -> npt.NDArray[np.int8] | None:
    """The responses an ``irt.json`` was fitted on (pipelines x ``items``, -1 missing), when still on disk.

    Its ``source`` (a run directory or a response table); where that is not a path on disk (a fit from a data
    frame records ``<dataframe>``), the run directory the ``irt.json`` sits in, when it holds the responses
    (``ragrade irt fit`` and the demo write ``irt.json`` beside ``responses.parquet``).
    """
    from ragrade.io import read_json
    from ragrade.irt.io import read_table

    try:
        source = read_json(Path(path)).get("source")
        if not source or not Path(str(source)).exists():
            here = Path(path).parent
            if not any((here / name).is_file() for name in ("responses.parquet", "responses.csv")):
                return None
            source = str(here)
        df, _, _ = read_table(str(source))
    except (RagradeError, OSError, ValueError, AttributeError):
        return None
    if not {"pipeline", "question_id", "correct"} <= set(df.columns):
        return None
    pos = {q: k for k, q in enumerate(items)}
    df = df[df["question_id"].astype(str).isin(pos) & df["correct"].notna()]
    if df.empty:
        return None
    pipes = {p: k for k, p in enumerate(dict.fromkeys(df["pipeline"].astype(str)))}
    R = np.full((len(pipes), len(items)), -1, dtype=np.int8)
    rows = df["pipeline"].astype(str).map(pipes).to_numpy()
    cols = df["question_id"].astype(str).map(pos).to_numpy()
    R[rows, cols] = (df["correct"].astype(float).to_numpy() > 0).astype(np.int8)
    return R


def _column(rows: Any, name: str, default: float) -> Any:
    """A numeric column of the item table (``default`` where absent or empty)."""
    if name not in rows:
        return np.full(len(rows), default)
    return np.asarray(rows[name].astype(float).fillna(default), dtype=np.float64)


def cold_params(items: Sequence[str], n_choices: Mapping[str, int]) -> ItemParams:
    """Uninformed starting parameters: d=1, b=0, g = 1 / number of choices."""
    g = np.array([1.0 / max(2, n_choices.get(q, 4)) for q in items])
    return ItemParams(list(items), np.ones(len(items)), np.zeros(len(items)), g, "cold start")


def fit_item_params(
    rows: Sequence[Mapping[str, Any]], items: Sequence[str], model: str, base: ItemParams
) -> ItemParams:
    """Item parameters fitted (flat model) on journal rows; items without answers keep ``base``'s values.

    A row with an ``error`` is missing, never wrong.
    """
    return _fit(rows, items, model, base)[0]


def _fit(
    rows: Sequence[Mapping[str, Any]], items: Sequence[str], model: str, base: ItemParams, init: Any = None
) -> tuple[ItemParams, Any]:
    """:func:`fit_item_params`, warm-started from ``init`` (an IRTResult) when given; also returns the fit."""
    from ragrade.irt.fit import fit_irt
    from ragrade.irt.problem import FitConfig

    data = [
        {"pipeline": r["pipeline"], "question_id": r["question_id"], "correct": int(r["correct"])}
        for r in rows
        if r.get("error") is None
    ]
    if not data:
        return base, init
    cfg = FitConfig(model=model, se="none")  # the scheduler uses point estimates only
    res = fit_irt(pd.DataFrame(data), model=model, config=cfg, init=init)
    pos = {q: k for k, q in enumerate(res.items)}
    idx = np.array([pos.get(q, -1) for q in items])
    have = idx >= 0
    safe = np.where(have, idx, 0)
    params = ItemParams(
        list(items),
        np.where(have, res.discrimination[safe], base.d),
        np.where(have, res.difficulty[safe], base.b),
        np.where(have, res.guessing[safe], base.g),
        f"fit:{model} on {len(data)} answers",
    )
    return params, res


def refitter(ids: Sequence[str], items: Sequence[str], model: str, base: ItemParams) -> Any:
    """A scheduler ``refit`` callback: the items re-fitted on every answer the scheduler holds.

    Each re-fit is warm-started from the previous one (items and pipelines matched by name) and skips
    standard errors; the re-fits happen at the same rounds on the same answers, so a resumed run
    replays them to the same parameters.
    """
    last: dict[str, Any] = {}

    def refit(sched: Any) -> ItemParams:
        rows = [
            {"pipeline": ids[p], "question_id": items[i], "correct": int(sched.y[p, i])}
            for p, i in zip(*np.nonzero(sched.y >= 0), strict=True)
        ]
        try:
            params, last["fit"] = _fit(rows, items, model, base, last.get("fit"))
            return params
        except RagradeError:  # too little data to fit yet: keep the current items
            current: ItemParams = sched.params
            return current

    return refit


def default_references(specs: Sequence[PipelineSpec], n_fallback: int, seed: int) -> list[str]:
    """Closed book, oracle and one pipeline per retriever kind at the largest k (first LLM, lowest ICL).

    When the grid has fewer than two such pipelines, or they are more than half of it, a D-optimal
    subset of ``n_fallback`` (at most half the grid).
    """
    if not specs:
        return []
    llm, icl = specs[0].llm, min(s.icl for s in specs)
    first = {s.retriever: s.chunker for s in specs[::-1]}
    picked: dict[str, PipelineSpec] = {}
    for s in specs:
        if s.llm != llm or s.icl != icl or s.prompt != specs[0].prompt or s.chunker != first[s.retriever]:
            continue
        cur = picked.get(s.retriever)
        if cur is None or s.k > cur.k:
            picked[s.retriever] = s
    refs = [s.id for s in picked.values()]
    half = max(1, len(specs) // 2)  # a small grid keeps most of its pipelines adaptive
    if len(refs) < 2 or len(refs) > half:
        X, _ = design_matrix([s.factors() for s in specs])
        refs = [specs[i].id for i in sorted(design_subset(X, min(n_fallback, half), seed)[: min(n_fallback, half)])]
    return refs


def resolve_references(cfg: AdaptiveConfig, specs: Sequence[PipelineSpec], seed: int) -> list[str]:
    """The reference pipelines of a ``reference`` calibration (configured names, or the default)."""
    from ragrade.run.compare import resolve_pipeline

    ids = [s.id for s in specs]
    if cfg.reference:
        return list(dict.fromkeys(resolve_pipeline(name, ids) for name in cfg.reference))
    return default_references(specs, cfg.n_reference, seed)


COLD_MIN_PIPELINES = 20  # ``auto`` calibrates a grid this large from its own answers (cold)


def calibration_mode(cfg: AdaptiveConfig, n_pipelines: int = 0) -> str:
    """``file``, ``reference``, ``cold`` or ``sample``.

    ``auto``: file when a calibration is given; else cold on a grid of at least
    :data:`COLD_MIN_PIPELINES` pipelines; else ``sample``: no model (too few pipelines to calibrate
    items), every pipeline answers the same uniformly random items, design-based estimates.
    """
    if cfg.calibration_mode == "auto":
        if cfg.calibration:
            return "file"
        return "cold" if n_pipelines >= COLD_MIN_PIPELINES else "sample"
    if cfg.calibration_mode == "file" and not cfg.calibration:
        raise ConfigError("$calibration_mode file needs $calibration (an irt.json of an earlier run)")
    return cfg.calibration_mode


def misfit_fallback(cfg: AdaptiveConfig, calibration_fit: MisfitResult | None) -> AdaptiveConfig:
    """The settings of a run whose calibration data misfit: random sampling (``audit_share = 1``) instead of the model.

    When the check on the calibration file's responses (:func:`~ragrade.adaptive.estimate.calibration_check`)
    warns before the first request, the items' one-dimensional parameters cannot be trusted to choose
    questions: every pipeline then answers the same uniformly random questions (the ``sample`` design: paired
    comparisons, design-based estimates, simultaneous elimination on the paired differences), which is random
    sampling of the same budget by construction. Otherwise ``cfg`` unchanged.
    """
    if calibration_fit is None or not calibration_fit.warn:
        return cfg
    return cfg.model_copy(update={"audit_share": 1.0})


def write_calibration(run_dir: Path, rows: Sequence[Mapping[str, Any]], model: str) -> tuple[str | None, str]:
    """Fit the items on ``rows`` into ``calibration/irt.json``; its path, or None and why not."""
    from ragrade.irt.fit import fit_irt

    data = [
        {"pipeline": r["pipeline"], "question_id": r["question_id"], "correct": int(r["correct"])}
        for r in rows
        if r.get("error") is None and r.get("correct") is not None
    ]
    if not data:
        return None, "no calibration file written: no answers"
    out = run_dir / CALIBRATION_DIR / "irt.json"
    out.parent.mkdir(exist_ok=True)
    try:
        fit_irt(pd.DataFrame(data), model=model, out=out)
    except RagradeError as exc:
        return None, f"no calibration file written: the answers could not calibrate the items ({exc})"
    from ragrade.io import read_json, write_json

    doc = read_json(out)
    doc["source"] = str(run_dir.resolve())  # its responses.parquet: the next run's dimensionality check reads it
    write_json(out, doc)
    return str(out), ""


__all__ = [
    "CALIBRATION_DIR",
    "COLD_MIN_PIPELINES",
    "calibration_data",
    "calibration_mode",
    "cold_params",
    "default_references",
    "fit_item_params",
    "load_calibration",
    "misfit_fallback",
    "refitter",
    "resolve_references",
    "write_calibration",
]
