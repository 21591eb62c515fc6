"""The job's `[robust]` keys that the robustness verbs also take: the question cap and `min_positives`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragrade.errors import ConfigError
from ragrade.job.config import DEMO_CONFIG, load_job_config
from ragrade.job.layout import RunLayout
from ragrade.job.runner import build_stages, stage_hashes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "job.toml"


def test_example_shows_the_question_cap_and_min_positives(tmp_path: Path) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    assert "\nlimit = 60" in text and "# min_positives = 5" in text
    mine = tmp_path / "job.toml"
    mine.write_text(text.replace("# min_positives = 5", "min_positives = 5"), encoding="utf-8")
    cfg = load_job_config(mine)
    assert cfg.robust.limit == 60 and cfg.robust.min_positives == 5
    assert load_job_config(EXAMPLE).robust.min_positives == 0


def test_min_positives_reaches_the_robust_stages(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    base = stage_hashes(build_stages(load_job_config(None, base=DEMO_CONFIG), layout))
    cfg = load_job_config(None, {"robust": {"min_positives": 3}}, base=DEMO_CONFIG)
    changed = stage_hashes(build_stages(cfg, layout))
    for name in ("robust:build", "robust:noise"):
        assert base[name] != changed[name], name
    assert base["sweep"] == changed["sweep"]
    with pytest.raises(ConfigError):
        load_job_config(None, {"robust": {"min_positives": 6}}, base=DEMO_CONFIG)
