"""``ragrade judge calibrate``: estimates equal a direct PPI++ computation; bad labels exit 2 naming file and line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragrade.cli.main import main
from ragrade.io import read_json, write_jsonl
from ragrade.judge.calibrate import SCALES, agreement_for
from ragrade.judge.ppi import estimate

# the scores file, the labels file, the score records and the label records
Files = tuple[Path, Path, list[dict[str, object]], list[dict[str, object]]]


def _population(seed: int = 0) -> tuple[list[dict[str, object]], dict[tuple[str, str, str], float]]:
    """Judge scores of 2 configurations x 120 answers, and the (hidden) human grades."""
    rng = np.random.default_rng(seed)
    recs: list[dict[str, object]] = []
    human: dict[tuple[str, str, str], float] = {}
    for config, shift in (("bm25", 0.0), ("dense", 0.6)):
        for i in range(120):
            truth = int(np.clip(round(rng.normal(3 + shift, 1.1)), 1, 5))
            judged = int(np.clip(truth + rng.choice([0, 0, 1, 1, 2]), 1, 5))  # a lenient judge
            human[(config, f"q{i}", "correctness")] = truth
            recs.append({"config": config, "id": f"q{i}", "metric": "correctness", "status": "ok", "score": judged})
            yes = int(rng.uniform() < 0.7)
            human[(config, f"q{i}", "faithfulness")] = yes
            status = "failed" if i == 8 else "ok"
            recs.append(
                {
                    "config": config,
                    "id": f"q{i}",
                    "metric": "faithfulness",
                    "status": status,
                    "score": None if status == "failed" else 1 if rng.uniform() < 0.9 else yes,
                }
            )
    return recs, human


@pytest.fixture
def files(tmp_path: Path) -> Files:
    recs, human = _population()
    scores = tmp_path / "judge" / "scores.jsonl"
    write_jsonl(scores, recs, kind="judge_scores", version=1, meta={"answers": "none.jsonl"})
    labels: list[dict[str, object]] = []
    for config in ("bm25", "dense"):
        for i in range(0, 120, 4):  # 30 per configuration
            for metric in ("correctness", "faithfulness"):
                labels.append({"id": f"{config}::q{i}", "metric": metric, "label": human[(config, f"q{i}", metric)]})
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in labels))
    return scores, path, recs, labels


def _run(*args: object) -> int:
    return main(["judge", "calibrate", *map(str, args)])


def test_calibration_matches_direct_ppi(files: Files, tmp_path: Path) -> None:
    scores, labels_path, recs, labels = files
    assert _run(scores.parent, "--human", labels_path, "--out", tmp_path / "cal") == 0
    cal = read_json(tmp_path / "cal" / "calibration.json")
    row = cal["metrics"]["correctness"]["configs"]["dense"]
    lab = {
        (str(x["id"]).split("::")[1]): x["label"]
        for x in labels
        if str(x["id"]).startswith("dense") and x["metric"] == "correctness"
    }
    judged = {r["id"]: r["score"] for r in recs if r["config"] == "dense" and r["metric"] == "correctness"}
    y = np.array([lab[i] for i in lab], float)
    f = np.array([judged[i] for i in lab], float)
    fu = np.array([v for i, v in judged.items() if i not in lab], float)
    want = estimate(y, f, fu)
    assert row["n_labels"] == 30 and row["n_unlabeled"] == 90
    assert row["ppi_estimate"] == pytest.approx(want.ppi_estimate)
    assert row["ppi_ci"] == pytest.approx(list(want.ppi_ci))
    assert row["human_only_ci"] == pytest.approx(list(want.human_only_ci))
    assert row["judge_mean"] == pytest.approx(np.mean(list(judged.values())))
    assert row["bias"] == pytest.approx(float(np.mean(f - y)))
    assert row["bias"] > 0  # the lenient judge over-scores
    assert row["ppi_ci"][1] - row["ppi_ci"][0] < row["human_only_ci"][1] - row["human_only_ci"][0]
    assert set(row["agreement"]) == {"accuracy", "within_one", "kappa", "spearman", "n"}
    faith = cal["metrics"]["faithfulness"]["configs"]["bm25"]
    assert faith["n_labels"] == 29 and faith["n_labels_without_judge_score"] == 1  # q8: judge request failed
    assert set(faith["agreement"]) == {"accuracy", "kappa", "n"}
    pooled = cal["metrics"]["correctness"]["all"]
    assert pooled["n_labels"] == 60 and pooled["ppi_ci"][0] < pooled["ppi_estimate"] < pooled["ppi_ci"][1]


def test_agreement_by_hand() -> None:
    got = agreement_for(SCALES["faithfulness"], [1, 1, 0, 0.5], [1, 0, 0, 1])
    assert got["accuracy"] == 0.75  # a 0.5 tie counts as yes
    got = agreement_for(SCALES["correctness"], [5, 4, 2, 3], [5, 2, 2, 4])
    assert (got["accuracy"], got["within_one"]) == (0.5, 0.75)


def _bad(
    tmp_path: Path, scores: Path, lines: Sequence[object], capsys: pytest.CaptureFixture[str], *extra: object
) -> str:
    path = tmp_path / "bad.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    assert _run(scores, "--human", path, "--out", tmp_path / "o", *extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragrade: error: ") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()  # validation before any output
    return err


def test_bad_labels_name_file_and_line(files: Files, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scores, _, _, _ = files
    ok = {"id": "bm25::q0", "metric": "correctness", "label": 3}
    err = _bad(tmp_path, scores, [ok, {"id": "nope", "metric": "correctness", "label": 3}], capsys)
    assert "bad.jsonl:2: unknown id 'nope'" in err
    err = _bad(tmp_path, scores, [ok, {**ok, "id": "bm25::q1", "label": 7}], capsys)
    assert "bad.jsonl:2: label 7 is outside the correctness scale 1-5" in err
    err = _bad(tmp_path, scores, [{**ok, "metric": "faithfulness", "label": 0.5}], capsys)
    assert "bad.jsonl:1:" in err and "0/1" in err
    err = _bad(tmp_path, scores, [ok, {**ok, "id": "bm25::q4"}, ok], capsys)
    assert "bad.jsonl:3: duplicate label for id 'bm25::q0', metric 'correctness' (first on line 1)" in err
    err = _bad(tmp_path, scores, [ok, {"id": "bm25::q2", "metric": "correctness"}], capsys)
    assert "bad.jsonl:2: a label without the field 'label'" in err
    err = _bad(tmp_path, scores, [ok, "not json"], capsys)
    assert "bad.jsonl:2: not valid JSON" in err
    err = _bad(tmp_path, scores, [ok, {**ok, "id": "bm25::q1"}], capsys)
    assert "bad.jsonl:2: only 2 correctness label(s) for configuration 'bm25' (lines 1, 2)" in err
    err = _bad(tmp_path, scores, [{**ok, "metric": "relevancy"}], capsys)
    assert "bad.jsonl:1: metric 'relevancy' is not in" in err


def test_scores_without_needed_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scores = tmp_path / "scores.jsonl"
    write_jsonl(scores, [{"config": "a", "id": "1", "status": "ok", "score": 1}], kind="judge_scores", version=1)
    labels = tmp_path / "l.jsonl"
    labels.write_text('{"id": "1", "metric": "exact", "label": 1}\n')
    assert _run(scores, "--human", labels, "--out", tmp_path / "o") == 2
    assert "scores.jsonl:2: score record without the field 'metric'" in capsys.readouterr().err
    write_jsonl(scores, [{"config": "a", "id": "1", "metric": "exact", "status": "ok"}], kind="judge_scores", version=1)
    assert _run(scores, "--human", labels, "--out", tmp_path / "o") == 2
    assert "without the field 'score'" in capsys.readouterr().err


def test_exam_validity_share(tmp_path: Path) -> None:
    exam = tmp_path / "exam.jsonl"
    qs = [{"id": f"x{i}", "question": f"Q{i}?", "choices": ["a", "b", "c", "d"], "answer": 0} for i in range(50)]
    write_jsonl(exam, qs, kind="exam", version=1)
    labels = tmp_path / "valid.jsonl"
    labels.write_text(
        "".join(json.dumps({"id": f"x{i}", "metric": "validity", "label": int(i % 4 != 0)}) + "\n" for i in range(20))
    )
    assert _run(exam, "--human", labels, "--out", tmp_path / "cal") == 0
    row = read_json(tmp_path / "cal" / "calibration.json")["metrics"]["validity"]["configs"]["exam"]
    assert row["judge_mean"] == 1.0  # every kept question counts as valid to the generator
    assert row["ppi_estimate"] == pytest.approx(0.75)  # the constant judge carries no signal: the human share
    assert row["lambda"] == 0.0 and row["judge_outside_ppi_ci"] is True


def test_calibration_table_of_a_config_file(files: Files, tmp_path: Path) -> None:
    scores, labels_path, _, _ = files
    cfg = tmp_path / "job.toml"
    cfg.write_text(f'[calibration]\nhuman = "{labels_path.name}"\nlevel = 0.9\nmin_labels = 30\n')
    assert _run(scores, "--config", cfg, "--out", tmp_path / "c") == 0
    cal = read_json(tmp_path / "c" / "calibration.json")
    assert cal["level"] == 0.9 and cal["labels"] == str(labels_path)
    assert _run(scores, "--config", cfg, "--min-labels", "31", "--out", tmp_path / "d") == 2  # flags win
