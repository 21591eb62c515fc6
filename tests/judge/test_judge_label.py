"""The labelling page's data: stratified sample, escaping, exam items, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragrade.cli.main import main
from ragrade.errors import ConfigError
from ragrade.io import JSONObject, read_jsonl, write_jsonl
from ragrade.judge.label import build_page_data, render_label_page, stratified_sample

EVIL = "</script><script>alert(1)</script>"


def _judged(tmp_path: Path, n_per_config: tuple[int, int] = (30, 6)) -> Path:
    answers, recs = [], []
    for config, n in zip(("big", "small"), n_per_config, strict=True):
        for i in range(n):
            answers.append(
                {
                    "id": f"q{i}",
                    "pipeline": config,
                    "query": f"Q{i} {EVIL}",
                    "answer": f"A{i}",
                    "reference": f"R{i}",
                    "contexts": [f"P{i} & <b>"],
                }
            )
            recs.append({"config": config, "id": f"q{i}", "metric": "correctness", "status": "ok", "score": 3})
            recs.append(
                {
                    "config": config,
                    "id": f"q{i}",
                    "metric": "faithfulness",
                    "status": "unparsed" if i == 0 else "ok",
                    "score": None if i == 0 else 1,
                }
            )
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    write_jsonl(
        tmp_path / "judge" / "scores.jsonl",
        recs,
        kind="judge_scores",
        version=1,
        meta={"answers": str(tmp_path / "answers.jsonl")},
    )
    return tmp_path / "judge"


def test_sample_spreads_over_configurations_and_skips_unscored(tmp_path: Path) -> None:
    data = build_page_data(_judged(tmp_path), n=12, seed=3)
    configs = [it["config"] for it in data["items"]]
    assert configs.count("small") == 6 and configs.count("big") == 6  # round robin until a pool runs dry
    tasks = {(data["items"][t["item"]]["id"], data["items"][t["item"]]["config"], t["metric"]) for t in data["tasks"]}
    assert ("q0", "small", "faithfulness") not in tasks  # the judge had no score: nothing to calibrate
    assert ("q0", "small", "correctness") in tasks
    assert {it["label_id"] for it in data["items"]} >= {"small::q0"}  # ids shared by configurations get a prefix
    assert "metrics" not in data["items"][0]  # graders never see the judge's scores


def test_page_escapes_every_text(tmp_path: Path) -> None:
    html = render_label_page(build_page_data(_judged(tmp_path), n=40))
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.DOTALL)
    assert found is not None
    blob = found.group(1)
    assert "<" not in blob and ">" not in blob and "&" not in blob
    assert json.loads(blob)["items"]  # still valid JSON
    assert "http://" not in html and "https://" not in html  # no network


def test_stratified_sample_is_uniform_within_configuration() -> None:
    items: list[JSONObject] = [{"config": "a", "id": str(i)} for i in range(100)]
    counts = [0] * 100
    for seed in range(400):
        for it in stratified_sample(items, 10, seed):
            counts[int(it["id"])] += 1
    assert min(counts) > 15 and max(counts) < 70  # each item about 40 times


def test_exam_page_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exam = tmp_path / "exam.jsonl"
    write_jsonl(
        exam,
        [{"id": "x1", "question": "Q?", "choices": ["a", "b", "c", "d"], "answer": 2, "context": "ctx"}],
        kind="exam",
        version=1,
    )
    data = build_page_data(exam, n=5)
    assert data["tasks"] == [{"item": 0, "metric": "validity"}]
    assert ["choices", "  a\n  b\n* c\n  d"] in data["items"][0]["fields"]
    with pytest.raises(ConfigError, match="no judged relevancy"):
        build_page_data(_judged(tmp_path), n=5, metrics=["relevancy"])
    (tmp_path / "answers.jsonl").unlink()
    assert main(["label", str(tmp_path / "judge"), "--out", str(tmp_path / "p.html")]) == 2
    assert "--answers" in capsys.readouterr().err


def test_page_reads_answers_with_the_judges_field_map(tmp_path: Path) -> None:
    from ragrade.judge.run import JudgeRunConfig, run_judging

    src = tmp_path / "outputs.jsonl"
    src.write_text(
        "".join(json.dumps({"uid": f"u{i}", "q": f"question {i}", "resp": "x", "gold": "x"}) + "\n" for i in range(3))
    )
    fields = {"id": "uid", "query": "q", "answer": "resp", "reference": "gold"}
    run_judging(src, tmp_path / "j", JudgeRunConfig(metrics=["exact"], fields=fields))
    data = build_page_data(tmp_path / "j", n=3, metrics=["exact"])
    assert sorted(it["label_id"] for it in data["items"]) == ["u0", "u1", "u2"]
    assert ["question", "question 0"] in next(it["fields"] for it in data["items"] if it["id"] == "u0")


def test_computed_metrics_are_not_offered_for_grading(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 28 (9): exact match and BERTScore are formulas, not judgements: off the page unless named."""
    judged = _judged(tmp_path)
    _, recs = read_jsonl(judged / "scores.jsonl")
    extra = [
        dict(r, metric=m, score=1.0, status="ok")
        for r in recs
        if r["metric"] == "correctness"
        for m in ("exact", "bertscore")
    ]
    write_jsonl(
        judged / "scores.jsonl",
        recs + extra,
        kind="judge_scores",
        version=1,
        meta={"answers": str(tmp_path / "answers.jsonl")},
    )
    data = build_page_data(judged, n=40)
    assert set(data["scales"]) == {"correctness", "faithfulness"}
    assert {t["metric"] for t in build_page_data(judged, n=4, metrics=["exact"])["tasks"]} == {"exact"}
    only = [r for r in recs + extra if r["metric"] in ("exact", "bertscore")]
    write_jsonl(
        judged / "scores.jsonl", only, kind="judge_scores", version=1, meta={"answers": str(tmp_path / "answers.jsonl")}
    )
    assert main(["label", str(judged), "--out", str(tmp_path / "p.html")]) == 2
    assert "only computed metrics (bertscore, exact)" in capsys.readouterr().err
