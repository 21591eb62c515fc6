"""Adaptive evaluation of a pipeline grid: ask each pipeline only the questions that tell most.

The public surface:

* :class:`Scheduler` (:mod:`ragrade.adaptive.scheduler`): which items each pipeline answers next,
  when it stops, which pipelines are eliminated; :func:`run_rounds` drives it with any ``ask``;
* calibration (:mod:`ragrade.adaptive.calibration`): the item parameters, from an earlier run's
  ``irt.json`` (:func:`load_calibration`), reference pipelines or a cold start;
* the estimator (:mod:`ragrade.adaptive.estimate`, used by :mod:`ragrade.adaptive.state`):
  audit-corrected full-exam accuracies, misfit checks, selection-adjusted bounds;
* :func:`run_adaptive` / :func:`adaptive_plan` (:mod:`ragrade.adaptive.runner`): an adaptive sweep
  on a run directory. Answers are produced and scored by ``ragrade.run``'s exam worker, through the
  same journal as a full sweep, so an adaptive answer is scored exactly as in a full run.

The settings model, :class:`~ragrade.run.adaptive_config.AdaptiveConfig`, stays in ``ragrade.run``:
it is the ``[adaptive]`` table of the sweep settings (``run.spec.SweepConfig`` embeds it), and this
package sits above ``ragrade.run``. The simulator (simulated grids, scoring a run against the full grid)
lives with its users, in ``tests/support/adaptive_sim.py`` (the tests and ``benchmarks/bench_adaptive.py``);
production code uses :mod:`ragrade.adaptive.compare` to compare estimates with a full grid.
"""

from __future__ import annotations

from ragrade.adaptive.calibration import load_calibration
from ragrade.adaptive.estimate import MisfitResult, calibration_check, misfit_check, prob_best
from ragrade.adaptive.runner import AdaptiveResult, adaptive_plan, run_adaptive
from ragrade.adaptive.scheduler import Scheduler, run_rounds
from ragrade.adaptive.state import ELIMINATED, FAILED, MEASURED, PREDICTED, ItemParams
from ragrade.run.adaptive_config import AdaptiveConfig

__all__ = [
    "ELIMINATED",
    "FAILED",
    "MEASURED",
    "PREDICTED",
    "AdaptiveConfig",
    "AdaptiveResult",
    "ItemParams",
    "MisfitResult",
    "Scheduler",
    "adaptive_plan",
    "calibration_check",
    "load_calibration",
    "misfit_check",
    "prob_best",
    "run_adaptive",
    "run_rounds",
]
