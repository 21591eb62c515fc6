"""`k` (and the other retrieval factors) as an IRT factor: closed book (k=0) and oracle (k=1) are not applicable
by default, and `irt fit` prints each pipeline's observed accuracy beside its ability (issue 28, 7)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragrade.cli.main import main
from ragrade.irt.io import build_responses
from ragrade.job.analysis import applies, design_rank_ok


def _grid(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    skill = {"closed": -1.0, "bm25": 0.3, "dense": 0.5, "oracle": 1.5}
    rows = []
    for ret, ks in (("closed", [0]), ("oracle", [1]), ("bm25", [1, 3]), ("dense", [1, 3])):
        for k in ks:
            for icl in (0, 1):
                pid = f"llm=m|retriever={ret}|k={k}|icl={icl}"
                theta = skill[ret] + (0.3 if k == 3 else 0.0)
                for q in range(30):
                    p = 1 / (1 + np.exp(-(theta - (q - 15) / 8)))
                    rows.append(
                        {
                            "pipeline": pid,
                            "question_id": f"q{q:02d}",
                            "correct": int(rng.random() < p),
                            "llm": "m",
                            "retriever": ret,
                            "k": k,
                            "icl": icl,
                        }
                    )
    return pd.DataFrame(rows)


def test_closed_book_and_oracle_have_no_k_by_default() -> None:
    df = _grid()
    retr, k = build_responses(df, ["retriever", "k"]).factors
    assert k.levels == ["1", "3"] and k.n_not_applicable == 4 and k.not_applicable_seen == ["n/a"]
    assert retr.n_not_applicable == 0
    assert design_rank_ok(df, ["retriever", "k", "icl"])
    assert int((~applies(df.drop_duplicates("pipeline"), "k")).sum()) == 4
    # given explicitly, the user's values decide: k=0 not applicable, the oracle's k=1 a level -> confounded
    (_, strict) = build_responses(df, ["retriever", "k"], not_applicable={"k": ["0"]}).factors
    assert strict.levels == ["1", "3"] and strict.n_not_applicable == 2


def test_irt_fit_with_k_prints_observed_accuracy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    df = _grid()
    df.to_parquet(run / "responses.parquet")
    assert main(["irt", "fit", str(run), "--model", "1pl", "--factors", "retriever,k,icl"]) == 0
    out = capsys.readouterr().out
    assert "not applicable to 4 pipelines: n/a" in out
    assert "observed accuracy" in out
    best = df.groupby("pipeline")["correct"].mean()
    line = next(ln for ln in out.splitlines() if "llm=m|retriever=oracle|k=1|icl=0" in ln and "theta" in ln)
    assert f"{best['llm=m|retriever=oracle|k=1|icl=0']:.1%} of 30" in line
