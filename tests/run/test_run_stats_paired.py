from __future__ import annotations

import math

import pytest

from ragrade.stats import adjust_pvalues, mcnemar_exact, paired_bootstrap_ci


def test_mcnemar_exact_hand_worked() -> None:
    # b=5, c=1: P(X<=1 | n=6, 1/2) = (1 + 6)/64; two-sided 14/64
    assert mcnemar_exact(5, 1) == pytest.approx(14 / 64)
    assert mcnemar_exact(1, 5) == pytest.approx(14 / 64)
    # b=0, c=7: 2 * 1/128
    assert mcnemar_exact(0, 7) == pytest.approx(2 / 128)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(20, 20) == 1.0
    # large n stays finite and matches the normal approximation's order of magnitude
    p = mcnemar_exact(600, 500)
    assert 0.001 < p < 0.01
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_holm_bonferroni_bh_hand_worked() -> None:
    p = [0.01, 0.04, 0.03, 0.2]
    # Holm: sorted 0.01*4=0.04, 0.03*3=0.09, 0.04*2=0.08 -> 0.09 (monotone), 0.2*1=0.2
    assert adjust_pvalues(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert adjust_pvalues(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.8])
    # BH: 0.2*4/4=0.2, 0.04*4/3=0.0533, 0.03*4/2=0.06 -> min(0.06, 0.0533)=0.0533, 0.01*4=0.04
    assert adjust_pvalues(p, "bh") == pytest.approx([0.04, 0.053333, 0.053333, 0.2], abs=1e-5)
    assert adjust_pvalues([], "holm") == []
    with pytest.raises(ValueError):
        adjust_pvalues([0.5], "magic")
    with pytest.raises(ValueError):
        adjust_pvalues([1.5])


def test_paired_bootstrap() -> None:
    a = [1, 1, 1, 0] * 25
    assert paired_bootstrap_ci(a, a) == (0.0, 0.0)  # identical systems: every resample differs by 0
    b = [0, 1, 1, 0] * 25  # a wins on a quarter of the items, never loses
    lo, hi = paired_bootstrap_ci(a, b, seed=3)
    assert 0.0 < lo < 0.25 < hi < 0.5
    assert (lo, hi) == paired_bootstrap_ci(a, b, seed=3)
    assert math.isnan(paired_bootstrap_ci([], [])[0])
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1, 0], [1])
