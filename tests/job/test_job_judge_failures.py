"""The job's judge stage applies the failed-requests threshold of the sweep, exam and robustness stages."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.errors import FailedRequests
from ragrade.io import read_json, read_jsonl
from ragrade.job.analysis import run_judge_stage
from ragrade.job.config import DEMO_CONFIG, load_job_config
from ragrade.job.layout import RunLayout
from ragrade.qa.files import QAItem, write_qa


class Flaky:
    """A judge server that fails every request while ``broken``, then answers a score."""

    def __init__(self) -> None:
        self.broken = True
        self.asked = 0

    def __call__(self, body: dict[str, Any]) -> str:
        self.asked += 1
        if self.broken:
            raise RuntimeError("scripted server failure")
        return '{"score": 4, "reason": "close"}'


def _stage(tmp_path: Path, server: OpenAIServer) -> SimpleNamespace:
    overrides = {
        "llm": {"base_url": server.base_url, "max_retries": 0, "cache": False},
        "judge": {
            "enabled": True,
            "retrievers": ["closed"],
            "answer_llms": ["offline/extractive"],
            "metrics": ["correctness", "exact"],
            "llm": "openai/test-model",
        },
    }
    cfg = load_job_config(None, overrides, base=DEMO_CONFIG)
    layout = RunLayout(tmp_path / "run")
    items = [
        QAItem(f"q{i}", f"When was thing {i} built?", f"{1900 + i}", f"Thing {i} was built in {1900 + i}.", "c", "d")
        for i in range(4)
    ]
    write_qa(layout.judge / "qa.jsonl", items)  # the stage reuses it: no corpus needed
    return SimpleNamespace(cfg=cfg, layout=layout, progress=lambda *a: None)


def test_judge_stage_fails_with_exit_3_after_writing_results_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge")
    flaky = Flaky()
    with OpenAIServer(responder=flaky) as server:
        ctx = _stage(tmp_path, server)
        with pytest.raises(FailedRequests, match=r"4 of 4 LLM requests failed.*rerun `ragrade run`") as err:
            run_judge_stage(ctx)  # type: ignore[arg-type]
        assert err.value.exit_code == 3
        scores = ctx.layout.judge / "scores"
        assert read_json(scores / "summary.json")["totals"]["correctness"]["failed"] == 4  # results written first
        _, recs = read_jsonl(scores / "scores.jsonl")
        assert sum(r["status"] == "ok" for r in recs if r["metric"] == "exact") == 4
        flaky.broken, flaky.asked = False, 0
        out = run_judge_stage(ctx)  # type: ignore[arg-type]
    assert out["answers"] == 4 and flaky.asked == 4  # the rerun asks exactly the failed requests
    assert read_json(scores / "summary.json")["totals"]["correctness"] == {
        "ok": 4,
        "unparsed": 0,
        "failed": 0,
        "skipped": 0,
    }
