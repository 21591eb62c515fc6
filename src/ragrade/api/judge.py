"""Judging free-text answers and calibrating the judges (``ragrade judge``, ``judge calibrate``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike, settings_layer
from ragrade.errors import ConfigError

if TYPE_CHECKING:
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
    progress: ProgressFn | None = None,
    show: Callable[[dict[str, Any]], None] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Score free-text answers with judges, BERTScore and exact match (``ragrade judge``); resumable.

    ``answers``: an answers JSONL (any system's; map its fields with ``fields={"query": "question", ...}``)
    or a ``qa answer`` run directory. ``settings`` are :class:`~ragrade.judge.run.JudgeRunConfig` fields.
    Writes ``scores.jsonl``, ``summary.json``, ``summary.csv`` and ``agreement.json`` under ``out``
    (default ``<answers dir>/judge``); returns the summary. ``progress(metric, done, total)`` follows the
    scoring; ``show`` is given the summary before failed requests are checked (the CLI prints it there).
    """
    from ragrade.config import build_config
    from ragrade.judge.run import JudgeRunConfig, check_judge_failures, run_judging

    flags = {**settings, "metrics": list(metrics) if metrics is not None else None, "llm": llm}
    cfg = build_config(JudgeRunConfig, settings_layer(config), flags, source="judge settings")
    if out is None:
        if not Path(answers).is_dir():
            raise ConfigError("out= is required when answers is a file")
        out = Path(answers) / "judge"
    summary = run_judging(answers, out, cfg, progress=progress)
    if show is not None:
        show(summary)
    check_judge_failures(summary, max_failed)
    return summary


def calibrate_judge(
    scores: PathLike,
    human: PathLike | None = None,
    out: PathLike | None = None,
    *,
    config: CalibrationConfig | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Correct judge scores with human labels (``ragrade judge calibrate``); returns ``calibration.json``'s content.

    ``scores``: a judge output folder (or its ``scores.jsonl``, or an exam file); ``human``: the labels JSONL
    (``{"id", "metric", "label"}`` per line, e.g. from ``ragrade label``). ``settings`` are
    :class:`~ragrade.judge.calibrate.CalibrationConfig` fields (``level``, ``min_labels``) over ``config``.
    Per metric and configuration: the PPI++ estimate of the mean a human would give, with its interval, beside
    the human-only interval and the judge's bias. Writes ``out/calibration.json`` (default
    ``<scores folder>/calibration``).
    """
    from ragrade.config import build_config
    from ragrade.judge.calibrate import CalibrationConfig, resolve_scores_path, run_calibration

    flags = {**settings, "human": str(human) if human is not None else None}
    cfg = build_config(CalibrationConfig, settings_layer(config), flags, source="calibrate settings")
    if cfg.human is None:
        raise ConfigError("calibrate needs the human labels: --human LABELS.jsonl (or human = ... in [calibration])")
    path = resolve_scores_path(scores)
    return run_calibration(path, cfg.human, out if out is not None else path.parent / "calibration", cfg)
