"""The typed records at the seams of a grid run: the worker context and the rows a worker returns."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragrade.errors import BackendError
from ragrade.run.executors import worker_rows
from ragrade.run.spec import build_sweep_config
from ragrade.run.sweep import pipeline_context, worker_context


def test_the_worker_context_holds_absolute_paths_and_only_the_transform_settings_given(tmp_path: Path) -> None:
    cfg = build_sweep_config({"indexes": {"r": "idx"}, "seed": 7, "external": {"mine": "my_rag:answer"}})
    ctx = pipeline_context(cfg, ["q1", "q2"])
    assert ctx["indexes"] == {"r": str(Path("idx").resolve())}
    assert ctx["external"] == {"mine": "my_rag:answer"}
    assert (ctx["seed"], ctx["icl_pool"]) == (7, ["q1", "q2"])
    assert "transform_llm" not in ctx and "transform_options" not in ctx
    with_tx = pipeline_context(build_sweep_config({"transform_llm": "offline/student"}), [])
    assert with_tx["transform_llm"] == "offline/student"
    exam = tmp_path / "exam.jsonl"
    full = worker_context(exam, cfg, [])
    # the exam first, the shared settings, then the answer settings: the key order workers and fingerprints see
    assert list(full) == ["exam", *ctx, "answer"]
    assert full["exam"] == str(exam.resolve())
    assert full["answer"] == cfg.answer.model_dump(mode="json")


def test_a_worker_result_must_be_a_list_of_rows() -> None:
    rows: list[dict[str, object]] = [{"item_id": "q1"}, {"item_id": "q2", "error": None}]
    assert worker_rows("w:f", rows) is rows
    assert worker_rows("w:f", []) == []
    with pytest.raises(BackendError, match="worker w:f returned dict"):
        worker_rows("w:f", {"item_id": "q1"})
    with pytest.raises(BackendError, match="not a list of rows"):
        worker_rows("w:f", [{"item_id": "q1"}, "q2"])
