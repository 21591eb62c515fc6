"""`ragrade --dry-run` never calls a user's external system: it counts what the run would send."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import make_exam

from ragrade.cli.main import main


def test_dry_run_counts_external_calls_and_makes_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_exam(tmp_path / "exam.jsonl", 5)
    calls: list[str] = []
    mod = types.ModuleType("ragrade_test_external_dry")

    def answer(req: dict[str, Any]) -> dict[str, int]:
        calls.append(req["id"])
        return {"answer": 0}

    mod.answer = answer  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    try:
        out = tmp_path / "run"
        args = ["exam", "take", str(tmp_path / "exam.jsonl"), "--out", str(out)]
        target = f"{mod.__name__}:answer"
        rc = main(["--dry-run", *args, "--external", f"mine={target}", "--llm", "offline/student"])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        assert calls == []  # the user's system was never called
        counts = json.loads(captured.out.strip().splitlines()[-1])["dry_run"]
        external = [c for c in counts if c["llm"] == "external/mine"]
        assert external and external[0]["generate_requests"] == 5
        assert main([*args, "--external", f"mine={target}", "--llm", "offline/student"]) == 0
        assert sorted(calls) == [f"q{i:03d}" for i in range(5)]  # a real run calls it once per question
    finally:
        sys.modules.pop(mod.__name__, None)
