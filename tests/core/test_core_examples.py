"""The example configs shipped in examples/ stay valid as the config models change."""

from __future__ import annotations

from pathlib import Path

from ragrade.config import build_config
from ragrade.job.config import load_job_config
from ragrade.run.spec import SweepConfig, load_sweep_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_job_example_is_a_valid_job_config() -> None:
    cfg = load_job_config(EXAMPLES / "job.toml")
    assert [c.label for c in cfg.chunkers] == ["recursive-200", "sentence-120"]
    assert cfg.judge.enabled and "faithfulness" in cfg.judge.metrics
    assert cfg.llm.base_url == "http://localhost:8000/v1"


def test_sweep_example_is_a_valid_sweep_config() -> None:
    cfg = build_config(SweepConfig, load_sweep_file(EXAMPLES / "sweep.toml"))
    assert cfg.grid.icl == [0, 1, 2]
    assert list(cfg.indexes) == ["recursive-200"]
