"""Every summary line that names a best pipeline names the best real one, as the report does: the oracle
(handed the gold passage) is named as the upper bound it is, an offline baseline as a baseline."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tests.job.test_job_run_cli import _corpus

from ragrade.cli.main import main
from ragrade.report.headline import best_pipelines

ORACLE = "llm=openai/m|retriever=oracle|k=1|icl=0|chunker=none|prompt=default"
BM25 = "llm=openai/m|retriever=bm25|k=3|icl=0|chunker=r64|prompt=default"
CLOSED = "llm=openai/m|retriever=closed|k=0|icl=0|chunker=none|prompt=default"
OFFLINE = "llm=offline/student|retriever=bm25|k=3|icl=0|chunker=r64|prompt=default"


def test_the_best_real_pipeline_is_named_and_the_oracle_is_the_bound() -> None:
    summary = pd.DataFrame({"pipeline": [CLOSED, ORACLE, BM25, OFFLINE], "accuracy": [0.40, 0.95, 0.70, 0.90]})
    got = best_pipelines(summary)
    assert got["best_pipeline"] == BM25 and got["best_accuracy"] == 0.7
    assert got["best"] == "openai/m · bm25 · k=3 · icl=0 · r64 · prompt=default"  # the report's label
    assert got["upper_bound_accuracy"] == 0.95 and "(upper bound): given the gold passage" in str(got["upper_bound"])


def test_only_offline_baselines_name_the_best_of_them_as_a_baseline_never_the_oracle() -> None:
    oracle = ORACLE.replace("openai/m", "offline/student")
    got = best_pipelines(pd.DataFrame({"pipeline": [oracle, OFFLINE], "accuracy": [1.0, 0.6]}))
    assert got["best_pipeline"] == OFFLINE and str(got["best"]).endswith("(offline baseline)")
    assert got["upper_bound_accuracy"] == 1.0
    assert best_pipelines(pd.DataFrame({"pipeline": [BM25], "accuracy": [float("nan")]})) == {}


@pytest.mark.slow
def test_ragrade_run_prints_the_best_real_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _corpus(tmp_path / "cfg" / "docs")
    cfg = tmp_path / "cfg" / "job.toml"
    cfg.write_text(
        '[corpus]\npaths = ["docs"]\n'
        '[[chunkers]]\nstrategy = "recursive"\nsize = 64\noverlap = 8\n'
        "[exam]\nn = 12\nmin_chunk_chars = 60\n"
        '[sweep]\nretrievers = ["closed", "bm25", "oracle"]\nicl = [0]\n'
        "[irt]\nenabled = false\n[robust]\nenabled = false\n[report]\nenabled = false\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    sweep = [line for line in err.splitlines() if "best=" in line]
    assert len(sweep) == 1 and "oracle" not in sweep[0], err
    stages = json.loads((out / "stages.json").read_text(encoding="utf-8"))["stages"]
    summary = stages["sweep"]["summary"]  # the demo student: every pipeline an offline baseline
    assert "retriever=oracle" not in str(summary["best_pipeline"]) and "(offline baseline)" in str(summary["best"])
    assert "oracle" in str(summary["upper_bound"]) and summary["upper_bound_accuracy"] >= summary["best_accuracy"]
