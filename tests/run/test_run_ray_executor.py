"""The Ray executor (a local instance) gives the same responses as the local executor."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from tests.run.fakes import make_exam

from ragrade.run.executors import RayExecutor
from ragrade.run.spec import build_sweep_config
from ragrade.run.summary import VOLATILE_COLUMNS, read_responses
from ragrade.run.sweep import run_sweep


@pytest.mark.ray
@pytest.mark.slow
def test_ray_matches_local(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 24)
    cfg = build_sweep_config(
        {
            "grid": {
                "llms": ["py/tests.run.fakes:make_llm", "py/tests.run.fakes:make_generating_llm"],
                "retrievers": ["closed", "oracle", "external:py"],
                "icl": [0, 1],
            },
            "external": {"py": "tests.run.fakes:external_answer"},
            "shard_size": 5,
            "icl_pool": 3,
        }
    )
    local = run_sweep(exam, cfg, tmp_path / "local")
    try:
        # the executor starts its own local instance (2 CPUs), passing this interpreter's import path
        remote = run_sweep(exam, cfg, tmp_path / "ray", executor=RayExecutor(workers=2))
        assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 2
    finally:
        ray.shutdown()
    vol = list(VOLATILE_COLUMNS)
    pd.testing.assert_frame_equal(
        read_responses(local.run_dir).drop(columns=vol), read_responses(remote.run_dir).drop(columns=vol)
    )
    assert len(remote.responses) == 12 * 21
    from ragrade.run.manifest import read_manifest

    assert read_manifest(remote.run_dir)["executor"]["executor"] == "ray"
