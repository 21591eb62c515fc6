"""What ``exam take`` returns: the sweep's result (adaptive or not) with the notes and warnings a reader of the
run should see (:func:`ragrade.api.exam.exam_notes`, :func:`ragrade.api.exam.easy_exam_warning`), so that the
command line only prints them.

Loaded when :func:`ragrade.api.take_exam` or :func:`ragrade.api.take_exam_adaptive` runs (it imports the
runners' result types).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ragrade.adaptive.runner import AdaptiveResult
from ragrade.run.sweep import SweepResult


@dataclass
class ExamRun(SweepResult):
    """A finished ``exam take`` (:class:`~ragrade.run.sweep.SweepResult`) with what to tell its reader."""

    #: notes on the exam itself (an offline exam's: its questions favour lexical retrieval)
    notes: list[str] = field(default_factory=list)
    #: warnings on the results (an exam too easy to rank retrievers)
    warnings: list[str] = field(default_factory=list)


@dataclass
class AdaptiveExamRun(AdaptiveResult):
    """A finished ``exam take --adaptive`` (:class:`~ragrade.adaptive.runner.AdaptiveResult`) with the notes on
    the exam itself (an offline exam's); the run's own warnings are in ``warnings``."""

    notes: list[str] = field(default_factory=list)


def exam_run(result: SweepResult, notes: list[str], warnings: list[str]) -> ExamRun:
    """``result`` with the ``notes`` on its exam and the ``warnings`` on its results."""
    own = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return ExamRun(**own, notes=notes, warnings=warnings)


def adaptive_exam_run(result: AdaptiveResult, notes: list[str]) -> AdaptiveExamRun:
    """``result`` with the ``notes`` on its exam."""
    own = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return AdaptiveExamRun(**own, notes=notes)


__all__ = [
    "AdaptiveExamRun",
    "ExamRun",
    "adaptive_exam_run",
    "exam_run",
]
