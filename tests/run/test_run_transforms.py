"""The query and post factors on the grid: spec ids, exam take, responses columns, manifest, IRT plan, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import make_exam
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main
from ragrade.corpus.types import Chunk
from ragrade.errors import ConfigError
from ragrade.run.manifest import read_manifest
from ragrade.run.spec import PipelineSpec, build_sweep_config, expand_pipelines
from ragrade.run.summary import read_responses

LL = "py/tests.run.fakes:make_llm"


@pytest.fixture(scope="module")
def exam_and_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from ragrade.retrieval.index import IndexConfig, build_index

    root = tmp_path_factory.mktemp("tx")
    qs = make_exam(root / "exam.jsonl", 24)
    chunks = [
        Chunk(id=q.chunk_id, doc_id=q.doc_id, text=q.context or "", start=0, end=len(q.context or ""), strategy="whole")
        for q in qs
    ]
    build_index(chunks, root / "idx", IndexConfig(dense=False))
    return root / "exam.jsonl", root / "idx"


def test_spec_ids_factors_and_normalisation() -> None:
    spec = PipelineSpec(retriever="bm25", chunker="a", query="rm3", post="mmr+compress", temperature=0.7)
    assert spec.id.endswith("|query=rm3|post=mmr+compress|temperature=0.7")
    assert PipelineSpec.from_id(spec.id) == spec
    assert spec.factors()["query"] == "rm3" and spec.factors()["post"] == "mmr+compress"
    plain = PipelineSpec(retriever="bm25", chunker="a")
    assert "query" not in plain.id and plain.factors()["query"] == "none"  # ids of untransformed pipelines unchanged
    closed = PipelineSpec(retriever="closed", query="rm3", post="mmr").normalised()
    assert closed.query == "none" and closed.factors()["query"] == "n/a" and closed.factors()["post"] == "n/a"


def test_grid_expands_and_validates_transforms() -> None:
    cfg = build_sweep_config(
        {
            "grid": {"retrievers": ["closed", "bm25"], "query": ["none", "rm3"], "post": ["none", "mmr"]},
            "indexes": {"a": "x"},
        }
    )
    ids = [s.id for s in expand_pipelines(cfg)]
    assert len(ids) == 1 + 4  # closed book once (transforms do not apply), bm25 x query x post
    bad = build_sweep_config({"grid": {"retrievers": ["bm25"], "query": ["hyd"]}, "indexes": {"a": "x"}})
    with pytest.raises(ConfigError, match="Did you mean 'hyde'"):
        expand_pipelines(bad)
    nollm = build_sweep_config({"grid": {"retrievers": ["bm25"], "post": ["llm-rerank"]}, "indexes": {"a": "x"}})
    with pytest.raises(ConfigError, match="pass transform_llm PROVIDER/MODEL"):
        expand_pipelines(nollm)


def test_exam_take_with_query_and_post_factors(exam_and_index: tuple[Path, Path], tmp_path: Path) -> None:
    exam, idx = exam_and_index
    out = tmp_path / "run"
    args = ["exam", "take", str(exam), "--out", str(out), "--index", f"small={idx}", "--llm", LL]
    code = main(
        [*args, "--retrievers", "closed,bm25", "--query", "none,rm3", "--post", "none,mmr+compress", "--k", "2"]
    )
    assert code == 0
    df = read_responses(out)
    assert {"query", "post", "transform_error"} <= set(df.columns)
    bm25 = df[df["retriever"] == "bm25"]
    assert set(bm25["query"]) == {"none", "rm3"} and set(bm25["post"]) == {"none", "mmr+compress"}
    assert set(df[df["retriever"] == "closed"]["query"]) == {"n/a"}
    assert df["transform_error"].isna().all()
    assert df["pipeline"].nunique() == 5
    m = read_manifest(out)
    tx = [v for k, v in m["components"].items() if k.startswith("transforms:") and "rm3" in k]
    assert tx and tx[0]["query"]["name"] == "rm3" and "fb_terms" in tx[0]["query"]
    assert m["counts"]["n_transform_failures"] == 0

    from ragrade.job.analysis import plan_irt

    plan = plan_irt(df, ["retriever", "query", "post"])
    assert plan["fits"][0]["factors"] == ["retriever", "query", "post"]  # "none" is a level, "n/a" not applicable


def test_failed_hyde_is_counted_and_falls_back(exam_and_index: tuple[Path, Path], tmp_path: Path) -> None:
    exam, idx = exam_and_index

    def responder(body: dict[str, Any]) -> str:
        return "The keeper of site 3 always carries samples to the lab."

    with OpenAIServer(responder=responder, faults={"rate": 0.5, "kinds": ["400"], "seed": 1}) as srv:
        out = tmp_path / "run"
        args = ["exam", "take", str(exam), "--out", str(out), "--index", f"small={idx}", "--llm", LL]
        args += ["--retrievers", "bm25", "--query", "hyde", "--transform-llm", "openai/test-model"]
        args += ["--llm-base-url", srv.base_url, "--no-cache"]
        code = main(args)
    assert code == 0
    df = read_responses(out)
    failed = df["transform_error"].notna()
    assert 0 < failed.sum() < len(df)  # some rewrites failed: flagged, answered from the original query
    assert df.loc[failed, "error"].isna().all() and (df.loc[failed, "retrieved"].map(len) == 3).all()
    assert df["transform_error"].dropna().str.startswith("hyde failed").all()
    assert read_manifest(out)["counts"]["n_transform_failures"] == int(failed.sum())


def test_missing_transform_llm_exits_2(exam_and_index: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    exam, idx = exam_and_index
    args = ["exam", "take", str(exam), "--out", str(tmp_path / "r"), "--index", f"small={idx}", "--llm", LL]
    assert main([*args, "--retrievers", "bm25", "--query", "multi-query"]) == 2
    err = capsys.readouterr().err
    assert "multi-query needs an LLM" in err and "--transform-llm" in err and "Traceback" not in err
    assert main([*args, "--retrievers", "bm25", "--post", "mmr+rernk"]) == 2
    assert "Did you mean 'rerank'" in capsys.readouterr().err


def test_factor_verdicts_pair_matched_pipelines() -> None:
    import pandas as pd

    from ragrade.report.sections_factors import factor_verdicts, paired_by_level

    rows: list[dict[str, object]] = []
    for ret in ("bm25", "dense"):
        for query in ("none", "rm3"):
            for i in range(20):
                correct = 1 if query == "rm3" else int(i < 10)
                rows.append({"pipeline": f"{ret}/{query}", "retriever": ret, "query": query, "post": "none"})
                rows[-1].update(question_id=f"q{i}", correct=correct)
    rows += [
        {"pipeline": "closed", "retriever": "closed", "query": "n/a", "post": "n/a", "question_id": "q0", "correct": 0}
    ]
    df = pd.DataFrame(rows)
    paired, n_match = paired_by_level(df, "query", "rm3")
    assert n_match == 2 and len(paired) == 80 and paired["question_id"].nunique() == 40
    (v,) = factor_verdicts(df, "query")
    assert v["level"] == "rm3" and v["n"] == 40 and v["difference"] == pytest.approx(0.5)
    assert v["a_only"] == 20 and v["b_only"] == 0 and v["verdict"] == "better than none"
    assert factor_verdicts(df, "post") == []  # one level only: nothing to compare


def test_report_shows_transform_verdicts(exam_and_index: tuple[Path, Path], tmp_path: Path) -> None:
    from ragrade.report.render import render_report

    exam, idx = exam_and_index
    out = tmp_path / "run"
    args = ["exam", "take", str(exam), "--out", str(out), "--index", f"small={idx}", "--llm", LL, "--k", "1"]
    assert main([*args, "--retrievers", "bm25", "--query", "none,rm3", "--post", "none,threshold"]) == 0
    page = render_report(out)
    assert "Query transforms and passage post-processing" in page
    assert "rm3" in page and "threshold" in page and "McNemar" in page


def test_example_job_config_puts_query_and_post_on_the_grid(tmp_path: Path) -> None:
    from ragrade.job.config import load_job_config
    from ragrade.job.layout import RunLayout
    from ragrade.job.stages import sweep_config

    example = Path(__file__).resolve().parents[2] / "examples" / "transforms.toml"
    cfg = load_job_config(example)
    sweep = sweep_config(cfg, RunLayout(tmp_path))
    specs = expand_pipelines(sweep)
    assert {s.query for s in specs} == {"none", "rm3"} and {s.post for s in specs} == {"none", "mmr", "compress"}
    assert len(specs) == 2 + 2 * 2 * 3  # closed and oracle once; bm25 and dense x query x post
    assert {"query", "post"} <= set(cfg.irt.factors)
    over = load_job_config(example, {"sweep": {"query": ["none", "hyde"]}})
    with pytest.raises(ConfigError, match="pass transform_llm PROVIDER/MODEL"):
        expand_pipelines(sweep_config(over, RunLayout(tmp_path)))


def test_run_command_overrides_query_and_post(monkeypatch: pytest.MonkeyPatch) -> None:
    import ragrade.job.runner as runner

    seen: dict[str, Any] = {}

    def fake_run_job(cfg: Any, out: Path, force: bool = False, display: Any = None) -> Any:
        seen["sweep"] = cfg.sweep
        raise ConfigError("stop here")

    monkeypatch.setattr(runner, "run_job", fake_run_job)
    example = Path(__file__).resolve().parents[2] / "examples" / "transforms.toml"
    args = ["run", str(example), "--query", "none,hyde", "--post", "rerank+compress", "--transform-llm", "openai/m"]
    assert main(args) == 2
    sweep = seen["sweep"]
    assert sweep.query == ["none", "hyde"] and sweep.post == ["rerank+compress"] and sweep.transform_llm == "openai/m"
    assert sweep.transform_options["rm3"] == {"fb_docs": 3, "fb_terms": 8}  # the file's table is kept


def test_report_leaves_the_section_out_when_only_n_a_varies(exam_and_index: tuple[Path, Path], tmp_path: Path) -> None:
    from ragrade.report.render import render_report

    exam, idx = exam_and_index
    out = tmp_path / "run"
    args = ["exam", "take", str(exam), "--out", str(out), "--index", f"small={idx}", "--llm", LL, "--k", "1"]
    assert main([*args, "--retrievers", "closed,bm25,oracle"]) == 0  # query/post: none, and n/a for closed/oracle
    assert "Query transforms and passage post-processing" not in render_report(out)
