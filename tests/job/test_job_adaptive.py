"""The demo's adaptive rerun: the sweep's answers replayed adaptively, compared with the full grid, reported."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ragrade.io import read_json
from ragrade.job.demo import demo_config
from ragrade.job.progress import Display
from ragrade.job.runner import run_job

pytestmark = pytest.mark.slow


class _Quiet(Display):
    def _line(self, text: str) -> None:
        pass


def test_demo_adaptive_replay(tmp_path: Path) -> None:
    over = {"sweep": {"limit": 40}, "robust": {"enabled": False}, "irt": {"improve_steps": 0}}
    cfg = demo_config(small=True, overrides=over)
    assert cfg.adaptive.enabled and cfg.adaptive.replay
    out = tmp_path / "demo"
    result = run_job(cfg, out, display=_Quiet())
    assert result.stages["adaptive"]["status"] == "ran"
    summary = pd.read_csv(out / "adaptive" / "summary.csv")
    full = pd.read_csv(out / "sweep" / "summary.csv")
    assert len(summary) == len(full)
    assert summary["pipeline"].str.contains("llm=replay/offline/student").all()
    comp = read_json(out / "adaptive" / "comparison.json")
    assert comp["compared"] == len(full) and 0 < comp["share"] <= 1
    assert comp["requests"] == len(pd.read_parquet(out / "adaptive" / "responses.parquet"))
    assert comp["mae"] < 0.1
    html = (out / "report.html").read_text()
    assert "What it cost" in html and "Adaptive leaderboard" in html
    stage = result.stages["adaptive"]["summary"]
    assert json.dumps(stage) and stage["requests"] == comp["requests"]
