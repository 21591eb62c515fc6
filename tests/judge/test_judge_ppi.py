"""PPI++ against a direct numpy computation of its formula, and on simulated data where the truth is known."""

from __future__ import annotations

import numpy as np
import pytest

from ragrade.judge.ppi import classical_mean, combine_strata, estimate, power_tuned_lambda, ppi_mean

Z = 1.959963984540054


def _direct(y: np.ndarray, f: np.ndarray, fu: np.ndarray) -> tuple[float, float, float, float]:
    """PPI++ written out term by term, one problem at a time."""
    n, big_n = len(y), len(fu)
    cov = float(np.cov(np.vstack([y, f]), ddof=1)[0, 1])
    var_all = float(np.var(np.concatenate([f, fu]), ddof=1))
    lam = min(1.0, max(0.0, cov / ((1 + n / big_n) * var_all)))
    theta = lam * fu.mean() + (y - lam * f).mean()
    se = np.sqrt(np.var(y - lam * f, ddof=1) / n + lam**2 * np.var(fu, ddof=1) / big_n)
    return theta, theta - Z * se, theta + Z * se, lam


def test_hand_worked_example() -> None:
    y = np.array([1.0, 0.0, 1.0, 1.0])
    f = np.array([1.0, 1.0, 1.0, 0.0])
    fu = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    # cov(y, f) = -1/6 < 0: the judge carries no usable signal, lam clips to 0 and PPI is the human mean
    theta, lo, hi, lam = ppi_mean(y, f, fu)
    assert float(lam) == 0.0
    assert float(theta) == pytest.approx(0.75)
    half = Z * np.sqrt(0.25 / 4)  # var(y) with ddof=1 is 0.25
    assert (float(lo), float(hi)) == pytest.approx((0.75 - half, 0.75 + half))
    # a forced lam = 1 (plain PPI): mean(fu) + mean(y - f) = 4/6 + 0
    t1, *_ = ppi_mean(y, f, fu, lam=1.0)
    assert float(t1) == pytest.approx(4 / 6)


def test_matches_direct_formula_on_random_problems() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        n, big_n = int(rng.integers(5, 60)), int(rng.integers(5, 300))
        y = rng.normal(size=n)
        f = 0.8 * y + rng.normal(scale=0.7, size=n) + 0.4
        fu = rng.normal(size=big_n) * 1.2 + 0.4
        got = ppi_mean(y, f, fu)
        want = _direct(y, f, fu)
        assert [float(g) for g in got] == pytest.approx(list(want), rel=1e-10, abs=1e-12)


def test_vectorised_rows_equal_single_calls() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, size=(5, 30)).astype(float)
    f = np.clip(y + rng.normal(0.2, 0.3, size=y.shape), 0, 1)
    fu = rng.uniform(size=(5, 200))
    rows = ppi_mean(y, f, fu)
    for i in range(5):
        single = ppi_mean(y[i], f[i], fu[i])
        assert [float(r[i]) for r in rows] == pytest.approx([float(s) for s in single])


def test_constant_judge_falls_back_to_human_only() -> None:
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    est = estimate(y, np.ones(5), np.ones(50))
    assert est.lam == 0.0
    assert est.ppi_estimate == pytest.approx(0.6)
    assert est.ppi_ci == pytest.approx(est.human_only_ci)
    assert est.judge_mean == 1.0


def test_power_tuning_is_positive_for_a_good_judge() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=200)
    lam = float(power_tuned_lambda(y, y + rng.normal(scale=0.1, size=200), rng.normal(size=2000)))
    assert 0.8 < lam <= 1.0


def _simulate(n_labels: int, reps: int, seed: int) -> dict[str, float]:
    """A biased, noisy judge over 10,000 items per repetition; the human mean is 0.55."""
    rng = np.random.default_rng(seed)
    truth, total = 0.55, 10_000
    cover = {"ppi": 0, "human": 0, "judge": 0}
    width = {"ppi": 0.0, "human": 0.0}
    for start in range(0, reps, 100):
        r = min(100, reps - start)
        y = (rng.uniform(size=(r, total)) < truth).astype(float)
        # the judge: over-generous (+0.2 on average), noisy, agreeing with humans only partly
        f = np.clip(0.6 * y + 0.35 + rng.normal(scale=0.25, size=y.shape), 0.0, 1.0)
        yl, fl, fu = y[:, :n_labels], f[:, :n_labels], f[:, n_labels:]
        _, lo, hi, _ = ppi_mean(yl, fl, fu)
        _, hlo, hhi = classical_mean(yl)
        _, jlo, jhi = classical_mean(f)
        cover["ppi"] += int(np.sum((lo <= truth) & (truth <= hi)))
        cover["human"] += int(np.sum((hlo <= truth) & (truth <= hhi)))
        cover["judge"] += int(np.sum((jlo <= truth) & (truth <= jhi)))
        width["ppi"] += float(np.sum(hi - lo))
        width["human"] += float(np.sum(hhi - hlo))
    return {**{f"cover_{k}": v / reps for k, v in cover.items()}, **{f"width_{k}": v / reps for k, v in width.items()}}


@pytest.mark.parametrize("n_labels", [100, 300, 500])
def test_simulation_coverage_1000_reps(n_labels: int) -> None:
    """Vectorised: about 0.25 s per label count."""
    res = _simulate(n_labels, reps=1000, seed=10 + n_labels)
    assert res["cover_ppi"] >= 0.93
    assert res["cover_human"] >= 0.93
    assert res["width_ppi"] < 0.9 * res["width_human"]
    assert res["cover_judge"] < 0.05


def test_combine_strata_weights() -> None:
    out = combine_strata([(0.5, 0.4, 0.6, 100.0), (0.8, 0.7, 0.9, 300.0)])
    assert out["estimate"] == pytest.approx(0.5 * 0.25 + 0.8 * 0.75)
    se = 0.1 / Z
    half = Z * np.sqrt((se * 0.25) ** 2 + (se * 0.75) ** 2)
    assert out["ci"] == pytest.approx([out["estimate"] - half, out["estimate"] + half])
