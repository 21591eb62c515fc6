"""`compare --all`: each interval says whether it is adjusted, and the adjusted one matches the Holm verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragrade.cli.main import main
from ragrade.run.compare import compare_many
from ragrade.stats import paired_bootstrap_ci


def _frame() -> pd.DataFrame:
    n = 60
    a, b, c = np.ones(n, dtype=int), np.ones(n, dtype=int), np.ones(n, dtype=int)
    b[:7] = 0  # a right, b wrong on 7 questions
    a[7:8] = 0  # the reverse on 1: McNemar p 0.07, Holm over 3 pairs 0.21
    c[30:33] = 0
    c[:2] = 0
    rows = [
        {"pipeline": pid, "question_id": f"q{i:02d}", "correct": int(v)}
        for pid, col in (("a", a), ("b", b), ("c", c))
        for i, v in enumerate(col)
    ]
    return pd.DataFrame(rows)


def test_adjusted_interval_is_bonferroni_level_and_printed_beside_the_unadjusted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    df = _frame()
    comps = {(c.a, c.b): c for c in compare_many(df, ["a", "b", "c"], n_boot=500, seed=3)}
    ab = comps[("a", "b")]
    x = df[df.pipeline == "a"]["correct"].to_numpy(float)  # question ids sort as they are listed
    y = df[df.pipeline == "b"]["correct"].to_numpy(float)
    assert ab.ci_adjusted_level == pytest.approx(1 - 0.05 / 3)
    assert (ab.ci_adjusted_low, ab.ci_adjusted_high) == paired_bootstrap_ci(
        x, y, n_boot=500, level=1 - 0.05 / 3, seed=3
    )
    assert ab.ci_adjusted_low is not None and ab.ci_adjusted_high is not None
    assert ab.ci_adjusted_low <= ab.ci_low and ab.ci_adjusted_high >= ab.ci_high
    assert ab.ci_low > 0 and ab.ci_adjusted_low <= 0 and ab.verdict == "no significant difference"
    run = tmp_path / "run"
    run.mkdir()
    df.to_parquet(run / "responses.parquet")
    assert main(["compare", str(run), "--all", "--top", "3", "--n-boot", "500"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "difference A-B" in ln]
    assert len(lines) == 3
    for ln in lines:
        assert "unadjusted" in ln and "adjusted for the pairs compared" in ln and "(by the adjusted p)" in ln
    (line,) = [ln for ln in lines if "A-B +10.0%" in ln]
    assert "(the unadjusted interval excludes 0; the verdict is the holm-adjusted exact McNemar test" in line


def test_a_significant_verdict_beside_an_interval_holding_zero_says_why() -> None:
    # issue 36.8: "[-1.0%, +16.0%]" printed beside "a better" (Holm, p 0.032) with no note
    from ragrade.run.compare import interval_text

    record = {"ci_level": 0.95, "ci_low": 0.004, "ci_high": 0.15, "correction": "holm", "verdict": "a better",
              "ci_adjusted_low": -0.01, "ci_adjusted_high": 0.16, "ci_adjusted_level": 1 - 0.05 / 3,
              "a_only": 9, "b_only": 1}  # fmt: skip
    text = interval_text(record)
    assert "[-1.0%, +16.0%]" in text
    assert "holm-adjusted exact McNemar test on 10 discordant questions, which rejects" in text
    assert "adjusted interval of the accuracy difference still includes 0" in text
    plain = {**record, "correction": "none", "ci_adjusted_low": None, "ci_adjusted_high": None, "ci_low": -0.002}
    assert "the bootstrap interval of the accuracy difference still includes 0" in interval_text(plain)
    agreeing = {**record, "ci_adjusted_low": 0.001}  # verdict and interval agree: no note
    assert "(" not in interval_text(agreeing)
