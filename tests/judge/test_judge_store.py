"""Judge scores live in the run's journal: stale answers leave it, an older scores.jsonl is carried over."""

from __future__ import annotations

import json
from pathlib import Path

from ragrade.judge.run import JudgeRunConfig, run_judging
from ragrade.run.store import Journal


def _answers(path: Path, ids: list[int]) -> Path:
    rows = [{"id": f"q{i}", "config": "p", "query": f"q {i}?", "answer": f"ans {i}", "reference": f"ans {i % 2}"}
            for i in ids]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_stale_answers_leave_the_journal_and_come_back_rescored(tmp_path: Path) -> None:
    cfg, out = JudgeRunConfig(metrics=["exact"]), tmp_path / "out"
    full = run_judging(_answers(tmp_path / "a.jsonl", [0, 1, 2, 3]), out, cfg)
    assert full["runs"]["exact"] == {"reused": 0, "skipped": 0, "scored": 4}
    part = run_judging(_answers(tmp_path / "b.jsonl", [0, 1]), out, cfg)
    assert (part["dropped_stale"], part["runs"]["exact"]) == (2, {"reused": 2, "skipped": 0, "scored": 0})
    with Journal(out / "journal.sqlite") as j:
        assert [r["id"] for r in j.rows("scores")] == ["q0", "q1"]
    assert len((out / "scores.jsonl").read_text().splitlines()) == 1 + 2
    again = run_judging(_answers(tmp_path / "a.jsonl", [0, 1, 2, 3]), out, cfg)
    assert again["runs"]["exact"] == {"reused": 2, "skipped": 0, "scored": 2}
    assert again["totals"] == full["totals"] and again["configs"] == full["configs"]


def test_a_scores_file_from_before_the_journal_is_reused(tmp_path: Path) -> None:
    cfg, out = JudgeRunConfig(metrics=["exact"]), tmp_path / "out"
    answers = _answers(tmp_path / "a.jsonl", [0, 1, 2])
    first = run_judging(answers, out, cfg)
    scores = (out / "scores.jsonl").read_bytes()
    (out / "journal.sqlite").unlink()  # what an older ragrade left: scores.jsonl only
    second = run_judging(answers, out, cfg)
    assert second["runs"]["exact"] == {"reused": 3, "skipped": 0, "scored": 0}
    assert (out / "scores.jsonl").read_bytes() == scores and second["configs"] == first["configs"]
