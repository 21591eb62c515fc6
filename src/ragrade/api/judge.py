"""Judging free-text answers, labelling them by hand and calibrating the judges (``ragrade judge``, ``label``,
``judge calibrate``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike, settings_layer
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    from ragrade.api.types import Calibration, JudgeSummary
    from ragrade.judge.calibrate import CalibrationConfig
    from ragrade.judge.run import JudgeRunConfig
    from ragrade.progress import ProgressFn


def judge_answers(
    answers: PathLike,
    out: PathLike | None = None,
    *,
    metrics: Sequence[str] | None = None,
    llm: str | None = None,
    config: JudgeRunConfig | None = None,
    max_failed: float | None = None,
    check: bool = True,
    progress: ProgressFn | None = None,
    **settings: Any,
) -> JudgeSummary:
    """Score free-text answers with judges, BERTScore and exact match (``ragrade judge``); resumable.

    ``answers``: an answers JSONL (any system's; map its fields with ``fields={"query": "question", ...}``)
    or a ``qa answer`` run directory. ``settings`` are :class:`~ragrade.judge.run.JudgeRunConfig` fields.
    Writes ``scores.jsonl``, ``summary.json``, ``summary.csv`` and ``agreement.json`` under ``out``
    (default ``<answers dir>/judge``); returns the summary (a dict; its folder as ``.out``).
    ``progress(metric, done, total)`` follows the scoring. Raises (exit-code errors) when more judge requests
    failed than ``max_failed`` allows, after the files are written (``check=False``: returns the summary
    anyway; ``summary.check()`` raises then).
    """
    from ragrade.api.types import JudgeSummary
    from ragrade.config import build_config
    from ragrade.judge.run import JudgeRunConfig, run_judging

    flags = {**settings, "metrics": list(metrics) if metrics is not None else None, "llm": llm}
    cfg = build_config(JudgeRunConfig, settings_layer(config), flags, source="judge settings")
    if out is None:
        if not Path(answers).is_dir():
            raise ConfigError("out= is required when answers is a file")
        out = Path(answers) / "judge"
    summary = JudgeSummary(run_judging(answers, out, cfg, progress=progress), Path(out))
    if check:
        summary.check(max_failed)
    return summary


def calibrate_judge(
    scores: PathLike,
    human: PathLike | None = None,
    out: PathLike | None = None,
    *,
    config: CalibrationConfig | None = None,
    **settings: Any,
) -> Calibration:
    """Correct judge scores with human labels (``ragrade judge calibrate``); returns ``calibration.json``'s content
    (a dict; its folder as ``.out``).

    ``scores``: a judge output folder (or its ``scores.jsonl``, or an exam file); ``human``: the labels JSONL
    (``{"id", "metric", "label"}`` per line, e.g. from ``ragrade label``). ``settings`` are
    :class:`~ragrade.judge.calibrate.CalibrationConfig` fields (``level``, ``min_labels``) over ``config``.
    Per metric and configuration: the PPI++ estimate of the mean a human would give, with its interval, beside
    the human-only interval and the judge's bias. Writes ``out/calibration.json`` (default
    ``<scores folder>/calibration``).
    """
    from ragrade.api.types import Calibration
    from ragrade.config import build_config
    from ragrade.judge.calibrate import CalibrationConfig, resolve_scores_path, run_calibration

    flags = {**settings, "human": str(human) if human is not None else None}
    cfg = build_config(CalibrationConfig, settings_layer(config), flags, source="calibrate settings")
    if cfg.human is None:
        raise ConfigError("calibrate needs the human labels: $human (a labels JSONL file; [calibration] human)")
    path = resolve_scores_path(scores)
    target = Path(out) if out is not None else path.parent / "calibration"
    return Calibration(run_calibration(path, cfg.human, target, cfg), target)


@dataclass(frozen=True)
class LabelPage:
    """The labelling page :func:`write_label_page` wrote: answers sampled, grades to give, metrics graded."""

    out: Path
    n_items: int
    n_tasks: int
    metrics: list[str]


def write_label_page(
    scores: PathLike,
    out: PathLike,
    *,
    n: int = 100,
    metrics: Sequence[str] | None = None,
    answers: PathLike | None = None,
    seed: int = 0,
) -> LabelPage:
    """Write one self-contained HTML page for grading a sample of judged answers by keyboard (``ragrade label``).

    ``scores``: a judge output folder or its ``scores.jsonl`` (or an exam file); ``n`` answers are sampled
    (``seed``), spread evenly over configurations; ``metrics``: the metrics to grade (default: every judged
    one but exact and bertscore); ``answers`` defaults to the file the judge read. The page's button downloads
    the ``labels.jsonl`` that :func:`calibrate_judge` reads.
    """
    from ragrade.judge.label import write_label_page as _write

    chosen = list(metrics) if metrics is not None else None
    source = Path(answers) if answers is not None else None
    info = _write(scores, Path(out), n=n, metrics=chosen, answers=source, seed=seed)
    graded = info["metrics"]
    return LabelPage(Path(out), int(info["n_items"]), int(info["n_tasks"]), [str(m) for m in graded or []])
