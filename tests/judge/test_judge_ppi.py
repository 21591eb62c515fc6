"""PPI++ against a hand-worked example, ppi_py's numbers, a direct numpy computation, and simulated data.

The conventions are ppi_py's (ppi-python 0.2.3): the covariance in the power-tuning lambda and the standard
errors divide by n (N), not n - 1. The literal expected values in PPI_PY_CASES were computed by ppi_py's
``ppi_mean_pointestimate`` / ``ppi_mean_ci`` in a throwaway venv (the suite does not need it).
"""

from __future__ import annotations

import numpy as np
import pytest

from ragrade.judge.ppi import classical_mean, combine_strata, estimate, power_tuned_lambda, ppi_mean

Z = 1.959963984540054


def _direct(y: np.ndarray, f: np.ndarray, fu: np.ndarray) -> tuple[float, float, float, float]:
    """PPI++ written out term by term, one problem at a time (ppi_py's conventions: 1/n, 1/N)."""
    n, big_n = len(y), len(fu)
    cov = float(np.cov(np.vstack([y, f]), ddof=0)[0, 1])
    var_all = float(np.var(np.concatenate([f, fu]), ddof=1))
    lam = min(1.0, max(0.0, cov / ((1 + n / big_n) * var_all)))
    theta = lam * fu.mean() + (y - lam * f).mean()
    se = np.sqrt(np.var(y - lam * f, ddof=0) / n + lam**2 * np.var(fu, ddof=0) / big_n)
    return theta, theta - Z * se, theta + Z * se, lam


def test_hand_worked_example() -> None:
    y = np.array([1.0, 0.0, 1.0, 1.0])
    f = np.array([1.0, 1.0, 1.0, 0.0])
    fu = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    # cov(y, f) = -1/8 < 0: the judge carries no usable signal, lam clips to 0 and PPI is the human mean
    theta, lo, hi, lam = ppi_mean(y, f, fu)
    assert float(lam) == 0.0
    assert float(theta) == pytest.approx(0.75)
    # var_n(y) = 3/16 (ppi_py's convention; it was 1/4 with n - 1 before, an interval 15% wider)
    half = Z * np.sqrt(3 / 16 / 4)
    assert (float(lo), float(hi)) == pytest.approx((0.75 - half, 0.75 + half))
    # a forced lam = 1 (plain PPI): mean(fu) + mean(y - f) = 4/6 + 0
    t1, *_ = ppi_mean(y, f, fu, lam=1.0)
    assert float(t1) == pytest.approx(4 / 6)


def test_hand_worked_power_tuned_example() -> None:
    y = np.array([1.0, 0.0, 1.0, 1.0])
    f = np.array([1.0, 0.0, 1.0, 0.0])
    fu = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    # n = 4, N = 6; cov_n(y, f) = (1/8 + 3/8 + 1/8 - 1/8) / 4 = 1/8; var(f and fu), 6 ones in 10, ddof 1: 4/15
    # lam = (1/8) / ((1 + 4/6) * 4/15) = 9/32
    # theta = lam * mean(fu) + mean(y - lam f) = 9/32 * 2/3 + (3/4 - 9/32 * 1/2) = 3/16 + 39/64 = 51/64
    # y - lam f = (23/32, 0, 23/32, 1): var_n = 561/4096; var_N(fu) = 2/9
    # var = 561/4096 / 4 + (9/32)^2 * 2/9 / 6 = 561/16384 + 48/16384 = 609/16384
    theta, lo, hi, lam = ppi_mean(y, f, fu)
    assert float(lam) == pytest.approx(9 / 32, abs=1e-15)
    assert float(theta) == pytest.approx(51 / 64, abs=1e-15)
    half = Z * np.sqrt(609 / 16384)
    assert (float(lo), float(hi)) == pytest.approx((51 / 64 - half, 51 / 64 + half), abs=1e-12)
    # ppi_py's ppi_mean_ci(y, f, fu, alpha=0.05) on the same data
    assert (float(lo), float(hi)) == pytest.approx((0.41900121, 1.17474879), abs=1e-8)
    # the human-only interval: var_n(y) = 3/16, as ppi_py's classical_mean_ci
    _, hlo, hhi = classical_mean(y)
    assert (float(hlo), float(hhi)) == pytest.approx((0.3256553497214356, 1.1743446502785644), abs=1e-12)


# (y, f, f_unlabeled, ppi_py's (estimate, low, high) at 95%, its (low, high) at 90%); lam is 0.65 and 0.62 in
# the first two
PPI_PY_CASES = [
    (
        [0.77, 0.44, 0.86, 0.7, 0.09],
        [0.61, 0.57, 0.9, 0.8, 0.02],
        [0.43, 0.93, 0.68, 0.84, 0.5, 0.3, 0.6, 0.16, 0.84],
        (0.5763554912482792, 0.42959322951428575, 0.7231177529822728),
        (0.4531887185846425, 0.699522263911916),
    ),
    (
        [2.0, 4.0, 1.0, 4.0, 4.0, 2.0, 1.0, 5.0],
        [2.0, 5.0, 2.0, 5.0, 5.0, 1.0, 1.0, 5.0],
        [3.0, 1.0, 3.0, 1.0, 4.0, 4.0, 5.0, 4.0, 2.0, 5.0, 3.0, 2.0, 5.0, 2.0, 1.0],
        (2.7203928154205608, 2.116207809051877, 3.3245778217892443),
        (2.2133447742758445, 3.227440856565277),
    ),
    (
        [0.19, 0.13, 0.48, 0.23, 0.67, 0.44, 0.83, 0.7, 0.31, 0.83, 0.8, 0.39],
        [0.33, 0.4, 0.62, 0.47, 0.78, 0.6, 1.0, 0.51, 0.35, 0.84, 0.77, 0.43],
        [
            0.2,
            0.7,
            0.52,
            0.61,
            0.79,
            0.67,
            0.6,
            0.6,
            0.37,
            0.13,
            0.49,
            0.29,
            0.47,
            0.87,
            0.31,
            0.15,
            0.35,
            0.36,
            0.7,
            0.6,
            0.81,
            0.7,
            0.47,
            0.83,
            0.25,
            0.12,
            0.18,
            0.75,
            0.52,
            0.25,
        ],
        (0.4372708604387966, 0.3386286115122625, 0.5359131093653307),
        (0.35448767554495, 0.5200540453326432),
    ),
    (
        [3.0, 5.0, 3.0, 5.0, 1.0, 3.0, 4.0, 3.0, 3.0, 1.0, 2.0, 2.0, 2.0, 4.0, 4.0, 4.0, 2.0, 5.0, 1.0, 2.0],
        [2.0, 5.0, 5.0, 5.0, 3.0, 3.0, 5.0, 3.0, 3.0, 3.0, 4.0, 2.0, 4.0, 4.0, 5.0, 5.0, 2.0, 5.0, 1.0, 1.0],
        [
            1.0,
            3.0,
            5.0,
            1.0,
            3.0,
            4.0,
            2.0,
            4.0,
            2.0,
            5.0,
            3.0,
            3.0,
            1.0,
            3.0,
            5.0,
            1.0,
            4.0,
            3.0,
            4.0,
            4.0,
            3.0,
            2.0,
            4.0,
            1.0,
            3.0,
            1.0,
            4.0,
            4.0,
            1.0,
            4.0,
            3.0,
            4.0,
            1.0,
            1.0,
            3.0,
            1.0,
            2.0,
            4.0,
            1.0,
            4.0,
        ],
        (2.641881217086015, 2.191941818622838, 3.0918206155491923),
        (2.2642801706850544, 3.019482263486976),
    ),
]


@pytest.mark.parametrize("case", range(len(PPI_PY_CASES)))
def test_equals_ppi_py(case: int) -> None:
    y, f, fu, at95, at90 = (np.asarray(v, dtype=np.float64) for v in PPI_PY_CASES[case])
    est = estimate(y, f, fu)
    assert (est.ppi_estimate, *est.ppi_ci) == pytest.approx(tuple(at95), abs=1e-12)
    assert 0.0 < est.lam < 1.0
    _, lo, hi, _ = ppi_mean(y, f, fu, level=0.90)
    assert (float(lo), float(hi)) == pytest.approx(tuple(at90), abs=1e-12)


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
