from __future__ import annotations

import math
from pathlib import Path

import pytest

from ragrade.stats import bootstrap_ci, wilson_interval


def test_wilson_hand_worked() -> None:
    # 8/10 at z=1.96: centre = (0.8 + 0.19208)/1.38416 = 0.71681, half = 1.96*sqrt(0.016+0.0009604)/1.38416 = 0.18439
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.49016, abs=2e-4)
    assert hi == pytest.approx(0.94332, abs=2e-4)


def test_wilson_edges() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and 0.1 < hi < 0.2
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_bootstrap_contains_mean_and_is_seeded() -> None:
    vals = [0, 1] * 50
    a = bootstrap_ci(vals, seed=1)
    assert a == bootstrap_ci(vals, seed=1)
    assert a[0] < 0.5 < a[1]
    assert math.isnan(bootstrap_ci([])[0])


def test_summary_csv_reads_back_the_same_floats(tmp_path: Path) -> None:
    import pandas as pd

    from ragrade.run.summary import write_csv

    acc = 2 / 3
    df = pd.DataFrame({"pipeline": ["a", "b"], "accuracy": [acc, 0.1 + 0.2], "ci_low": [acc, 1e-9 / 3],
                       "ci_high": [acc, 0.999999949]})  # fmt: skip
    write_csv(tmp_path / "s.csv", df)
    back = pd.read_csv(tmp_path / "s.csv")
    assert back["accuracy"].tolist() == df["accuracy"].tolist()  # exact, not to 6 digits
    assert back["ci_low"].tolist() == df["ci_low"].tolist() and back["ci_high"].tolist() == df["ci_high"].tolist()
    row = back.iloc[0]
    assert row["ci_low"] <= row["accuracy"] <= row["ci_high"]  # a zero-width interval still holds its estimate
