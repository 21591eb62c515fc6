"""Auditing an exam run: samples.jsonl says what was sent, summary.csv says how each pipeline was scored and
which rule decided its accuracy, pipeline labels name models given by path by their file name."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.run.fakes import make_exam

from ragrade.cli.main import main
from ragrade.errors import ConfigError
from ragrade.run.spec import PipelineSpec, SweepConfig, expand_pipelines, llm_label

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

LL, GEN = "py/tests.run.fakes:make_llm", "py/tests.run.fakes:make_generating_llm"


def _take(exam: Path, out: Path, *extra: str) -> list[str]:
    return ["exam", "take", str(exam), "--out", str(out), "--retrievers", "closed,oracle", "--limit", "12", *extra]


def _samples(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0])["ragrade"], [json.loads(x) for x in lines[1:]]


def _argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=lambda i: (values[i], -i))


def test_summary_names_the_decision_rule_and_gives_both_loglikelihood_accuracies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 20)
    assert main(_take(exam, out, "--llm", f"{LL},{GEN}")) == 0
    stdout = capsys.readouterr().out
    assert "accuracy decided by log-likelihood per character (acc_norm)" in stdout
    assert "loglikelihood/echo-logprobs" in stdout and stdout.count("  generate") == 2
    df = pd.read_parquet(out / "responses.parquet")
    summary = pd.read_csv(out / "summary.csv").set_index("pipeline")
    for pid, rows in df.groupby("pipeline"):
        s = summary.loc[pid]
        if rows["method"].iloc[0] == "generate":
            assert s["decision_rule"] == "letter" and pd.isna(s["acc_sum"]) and pd.isna(s["acc_per_char"])
            assert s["method"] == "generate" and pd.isna(s["ll_source"])
            continue
        by_sum = sum(_argmax(list(v)) == a for v, a in zip(rows["ll_sum"], rows["answer"], strict=True)) / len(rows)
        assert s["decision_rule"] == "per_char" and s["ll_source"] == "echo-logprobs"
        assert s["acc_per_char"] == pytest.approx(s["accuracy"]) and s["acc_sum"] == pytest.approx(by_sum)
        assert (rows["prompt_tokens"] > 0).all() and s["prompt_tokens"] == rows["prompt_tokens"].sum()
    closed = summary.loc[next(p for p in summary.index if "make_llm" in p and "closed" in p)]
    assert closed["acc_sum"] != pytest.approx(closed["acc_per_char"])  # the two rules differ on this exam
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["outputs"]["summary.csv"]["version"] == 3  # 3: the partial column


def test_score_sum_makes_the_sum_the_headline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 20)
    assert main(_take(exam, out, "--llm", LL, "--score", "sum")) == 0
    assert "accuracy decided by summed log-likelihood (acc)" in capsys.readouterr().out
    summary = pd.read_csv(out / "summary.csv")
    assert (summary["decision_rule"] == "sum").all()
    assert summary["accuracy"].tolist() == pytest.approx(summary["acc_sum"].tolist())


def test_a_scoring_method_that_changes_part_way_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 20)
    args = ["exam", "take", str(exam), "--out", str(out), "--retrievers", "closed", "--limit", "12"]
    assert main([*args, "--llm", "py/tests.run.fakes:make_switching_llm", "--shard-size", "4"]) == 0
    captured = capsys.readouterr()
    assert "loglikelihood/mixed" in captured.out
    warning = [x for x in captured.err.splitlines() if x.startswith("ragrade: warning:")]
    assert warning == [
        "ragrade: warning: llm=py/tests.run.fakes:make_switching_llm|retriever=closed|k=0|icl=0|chunker=none: "
        "the scoring method changed part-way (echo-logprobs 5, forced-token 7 rows); its accuracy mixes them"
    ]
    assert pd.read_csv(out / "summary.csv")["ll_source"].tolist() == ["mixed: echo-logprobs 5, forced-token 7"]
    assert main(["report", str(out), "--out", str(tmp_path / "report.html")]) == 0
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "scored in different ways part-way (echo-logprobs 5, forced-token 7 rows)" in page
    assert "loglikelihood/mixed" in page and "acc_per_char" in page and "per character" in page


def test_samples_say_what_was_sent_and_stay_coherent_over_resume_overwrite_and_no_samples(tmp_path: Path) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    questions = {q.id: q for q in make_exam(exam, 20)}
    assert main([*_take(exam, out, "--llm", f"{LL},{GEN}"), "--icl", "1"]) == 0
    head, samples = _samples(out)
    df = pd.read_parquet(out / "responses.parquet")
    assert (head["kind"], head["version"], head["rows"], head["rows_without_sample"]) == ("exam_samples", 1, 48, 0)
    assert [(s["pipeline"], s["item_id"]) for s in samples] == list(zip(df["pipeline"], df["question_id"], strict=True))
    ll = next(s for s in samples if s["method"] == "loglikelihood" and "oracle" in s["pipeline"])
    row = df[(df["pipeline"] == ll["pipeline"]) & (df["question_id"] == ll["item_id"])].iloc[0]
    assert "Question: What does the keeper" in ll["request"]["context"] and "Record " in ll["request"]["context"]
    assert ll["request"]["continuations"] == [f" {c}" for c in questions[ll["item_id"]].choices]
    assert "Answer:" in ll["request"]["context"]  # the one-shot example and the question, as sent
    assert ll["response"]["logprobs"] == pytest.approx(list(row["ll_sum"]))
    assert ll["response"]["ll_source"] == "echo-logprobs" and ll["response"]["prompt_tokens"] == row["prompt_tokens"]
    gen = next(s for s in samples if s["method"] == "generate")
    assert [m["role"] for m in gen["request"]["messages"]] == ["system", "user"]
    assert gen["request"]["max_tokens"] == 16 and gen["response"]["text"] in ("A.", "B.", "C.", "D.")
    first = (out / "samples.jsonl").read_bytes()

    # a torn last line (a run ended at once) is dropped; a resume with nothing to do keeps the same file
    with (out / "samples.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"pipeline": "x", "item_id": "q0')
    assert main([*_take(exam, out, "--llm", f"{LL},{GEN}"), "--icl", "1"]) == 0
    assert (out / "samples.jsonl").read_bytes() == first

    # --overwrite starts the file afresh; --no-samples leaves none behind
    assert main([*_take(exam, out, "--llm", LL), "--overwrite"]) == 0
    head, samples = _samples(out)
    assert head["rows"] == 24 and len(samples) == 24 and {s["method"] for s in samples} == {"loglikelihood"}
    assert main([*_take(exam, out, "--llm", LL), "--overwrite", "--no-samples"]) == 0
    assert not (out / "samples.jsonl").exists() and (out / "responses.parquet").exists()
    assert "samples.jsonl" not in json.loads((out / "manifest.json").read_text())["outputs"]


def test_a_request_asked_again_keeps_one_line_its_latest(tmp_path: Path) -> None:
    exam, out = tmp_path / "exam.jsonl", tmp_path / "run"
    make_exam(exam, 20)
    args = ["exam", "take", str(exam), "--out", str(out), "--retrievers", "closed", "--llm", GEN]
    assert main(args) == 0  # the request about site 17 fails (1 of 20: under the threshold)
    assert main(args) == 0  # asked again, and fails again
    head, samples = _samples(out)
    assert head["rows"] == 20 and len(samples) == 20
    assert [s["item_id"] for s in samples if s["response"]["error"]] == ["q017"]


def test_models_given_by_path_are_named_by_their_file_name() -> None:
    assert llm_label("hf//abs/path/to/my-model") == "hf/my-model"
    assert llm_label("llamacpp//models/q4/model.gguf") == "llamacpp/model"
    assert llm_label("llamacpp/./rel/Qwen2.5-0.5B-Q4.GGUF") == "llamacpp/Qwen2.5-0.5B-Q4"
    assert llm_label("hf/~/ckpt/") == "hf/ckpt"
    assert llm_label("replay/hf//abs/my-model") == "replay/hf/my-model"
    for spec in ("openai/gpt-4o-mini", "hf/Qwen/Qwen2.5-0.5B", "offline/student", "llamacpp/gemma-3-270m"):
        assert llm_label(spec) == spec
    pipe = PipelineSpec(llm="llamacpp//data/models/q4/model.gguf", retriever="closed").normalised()
    assert pipe.id.startswith("llm=llamacpp/model|") and pipe.factors()["llm"] == "llamacpp/model"
    assert pipe.llm == "llamacpp//data/models/q4/model.gguf"  # what the worker loads and the manifest keeps


def test_two_models_with_one_file_name_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = SweepConfig.model_validate(
        {"grid": {"llms": ["llamacpp//a/model.gguf", "llamacpp//b/model.gguf"], "retrievers": ["closed"]}}
    )
    with pytest.raises(ConfigError, match="would all be named 'llamacpp/model'"):
        expand_pipelines(cfg)
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 4)
    args = ["exam", "take", str(exam), "--out", str(tmp_path / "run"), "--retrievers", "closed"]
    assert main([*args, "--llm", "hf//x/one/model,hf//x/two/model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "would all be named 'hf/model'" in err[0]
    assert not (tmp_path / "run").exists()
