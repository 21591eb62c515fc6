"""The adaptive package's seams: production never imports the simulator; one comparison for everyone."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
from tests.core.test_import_layers import module_graph

from ragrade.adaptive.compare import agreement, kendall_tau
from ragrade.adaptive.estimate import misfit_check


def test_production_code_never_imports_the_simulator() -> None:
    graph = module_graph()
    # the simulator lives with its users (tests/support/adaptive_sim.py), outside the installed package
    assert "ragrade.adaptive.simulate" not in graph
    src = Path(__file__).resolve().parents[2] / "src" / "ragrade"
    imports = re.compile(r"^\s*(from|import)\s+tests\b", re.M)
    users = sorted(str(f) for f in src.rglob("*.py") if imports.search(f.read_text(encoding="utf-8")))
    assert users == []
    # and the adaptive stage and CLI reach the package, not run/ (the old home)
    assert not any(m.startswith("ragrade.run.adaptive") and m != "ragrade.run.adaptive_config" for m in graph)
    assert "ragrade.adaptive.compare" in graph["ragrade.job.adaptive_stage"]


def test_agreement_worked_by_hand() -> None:
    truth = np.array([0.50, 0.70, 0.60, 0.40])
    est = np.array([0.52, 0.66, math.nan, 0.45])
    low = np.array([0.45, 0.60, math.nan, 0.41])
    high = np.array([0.60, 0.69, math.nan, 0.50])
    out = agreement(est, low, high, truth)
    assert out.compared == 3
    assert out.top1  # 0.66 is the highest estimate and 0.70 the best truth
    # |0.02| + |0.04| + |0.05| over 3
    assert math.isclose(out.mae, 0.11 / 3)
    # 0.50 in [0.45, 0.60]; 0.70 above 0.69; 0.40 below 0.41
    assert out.coverage == 1 / 3
    assert out.covered.tolist() == [True, False, False, False]
    # ranks agree on all three pairs: tau 1
    assert math.isclose(out.kendall_tau, 1.0)
    # the best of the whole grid is elsewhere (0.8): the estimated best is not it
    assert not agreement(est, low, high, truth, best_truth=0.8).top1
    # one discordant pair of three (no ties): tau = (2 - 1) / 3
    assert math.isclose(kendall_tau(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0])), 1 / 3)
    empty = agreement(np.full(2, math.nan), np.zeros(2), np.ones(2), np.array([0.1, 0.2]))
    assert empty.compared == 0 and not empty.top1 and math.isnan(empty.mae)


def test_misfit_statistic_and_its_share_worked_by_hand() -> None:
    # predictions 0.5: standardised residuals +1 / -1; item means (0.5, 0) removed, the columns are
    # c1 = (0.5, 0.5, 0.5, -1.5) and c2 = (1, 1, -1, -1): C = (c1 c1' + c2 c2') / 2 has the nonzero
    # eigenvalues of [[3, 2], [2, 4]] / 2, i.e. (7 +- sqrt 17) / 4, and trace 7 / 2 over 4 pipelines
    y = np.array([[1, 1], [1, 1], [1, 0], [0, 0]], dtype=np.int8)
    audit = np.ones_like(y, dtype=bool)
    phat = np.full(y.shape, 0.5)
    top = misfit_check(y, audit, phat, np.zeros(4), alpha=0.05, n_boot=20, slope=False).statistic
    share = misfit_check(y, audit, phat, np.zeros(4), alpha=0.05, n_boot=20, slope=False, share=True).statistic
    assert math.isclose(top, (7 + math.sqrt(17)) / 4)
    assert math.isclose(share, ((7 + math.sqrt(17)) / 4) / (7 / 8))
