"""Item response theory on a run's responses (``ragrade irt fit``, ``irt improve``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.io import JSONObject
    from ragrade.irt.improve import Improvement
    from ragrade.irt.problem import FitConfig
    from ragrade.irt.result import IRTResult


def fit_irt(
    source: PathLike | pd.DataFrame,
    *,
    model: str = "3pl",
    factors: Sequence[str] = (),
    out: PathLike | None = None,
    exam: PathLike | None = None,
    config: FitConfig | None = None,
    **settings: Any,
) -> IRTResult:
    """Fit abilities and item parameters on a run's responses (``ragrade irt fit``).

    ``source``: a run directory, a Parquet/CSV file or a responses DataFrame. ``factors`` switch on the
    hierarchical model; ``settings`` are :class:`~ragrade.irt.problem.FitConfig` fields (``se``,
    ``solver``, ``max_iter``, ``not_applicable``, ...). Writes ``out`` (default ``<run>/irt.json`` for a
    folder or file; nothing for a DataFrame) and ``<stem>_items.parquet``, ``<stem>_pipelines.csv``,
    ``<stem>_effects.csv``, ``<stem>_information.csv`` next to it.
    """
    from ragrade.irt.fit import fit_irt as _fit
    from ragrade.irt.problem import FitConfig

    if config is None:
        cfg = FitConfig(model=model, factors=tuple(factors), **settings)
    else:
        cfg = config.replace(**settings)
    if out is None and isinstance(source, (str, Path)):
        out = (Path(source) if Path(source).is_dir() else Path(source).parent) / "irt.json"
    return _fit(source, config=cfg, out=out, exam=exam)


def _fit_config(config: FitConfig | None, model: str, factors: Sequence[str], settings: dict[str, Any]) -> FitConfig:
    """The fit settings: ``settings`` over ``config``, or over the defaults with ``model`` and ``factors``."""
    from ragrade.irt.problem import FitConfig

    if config is None:
        return FitConfig(model=model, factors=tuple(factors), **settings)
    return config.replace(**settings) if settings else config


@dataclass(frozen=True)
class ExamImprovement:
    """What :func:`improve_exam` did: the evolution (each step's fit, the items kept), what it wrote
    (``summary``: the output folder, item counts, the improved exam and evolution files) and the exam it
    started from (None when not known: only the evolution was written)."""

    improvement: Improvement
    summary: JSONObject
    out: Path
    exam: str | None


def improve_exam(
    source: PathLike,
    *,
    steps: int = 4,
    drop: float = 0.1,
    out: PathLike | None = None,
    exam: PathLike | None = None,
    model: str = "3pl",
    factors: Sequence[str] = (),
    config: FitConfig | None = None,
    **settings: Any,
) -> ExamImprovement:
    """Drop the least discriminative items and refit, ``steps`` times (``ragrade irt improve``).

    ``source``: a run directory or a Parquet/CSV responses file; ``drop``: the fraction of items dropped per
    round; ``settings`` are :class:`~ragrade.irt.problem.FitConfig` fields over ``config`` (as for
    :func:`fit_irt`). ``exam`` defaults to the run manifest's exam. Writes ``out`` (default
    ``<run>/irt_improve``): ``exam.improved.jsonl`` (when the exam is known), ``irt_improve.json`` (the
    evolution) and the final ``irt.json``.
    """
    from ragrade.errors import DataError
    from ragrade.irt.improve import check_drop, improve, write_improvement
    from ragrade.irt.io import exam_tags, load_responses

    check_drop(drop, steps)
    cfg = _fit_config(config, model, factors, settings)
    data = load_responses(source, cfg.factors, cfg.not_applicable)
    exam_path = str(exam) if exam else data.exam_path
    if exam_path and not Path(exam_path).exists():
        raise DataError(f"exam file {exam_path} not found (pass $exam PATH)")
    imp = improve(data, cfg, steps=steps, drop=drop, tags=exam_tags(exam_path))
    if out is None:
        out = (Path(source) if Path(source).is_dir() else Path(source).parent) / "irt_improve"
    summary = write_improvement(imp, out, exam_path, data)
    return ExamImprovement(imp, summary, Path(out), exam_path or None)
