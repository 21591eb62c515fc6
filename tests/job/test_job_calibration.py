"""The [calibration] table of a job config: its stage after the judges, its paths, its output."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ragrade.errors import ConfigError
from ragrade.io import read_json, write_jsonl
from ragrade.job.analysis import run_calibration_stage
from ragrade.job.config import DEMO_CONFIG, JobConfig, load_job_config
from ragrade.job.layout import RunLayout
from ragrade.job.runner import build_stages, stage_hashes


def _config(tmp_path: Path, labels: str = "labels.jsonl") -> JobConfig:
    toml = tmp_path / "job.toml"
    toml.write_text(
        f'[corpus]\ndemo = true\n[judge]\nenabled = true\nmetrics = ["claims"]\nllm = "offline/judge"\n'
        f'[calibration]\nhuman = "{labels}"\nmin_labels = 5\n',
        encoding="utf-8",
    )
    return load_job_config(toml)


def test_calibration_stage_follows_the_judges(tmp_path: Path) -> None:
    (tmp_path / "labels.jsonl").write_text("{}\n")
    cfg = _config(tmp_path)
    assert cfg.calibration.human == str(tmp_path / "labels.jsonl")  # relative to the config file
    names = [s.name for s in build_stages(cfg, RunLayout(tmp_path / "run"))]
    assert names.index("calibration") == names.index("judge") + 1 and names[-1] == "report"
    h1 = stage_hashes(build_stages(cfg, RunLayout(tmp_path / "run")))
    (tmp_path / "labels.jsonl").write_text('{"id": 1}\n{}\n')  # new labels: recalibrate, do not re-judge
    h2 = stage_hashes(build_stages(cfg, RunLayout(tmp_path / "run")))
    assert h1["calibration"] != h2["calibration"] and h1["judge"] == h2["judge"]
    plain = [s.name for s in build_stages(load_job_config(None, base=DEMO_CONFIG), RunLayout(tmp_path / "r"))]
    assert "calibration" not in plain


def test_calibration_needs_the_judges(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="calibration"):
        load_job_config(None, {"calibration": {"human": "x.jsonl"}, "judge": {"enabled": False}}, base=DEMO_CONFIG)


def test_calibration_stage_writes_calibration_json(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    layout = RunLayout(tmp_path / "run")
    scores = layout.judge / "scores" / "scores.jsonl"
    recs = [{"config": "p", "id": f"q{i}", "metric": "claims", "status": "ok", "score": (i % 5) / 4} for i in range(30)]
    write_jsonl(scores, recs, kind="judge_scores", version=1)
    (tmp_path / "labels.jsonl").write_text(
        "".join(json.dumps({"id": f"q{i}", "metric": "claims", "label": (i % 3) / 2}) + "\n" for i in range(8))
    )
    out = run_calibration_stage(SimpleNamespace(cfg=cfg, layout=layout))  # type: ignore[arg-type]
    assert out == {"metrics": ["claims"]}
    row = read_json(layout.judge / "scores" / "calibration" / "calibration.json")["metrics"]["claims"]["configs"]["p"]
    assert row["n_labels"] == 8 and row["n_unlabeled"] == 22
    assert {"judge_mean", "ppi_estimate", "ppi_ci", "human_only_ci"} <= set(row)
