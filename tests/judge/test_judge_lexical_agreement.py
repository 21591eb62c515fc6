from __future__ import annotations

import math

import pytest

from ragrade.judge.agreement import binarize, cohen_kappa, spearman
from ragrade.judge.lexical import best_over_references, exact_match, normalize_answer, token_f1


def test_normalize_squad_style() -> None:
    assert normalize_answer("The  Cat's hat!") == "cats hat"
    assert normalize_answer("An apple, a pear.") == "apple pear"
    assert normalize_answer("  THEORY ") == "theory"  # 'the' inside a word stays


def test_exact_match_and_token_f1_hand_worked() -> None:
    assert exact_match("The Eiffel Tower.", "eiffel tower") == 1
    assert exact_match("Eiffel", "eiffel tower") == 0
    # pred tokens [cat, sat, on, mat], ref [cat, on, mat]: P = 3/4, R = 1, F1 = 6/7
    assert token_f1("the cat sat on the mat", "a cat on a mat") == pytest.approx(6 / 7)
    # repeated tokens count with multiplicity: pred [paris, paris], ref [paris]: P = 1/2, R = 1
    assert token_f1("Paris Paris", "Paris") == pytest.approx(2 / 3)
    assert token_f1("", "") == 1.0
    assert token_f1("the", "Paris") == 0.0  # prediction normalises to nothing
    assert token_f1("London", "Paris") == 0.0


def test_best_over_references() -> None:
    em, f1 = best_over_references("William Shakespeare", ["Shakespeare", "William Shakespeare"])
    assert (em, f1) == (1, 1.0)
    em, f1 = best_over_references("Shakespeare wrote it", ["Shakespeare", "Marlowe"])
    assert em == 0 and f1 == pytest.approx(0.5)  # P = 1/3, R = 1
    with pytest.raises(ValueError):
        best_over_references("x", [])


def test_spearman_hand_worked_with_ties() -> None:
    # ranks of y with a tie: [1, 2, 3.5, 5, 3.5]; rho = 8 / sqrt(10 * 9.5)
    out = spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7])
    assert out["rho"] == pytest.approx(8 / math.sqrt(95))
    assert out["n"] == 5
    from scipy import stats

    assert out["rho"] == pytest.approx(stats.spearmanr([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]).statistic)


def test_spearman_drops_incomplete_pairs_and_reports_n() -> None:
    out = spearman([1, 2, None, 3, 4], [2, 4, 1, None, 8])
    assert out["n"] == 3 and out["rho"] == pytest.approx(1.0)
    assert spearman([1, 2], [1, 2])["rho"] is None
    assert spearman([1, 1, 1], [1, 2, 3])["note"] == "one metric is constant"


def test_cohen_kappa_hand_worked() -> None:
    # observed 4/5; chance 0.6*0.4 + 0.4*0.6 = 0.48; kappa = 0.32 / 0.52
    out = cohen_kappa([1, 1, 0, 0, 1], [1, 0, 0, 0, 1])
    assert out["observed"] == pytest.approx(0.8)
    assert out["expected"] == pytest.approx(0.48)
    assert out["kappa"] == pytest.approx(0.32 / 0.52)
    assert cohen_kappa([1, 0, 1], [0, 1, 0])["kappa"] == pytest.approx(-0.8)  # po=0, pe=2*(2/3*1/3)=4/9
    assert cohen_kappa([1, 1], [1, 1])["kappa"] is None
    assert cohen_kappa([None], [1])["n"] == 0


def test_binarize_keeps_missing() -> None:
    assert binarize([5, 4, 3.5, None], 4) == [1.0, 1.0, 0.0, None]
