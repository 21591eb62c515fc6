"""``ragrade exam take --adaptive`` end to end: a simulated full grid replayed by the replay LLM."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.run.fakes import make_exam

from ragrade.adaptive.runner import ROUNDS_FILE, run_adaptive
from ragrade.cli.main import main
from ragrade.exam.files import read_exam, write_exam
from ragrade.irt.simulate import draw_items
from ragrade.run.manifest import read_manifest
from ragrade.run.spec import PipelineSpec, build_sweep_config, load_sweep_file
from ragrade.run.summary import read_responses, write_responses

# the work folder, the exam, the sweep config and the full grid's responses
Setup = tuple[Path, Path, Path, pd.DataFrame]

LLMS = ["sim-a", "sim-b", "sim-c"]
FAILING = "llm=sim-c|retriever=closed|k=0|icl=2|chunker=none"  # every request of it fails


def _truth(exam: Path, out: Path) -> pd.DataFrame:
    """A full grid's responses drawn from a 3PL model with planted LLM / retriever / ICL effects."""
    _, qs = read_exam(exam)
    rng = np.random.default_rng(0)
    d, b, g = draw_items(len(qs), rng)
    eff = {"sim-a": -0.8, "sim-b": 0.1, "sim-c": 0.7, "closed": -0.6, "oracle": 0.6, 0: -0.2, 1: 0.0, 2: 0.2}
    rows = []
    for llm in LLMS:
        for ret in ("closed", "oracle"):
            for icl in (0, 1, 2):
                spec = PipelineSpec(llm=llm, retriever=ret, icl=icl).normalised()
                theta = eff[llm] + eff[ret] + eff[icl]
                p = g + (1 - g) / (1 + np.exp(-d * (theta - b)))
                for q, pi in zip(qs, p, strict=True):
                    ok = bool(rng.random() < pi)
                    err = "HTTP 500" if spec.id == FAILING else None
                    chosen = -1 if err else (q.answer if ok else (q.answer + 1) % 4)
                    rows.append(
                        {
                            "pipeline": spec.id,
                            **spec.factors(),
                            "question_id": q.id,
                            "chosen": chosen,
                            "answer": q.answer,
                            "correct": None if err else int(chosen == q.answer),
                            "error": err,
                        }
                    )
    write_responses(out, rows)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    root = tmp_path_factory.mktemp("adaptive")
    exam = root / "exam.jsonl"
    make_exam(exam, 160)
    full = _truth(exam, root / "full.parquet")
    toml = root / "sweep.toml"
    toml.write_text(
        "[grid]\n"
        f"llms = {json.dumps(['replay/' + m for m in LLMS])}\n"
        'retrievers = ["closed", "oracle"]\nicl = [0, 1, 2]\n'
        f"[llm_options]\nreplay_from = {json.dumps(str(root / 'full.parquet'))}\n"
        "[adaptive]\nbatch = 8\nmin_items = 24\ntarget_se = 0.25\n"
    )
    return root, exam, toml, full


def _take(exam: Path, toml: Path, out: Path, *extra: str) -> list[str]:
    return ["exam", "take", str(exam), "--config", str(toml), "--out", str(out), "--adaptive", *extra]


@pytest.fixture(scope="module")
def first(setup: Setup) -> Path:
    root, exam, toml, _ = setup
    out = root / "run"
    assert main([*_take(exam, toml, out), "--json"]) == 0
    return out


def test_small_grid_without_calibration_samples_and_says_what_matters(
    setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, exam, toml, _ = setup
    out = tmp_path / "said"
    assert main([*_take(exam, toml, out), "--budget", "60", "--json"]) == 0  # far below one pass of the exam
    doc = json.loads(capsys.readouterr().out)
    assert doc["cost"]["requests"] == 60  # spent, not refused
    assert doc["diagnostics"]["estimate_basis"] == "audit" and not doc["diagnostics"]["misfit_warning"]
    failing = FAILING.replace("sim-c", "replay/sim-c")
    assert any(w.startswith(f"failed requests: {failing}") for w in doc["warnings"])
    assert any(w.startswith("not decided:") for w in doc["warnings"])  # 60 requests cannot pick the best
    live = [r for r in doc["pipelines"] if r["status"] != "failed"]
    assert sum(r["p_best"] for r in live) == pytest.approx(1.0, abs=1e-6)
    assert main([*_take(exam, toml, out), "--budget", "60", "--overwrite"]) == 0  # the terminal table
    text = capsys.readouterr()
    assert "P(best)" in text.out and f"failed requests: {failing}" in text.err


def test_run_directory_of_an_adaptive_run(setup: Setup, first: Path) -> None:
    _, _, _, full = setup
    summary = pd.read_csv(first / "summary.csv")
    for col in ("accuracy", "accuracy_estimate", "accuracy_estimate_low", "accuracy_estimate_high", "status"):
        assert col in summary
    assert len(summary) == 18 and set(summary["status"]) <= {"measured", "eliminated", "predicted", "failed"}
    failed = summary.set_index("pipeline").loc[FAILING.replace("sim-c", "replay/sim-c")]
    assert failed["status"] == "failed" and failed["n_errors"] > 0 and np.isnan(failed["accuracy_estimate"])
    ok = summary[summary["status"] != "failed"]
    assert (ok["accuracy_estimate_low"] <= ok["accuracy_estimate"]).all()
    assert (ok["accuracy_estimate"] <= ok["accuracy_estimate_high"]).all()
    resp = read_responses(first)
    assert len(resp) < 18 * 155  # only the items asked
    # the replayed answers are the full grid's
    orig = resp["pipeline"].str.replace("llm=replay/", "llm=", regex=False)
    merged = pd.DataFrame({"pipeline": orig, "question_id": resp["question_id"], "got": resp["correct"]}).merge(
        full[["pipeline", "question_id", "correct"]], on=["pipeline", "question_id"]
    )
    same = (merged["got"] == merged["correct"]) | (merged["got"].isna() & merged["correct"].isna())  # failed: missing
    assert len(merged) == len(resp) and same.all()
    rounds = [json.loads(line) for line in (first / ROUNDS_FILE).read_text().splitlines()]
    assert rounds and rounds[-1]["requests"] == len(resp)
    assert {r["budget"] for r in rounds} == {math.ceil(0.25 * 18 * 155)}  # the default cap, in every record
    m = read_manifest(first)
    assert m["adaptive"]["calibration"]["mode"] == "sample"  # 18 pipelines, no file: no model
    assert m["adaptive"]["cost"]["requests"] == len(resp) and m["adaptive"]["settings"]["batch"] == 8
    assert len(resp) <= math.ceil(0.25 * 18 * 155)  # the default budget
    assert m["adaptive"]["calibration"]["written"] == str(first / "calibration" / "irt.json")
    assert (first / "calibration" / "irt.json").is_file()  # for the next run on this exam
    for col in ("p_best", "n_audit", "n_failed", "estimate_basis", "misfit_warning"):
        assert col in summary
    assert m["adaptive"]["diagnostics"]["failed_requests"] == {FAILING.replace("sim-c", "replay/sim-c"): 8}
    assert any("failed requests" in w for w in m["adaptive"]["warnings"])


class _Stop(Exception):
    pass


def test_interrupted_runs_resume_to_the_same_result(setup: Setup, first: Path, tmp_path: Path) -> None:
    _, exam, toml, _ = setup
    cfg = build_sweep_config(load_sweep_file(toml))
    acfg = cfg.adaptive.model_copy(update={"enabled": True})
    out = tmp_path / "run"
    for stop_at in (1, 3):

        def on_round(rec: dict[str, Any], stop_at: int = stop_at) -> None:
            if rec["round"] == stop_at:
                raise _Stop

        with pytest.raises(_Stop):
            run_adaptive(exam, cfg, acfg, out, on_round=on_round)
    # a round cut in the middle: drop the last journaled answers, as a kill before their commit would
    import sqlite3

    db = sqlite3.connect(out / "journal.sqlite")
    db.execute("DELETE FROM results WHERE rowid IN (SELECT rowid FROM results ORDER BY rowid DESC LIMIT 5)")
    db.commit()
    db.close()
    result = run_adaptive(exam, cfg, acfg, out)
    assert result.n_new_rows > 0
    vol = ["mean_latency_s"]
    got = pd.read_csv(out / "summary.csv").drop(columns=vol)
    want = pd.read_csv(first / "summary.csv").drop(columns=vol)
    pd.testing.assert_frame_equal(got, want)


def test_calibration_file_and_bad_input(
    setup: Setup, first: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, exam, toml, _ = setup
    calib = first / "calibration" / "irt.json"
    out = tmp_path / "withfile"
    assert main([*_take(exam, toml, out), "--calibration", str(calib), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    m = read_manifest(out)
    source = m["adaptive"]["calibration"]
    assert source["mode"] == "file" and str(calib.resolve()) in source["source"]
    assert data["cost"]["requests"] < data["cost"]["full_grid_requests"] / 2
    other = tmp_path / "other.jsonl"
    _, qs = read_exam(exam)
    write_exam(other, [dataclasses.replace(q, id="x" + q.id) for q in qs])
    bad = [
        ([*_take(other, toml, tmp_path / "b1"), "--calibration", str(calib)], "another exam"),
        ([*_take(exam, toml, tmp_path / "b2"), "--target-se", "0"], "target-se"),
        ([*_take(exam, toml, tmp_path / "b3"), "--budget", "10"], "smallest useful budget for 18 pipelines is 36"),
        (["exam", "take", str(exam), "--config", str(toml), "-o", str(tmp_path / "b4"), "--budget", "9"], "--adaptive"),
    ]
    for args, msg in bad:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert "ragrade: error:" in err and msg in err and "Traceback" not in err
        assert not (tmp_path / "b1" / "journal.sqlite").exists()


def test_dry_run_prints_the_plan(setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, exam, toml, _ = setup
    assert main(["--dry-run", *_take(exam, toml, tmp_path / "dry"), "--json"]) == 0
    out = capsys.readouterr().out
    plan = json.loads(out)["adaptive_plan"]
    assert plan["full_grid_requests"] == 18 * 155
    assert 0 < plan["expected_requests"] <= plan["upper_bound_requests"] <= plan["full_grid_requests"]
    assert not (tmp_path / "dry").exists()


def test_cold_start_factorial_map_and_balance(setup: Setup, tmp_path: Path) -> None:
    _, exam, toml, _ = setup
    cfg = build_sweep_config(load_sweep_file(toml))
    over = {"enabled": True, "calibration_mode": "cold", "factorial": 0.6, "estimator": "map", "balance": "topic"}
    acfg = cfg.adaptive.model_copy(update=over)
    result = run_adaptive(exam, cfg, acfg, tmp_path / "cold")
    s = result.summary.set_index("pipeline")
    pred = s[s["status"] == "predicted"]
    assert len(pred) > 0 and (pred["n_asked"] == 0).all() and (pred["n"] == 0).all()
    assert pred["accuracy_estimate"].notna().all() and pred["accuracy"].isna().all()
    assert not set(pred.index) & set(read_responses(tmp_path / "cold")["pipeline"])
    m = read_manifest(tmp_path / "cold")
    assert m["adaptive"]["calibration"]["mode"] == "cold" and m["adaptive"]["calibration"]["source"].startswith("fit:")
    text = (tmp_path / "cold" / "summary.csv").read_text()
    assert "predicted" in text
    # cold mode writes a calibration that the next run accepts
    written = tmp_path / "cold" / "calibration" / "irt.json"
    assert result.diagnostics["calibration_written"] == str(written) and written.is_file()
    again = run_adaptive(
        exam, cfg, cfg.adaptive.model_copy(update={"enabled": True, "calibration": str(written)}), tmp_path / "again"
    )
    assert read_manifest(tmp_path / "again")["adaptive"]["calibration"]["mode"] == "file"
    assert again.diagnostics["estimate_basis"] in ("model+audit", "audit")


def test_report_shows_what_it_cost(first: Path) -> None:
    from ragrade.report.render import render_report

    html = render_report(first, inline_js=False)
    m = read_manifest(first)
    assert "What it cost" in html and "Adaptive leaderboard" in html
    assert f"asked {m['adaptive']['cost']['requests']} of the full grid" in html
    assert "adaptive_rounds.jsonl" in html


def test_rerun_with_other_settings_reuses_the_answers(setup: Setup, first: Path, tmp_path: Path) -> None:
    import shutil

    _, exam, toml, _ = setup
    out = tmp_path / "more"
    shutil.copytree(first, out)
    cfg = build_sweep_config(load_sweep_file(toml))
    acfg = cfg.adaptive.model_copy(update={"enabled": True, "budget": 1000})
    before = len(read_responses(first))
    result = run_adaptive(exam, cfg, acfg, out)
    assert result.cost["requests"] > before  # a larger budget asks more ...
    assert 0 < result.n_new_rows < result.cost["requests"]  # ... but only what is new is sent
    assert len(read_responses(out)) == result.cost["requests"]


def test_a_server_that_is_down_fails_the_command_and_a_rerun_asks_again(
    setup: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 2 with one line, as ``exam take`` does; the failed requests are missing, and the corrected rerun
    (the server up) asks them again in the same run directory."""
    from tests.support.openai_server import OpenAIServer, dead_base_url

    _, exam, _, _ = setup
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    toml = tmp_path / "down.toml"
    grid = '[grid]\nllms = ["openai/m"]\nretrievers = ["closed"]\n'
    toml.write_text(f'{grid}[llm_options]\nbase_url = "{dead_base_url()}"\nmax_retries = 0\ntimeout = 3\n')
    out = tmp_path / "down"
    assert main(_take(exam, toml, out)) == 2
    err = capsys.readouterr().err
    assert "ragrade: error:" in err and "server unreachable" in err and "Traceback" not in err
    assert "rerun the same command" in err
    failed = read_responses(out)
    assert len(failed) > 0 and failed["error"].notna().all() and failed["correct"].isna().all()  # missing, not wrong
    with OpenAIServer() as srv:
        toml.write_text(f'{grid}[llm_options]\nbase_url = "{srv.base_url}"\nmax_retries = 0\ntimeout = 3\n')
        assert main([*_take(exam, toml, out), "--json"]) == 0
    capsys.readouterr()
    again = read_responses(out)
    assert set(failed["question_id"]) <= set(again["question_id"])  # the failed ones asked again
    assert again["error"].isna().all() and again["correct"].notna().all()
