from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest
from tests.run.fakes import external_answer, make_exam

from ragrade.cli.main import main
from ragrade.errors import ConfigError
from ragrade.run.compare import compare_pair, resolve_pipeline, verdicts
from ragrade.run.manifest import read_manifest
from ragrade.run.spec import SweepConfig, build_sweep_config
from ragrade.run.store import Journal
from ragrade.run.summary import VOLATILE_COLUMNS, read_responses
from ragrade.run.sweep import SweepResult, run_sweep

LL = "py/tests.run.fakes:make_llm"
GEN = "py/tests.run.fakes:make_generating_llm"


@pytest.fixture(scope="module")
def exam(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exam") / "exam.jsonl"
    make_exam(path, 40)
    return path


def _cfg(**over: object) -> SweepConfig:
    base = {"grid": {"llms": [LL, GEN], "retrievers": ["closed", "oracle"], "icl": [0, 1]}, "shard_size": 7}
    base.update(over)
    return build_sweep_config(base)


@pytest.fixture(scope="module")
def run(exam: Path, tmp_path_factory: pytest.TempPathFactory) -> SweepResult:
    return run_sweep(exam, _cfg(), tmp_path_factory.mktemp("run") / "run")


def test_run_dir_contents(run: SweepResult, exam: Path) -> None:
    d = run.run_dir
    for name in ("manifest.json", "responses.parquet", "summary.csv", "summary_by_tag.csv", "journal.sqlite"):
        assert (d / name).is_file(), name
    m = read_manifest(d)
    assert m["version"] == 1 and m["kind"] == "exam-sweep" and m["missing"] == 4  # the failed requests
    assert m["status"] == "incomplete: 4 failed requests missing, rerun to retry"
    assert m["exam"]["path"] == str(exam.resolve()) and len(m["exam"]["icl_pool"]) == 5
    assert m["indexes"] == {}
    assert m["software"]["packages"]["ragrade"] and m["started"] <= m["finished"]
    assert m["components"][f"llm:{LL}"] == {"kind": "fake", "loglikelihood": True}
    assert m["counts"]["n_rows"] == 8 * 35 and len(m["pipelines"]) == 8


def test_responses_matrix(run: SweepResult) -> None:
    df = read_responses(run.run_dir)
    assert len(df) == 8 * 35
    for col in (
        "pipeline",
        "llm",
        "retriever",
        "icl",
        "chunker",
        "k",
        "question_id",
        "chosen",
        "correct",
        "scores",
        "ll_sum",
        "ll_per_token",
        "ll_per_char",
        "retrieved",
        "method",
        "latency_s",
        "prompt_tokens",
        "completion_tokens",
        "error",
        "parse_failed",
    ):
        assert col in df, col
    assert df.groupby("pipeline").size().eq(35).all()
    held_out = set(read_manifest(run.run_dir)["exam"]["icl_pool"])
    assert not held_out & set(df["question_id"])
    ll = df[df["method"] == "loglikelihood"].iloc[0]
    # the fake reports token log-probs (not "baseline" scores): auto picks the per-character normalisation
    assert ll["score_norm"] == "per_char" and ll["ll_source"] == "echo-logprobs"
    assert len(ll["ll_sum"]) == 4 and list(ll["scores"]) == list(ll["ll_per_char"])
    assert ll["chosen"] == max(range(4), key=lambda i: ll["ll_per_char"][i])
    oracle = df[(df["retriever"] == "oracle")]
    assert oracle["retrieved"].map(len).eq(1).all()


def test_errors_are_missing_and_parse_failures_wrong_both_counted_not_dropped(run: SweepResult) -> None:
    df = read_responses(run.run_dir)
    gen = df[df["llm"] == GEN]
    err = gen[gen["question_id"] == "q017"]
    # a failed request is missing (empty correct / chosen), never a wrong answer
    assert (err["error"].str.contains("500")).all() and err["correct"].isna().all() and err["chosen"].isna().all()
    pf = gen[gen["question_id"] == "q013"]
    assert pf["parse_failed"].all() and (pf["correct"] == 0).all() and pf["error"].isna().all()
    s = pd.read_csv(run.run_dir / "summary.csv")
    row = s[s["pipeline"].str.contains("make_generating_llm") & s["pipeline"].str.contains("oracle")].iloc[0]
    # n counts the answered questions: the failure is left out, the parse failure counts as wrong
    assert row["n"] == 34 and row["n_errors"] == 1 and row["n_parse_failures"] == 1
    assert row["accuracy"] == pytest.approx(33 / 34)
    assert row["ci_low"] < row["accuracy"] < row["ci_high"]


def test_oracle_beats_closed_and_tags(run: SweepResult) -> None:
    s = pd.read_csv(run.run_dir / "summary.csv").set_index("pipeline")
    oracle = s.loc[[p for p in s.index if "oracle" in p and p.startswith(f"llm={LL}|")], "accuracy"]
    closed = s.loc[[p for p in s.index if "closed" in p and p.startswith(f"llm={LL}|")], "accuracy"]
    assert oracle.min() == 1.0 and closed.max() < 0.5
    tags = pd.read_csv(run.run_dir / "summary_by_tag.csv")
    assert set(tags["tag"]) == {"topic", "bloom", "qword"}
    one = tags[tags["pipeline"] == s.index[0]]
    assert one[one["tag"] == "topic"]["n"].sum() == 35
    # questions with two Bloom levels count under both
    assert one[one["tag"] == "bloom"]["n"].sum() > 35


def test_rerun_is_a_no_op_and_identical(run: SweepResult, exam: Path) -> None:
    before = read_responses(run.run_dir)
    again = run_sweep(exam, _cfg(), run.run_dir)
    assert again.n_new_rows == 0
    pd.testing.assert_frame_equal(before, read_responses(run.run_dir))
    assert len(read_manifest(run.run_dir)["resumed"]) == 1


def test_partial_journal_resumes(exam: Path, tmp_path: Path, run: SweepResult) -> None:
    out = tmp_path / "partial"
    run_sweep(exam, _cfg(limit=10), out)
    with pytest.raises(ConfigError, match=r"questions: 10 -> 5 \(5 asked before would be dropped"):
        run_sweep(exam, _cfg(limit=5), out)  # fewer questions would drop finished rows: refused
    more = run_sweep(exam, _cfg(), out)  # more questions: the run is extended, its 8 x 10 rows kept
    assert more.n_new_rows == 8 * (35 - 10) and "25 new items" in more.extended
    # a journal holding only part of the rows: drop half of one pipeline's rows
    fresh = tmp_path / "fresh"
    full = run_sweep(exam, _cfg(), fresh)
    with Journal(fresh / "journal.sqlite") as j:
        pid = full.pipelines[3]
        j._db.execute("DELETE FROM results WHERE pipeline = ? AND item > 'q020'", (pid,))
        assert j.count(pid) < 35
    res = run_sweep(exam, _cfg(), fresh)
    assert 0 < res.n_new_rows < 35
    vol = list(VOLATILE_COLUMNS)
    pd.testing.assert_frame_equal(
        read_responses(fresh).drop(columns=vol), read_responses(run.run_dir).drop(columns=vol)
    )
    ok = run_sweep(exam, _cfg(), out, overwrite=True)
    assert ok.n_new_rows == 8 * 35


def test_changed_prompt_is_refused(exam: Path, tmp_path: Path) -> None:
    p = tmp_path / "p.txt"
    p.write_text("{context}Q: {question}\n{choices}\n{answer_prefix}")
    cfg = _cfg(grid={"llms": [LL], "retrievers": ["oracle"], "prompts": ["mine"]}, prompts={"mine": str(p)})
    run_sweep(exam, cfg, tmp_path / "r")
    p.write_text("{context}Question: {question}\n{choices}\n{answer_prefix}")
    with pytest.raises(ConfigError):
        run_sweep(exam, cfg, tmp_path / "r")


def test_external_callable_and_http(exam: Path, tmp_path: Path) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "site 5 " in body["question"]:
                self.send_response(400)
                self.end_headers()
                self.wfile.write(b"bad question")
                return
            data = json.dumps(external_answer(body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/rag"
        cfg = build_sweep_config(
            {
                "grid": {"llms": [LL], "retrievers": ["external:web", "external:py"]},
                "external": {"web": url, "py": "tests.run.fakes:external_answer"},
            }
        )
        res = run_sweep(exam, cfg, tmp_path / "ext")
    finally:
        server.shutdown()
    df = read_responses(tmp_path / "ext")
    for name in ("web", "py"):
        sub = df[df["retriever"] == f"external:{name}"].set_index("question_id")
        assert set(sub["method"].dropna()) == {"external", "loglikelihood"}
        assert sub["retrieved"]["q002"].tolist() == ["ext-2"]  # context returned, the LLM answered
        assert sub.loc["q003", "method"] == "external" and sub.loc["q003", "correct"] == 1
    web = df[df["retriever"] == "external:web"].set_index("question_id")
    assert "HTTP 400" in web["error"]["q005"] and pd.isna(web["correct"]["q005"])  # missing, not wrong
    s = res.summary.set_index("pipeline")
    assert s.loc[next(p for p in s.index if "external:web" in p), "n_errors"] == 1


def test_compare_functions(run: SweepResult) -> None:
    df = read_responses(run.run_dir)
    ids = list(dict.fromkeys(df["pipeline"]))
    oracle = resolve_pipeline(f"{LL}|retriever=oracle|k=1|icl=0", ids)
    closed = resolve_pipeline(f"{LL}|retriever=closed|k=0|icl=0", ids)
    c = compare_pair(df, oracle, closed)
    assert c.n == 35 and c.difference == pytest.approx(c.accuracy_a - c.accuracy_b)
    assert c.a_only - c.b_only == round(c.difference * 35)
    assert c.ci_low <= c.difference <= c.ci_high and c.p_value < 1e-4 and c.verdict == "a better"
    with pytest.raises(ConfigError, match="matches"):
        resolve_pipeline("oracle", ids)
    with pytest.raises(ConfigError, match="no pipeline"):
        resolve_pipeline("dense", ids)
    v = verdicts(run.run_dir, top=4)
    assert v["version"] == 1 and len(v["pipelines"]) == 4 and len(v["comparisons"]) == 6
    assert all(x["p_adjusted"] >= x["p_value"] for x in v["comparisons"])
    assert all(x["accuracy_a"] >= x["accuracy_b"] for x in v["comparisons"])


def test_cli_compare_and_take_errors(
    run: SweepResult, exam: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp.json"
    rc = main(
        [
            "compare",
            str(run.run_dir),
            f"{LL}|retriever=oracle|k=1|icl=0",
            f"{LL}|retriever=closed|k=0|icl=0",
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0 and "McNemar p=" in text and "a better" in text
    assert json.loads(out.read_text())["comparisons"][0]["verdict"] == "a better"
    assert main(["compare", str(run.run_dir), "--all", "--top", "3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["correction"] == "holm" and len(data["comparisons"]) == 3
    bad = [
        ["compare", str(run.run_dir), "oracle", "closed"],  # ambiguous
        ["compare", str(run.run_dir)],
        ["compare", str(tmp_path)],
        ["exam", "take", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")],
        ["exam", "take", str(exam), "--out", str(tmp_path / "o"), "--retrievers", "bm25"],
        ["exam", "take", str(exam), "--out", str(tmp_path / "o"), "--k", "three"],
        ["exam", "take", str(exam), "--out", str(tmp_path / "o"), "--external", "nope"],
        ["exam", "take", str(exam), "--out", str(tmp_path / "o"), "--executor", "spark", "--retrievers", "closed"],
    ]
    for argv in bad:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("ragrade: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_cli_take(exam: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(f'[grid]\nllms = ["{LL}"]\nicl = [0]\n')
    rc = main(
        [
            "exam",
            "take",
            str(exam),
            "--config",
            str(cfg),
            "--retrievers",
            "closed,oracle",
            "--icl",
            "0,2",
            "--out",
            str(tmp_path / "r"),
            "--json",
        ]
    )
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["pipelines"]) == 4 and data["new_rows"] == 4 * 35
    m = read_manifest(tmp_path / "r")
    assert m["config"]["grid"]["icl"] == [0, 2] and m["inputs"]["config:0"]["sha256"]
