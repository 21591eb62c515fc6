"""Job config validation, stage hashing, the IRT factor plan, and the CLI's bad-input paths."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tests.support.typed import as_dict, dig

from ragrade.cli.main import main
from ragrade.errors import ConfigError
from ragrade.job.analysis import applies, design_rank_ok, plan_irt
from ragrade.job.config import DEMO_CONFIG, load_job_config
from ragrade.job.layout import RunLayout
from ragrade.job.runner import build_stages, stage_hashes


def _grid() -> pd.DataFrame:
    rows = []
    for ret in ("closed", "bm25", "dense", "oracle"):
        for icl in (0, 1):
            for ch in ["none"] if ret in ("closed", "oracle") else ["rec", "sent"]:
                rows.append(
                    {
                        "pipeline": f"{ret}|{icl}|{ch}",
                        "retriever": ret,
                        "icl": icl,
                        "chunker": ch,
                        "llm": "offline/student",
                        "question_id": "q1",
                        "correct": 1,
                    }
                )
    return pd.DataFrame(rows)


def test_plan_is_one_fit_with_chunker_not_applicable() -> None:
    df = _grid()
    # chunker 'none' as a level is collinear with retriever closed/oracle; as "not applicable" it is not
    assert not design_rank_ok(df, ["retriever", "chunker", "icl"], not_applicable=())
    assert design_rank_ok(df, ["retriever", "chunker", "icl"])
    plan = plan_irt(df, ["retriever", "chunker", "icl", "llm"])
    assert plan["version"] == 2 and plan["constant"] == ["llm"] and plan["confounded"] == []
    (main_fit,) = plan["fits"]
    assert main_fit["factors"] == ["retriever", "chunker", "icl"] and main_fit["pipelines"] == 12
    assert main_fit["path"] == "irt.json" and main_fit["subset"] is None
    assert main_fit["not_applicable"] == {"chunker": 4}


def test_plan_treats_empty_and_case_variants_as_not_applicable() -> None:
    df = _grid()
    df["chunker"] = df["chunker"].astype(object)
    df.loc[df["retriever"] == "closed", "chunker"] = None
    df.loc[df["retriever"] == "oracle", "chunker"] = " None "
    plan = plan_irt(df, ["retriever", "chunker", "icl"])
    assert [f["factors"] for f in plan["fits"]] == [["retriever", "chunker", "icl"]]
    assert applies(df, "chunker").sum() == 8


def test_plan_leaves_out_a_factor_confounded_where_it_applies() -> None:
    df = _grid()
    # among indexed pipelines, chunker 'rec' always goes with bm25 and 'sent' with dense: not identifiable
    df = df[((df["retriever"] == "bm25") & (df["chunker"] == "rec")) | (df["retriever"] != "bm25")]
    df = df[((df["retriever"] == "dense") & (df["chunker"] == "sent")) | (df["retriever"] != "dense")]
    assert not design_rank_ok(df, ["retriever", "chunker", "icl"])
    plan = plan_irt(df, ["retriever", "chunker", "icl"])
    assert [f["factors"] for f in plan["fits"]] == [["retriever", "icl"]]
    assert plan["confounded"] == ["chunker"] and "chunker" in plan["note"]


def test_plan_factor_with_one_applicable_level_is_constant() -> None:
    df = _grid()
    df = df[df["chunker"] != "sent"]
    plan = plan_irt(df, ["retriever", "chunker", "icl"])
    assert plan["constant"] == ["chunker"]
    assert plan["fits"][0]["factors"] == ["retriever", "icl"]


def test_plan_full_factorial_is_one_fit() -> None:
    df = _grid()
    df = df[df["chunker"] != "none"]
    plan = plan_irt(df, ["retriever", "chunker", "icl"])
    assert [f["name"] for f in plan["fits"]] == ["main"]
    assert plan["fits"][0]["factors"] == ["retriever", "chunker", "icl"]


def test_config_errors() -> None:
    with pytest.raises(ConfigError, match="corpus"):
        load_job_config(None, {})
    with pytest.raises(ConfigError, match="unique"):
        load_job_config(None, {"corpus": {"demo": True}, "chunkers": [{"size": 100}, {"size": 100}]})
    with pytest.raises(ConfigError, match="unknown chunker"):
        load_job_config(None, {"corpus": {"demo": True}, "exam": {"chunker": "nope"}})
    with pytest.raises(ConfigError, match="overlap"):
        load_job_config(None, {"corpus": {"demo": True}, "chunkers": [{"size": 50, "overlap": 60}]})


def test_relative_paths_follow_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    cfg_file = tmp_path / "sub" / "job.toml"
    cfg_file.write_text('[corpus]\npaths = ["docs"]\n[exam]\npath = "exam.jsonl"\n', encoding="utf-8")
    cfg = load_job_config(cfg_file)
    assert cfg.corpus.paths == [str(tmp_path / "sub" / "docs")]
    assert cfg.exam.path == str(tmp_path / "sub" / "exam.jsonl")


def test_stage_hashes_chain(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    base = load_job_config(None, base=DEMO_CONFIG)
    h1 = stage_hashes(build_stages(base, layout))
    changed = load_job_config(
        None,
        {
            "chunkers": [
                {"strategy": "recursive", "size": 200, "overlap": 30},
                {"strategy": "sentence", "size": 120, "overlap": 0},
            ]
        },
        base=DEMO_CONFIG,
    )
    h2 = stage_hashes(build_stages(changed, layout))
    assert h1["corpus"] == h2["corpus"] and h1["chunk:sentence-120"] == h2["chunk:sentence-120"]
    assert h1["chunk:recursive-200"] != h2["chunk:recursive-200"]
    for downstream in ("index:recursive-200", "exam", "sweep", "irt", "robust:build", "robust:noise", "judge"):
        assert h1[downstream] != h2[downstream], downstream
    names = [s.name for s in build_stages(base, layout)]
    assert names[0] == "corpus" and names[-1] == "report" and names[-2] == "judge"


def test_demo_judges_a_small_grid_over_one_chunker(tmp_path: Path) -> None:
    from ragrade.job.analysis import judge_sweep_config
    from ragrade.run.spec import expand_pipelines

    layout = RunLayout(tmp_path)
    cfg = load_job_config(None, base=DEMO_CONFIG)
    assert cfg.judge.metrics == ["claims", "exact"] and cfg.judge.llm == "offline/judge"
    judge = next(s for s in build_stages(cfg, layout) if s.name == "judge")
    assert judge.needs == ["chunk:recursive-200", "index:recursive-200"]  # the other chunking is not read
    ids = {p.id for p in expand_pipelines(judge_sweep_config(cfg, layout))}
    assert ids == {
        "llm=offline/extractive|retriever=closed|k=0|icl=0|chunker=none",
        "llm=offline/extractive|retriever=bm25|k=3|icl=0|chunker=recursive-200",
        "llm=offline/extractive|retriever=dense|k=3|icl=0|chunker=recursive-200",
        "llm=offline/extractive|retriever=oracle|k=1|icl=0|chunker=none",
    }
    h1 = stage_hashes(build_stages(cfg, layout))
    other = load_job_config(
        None, {"chunkers": [dig(DEMO_CONFIG, "chunkers", 0), {"strategy": "sentence", "size": 100}]}, base=DEMO_CONFIG
    )
    h2 = stage_hashes(build_stages(other, layout))
    assert h1["judge"] == h2["judge"] and h1["sweep"] != h2["sweep"]
    # without [judge] chunkers / k: every chunking of the sweep at the sweep's first k (as before)
    judge_table = {k: v for k, v in as_dict(DEMO_CONFIG["judge"]).items() if k not in ("chunkers", "k")}
    plain = load_job_config(None, base={**DEMO_CONFIG, "judge": judge_table})
    ks = {(p.k, p.chunker) for p in expand_pipelines(judge_sweep_config(plain, layout)) if p.retriever == "bm25"}
    assert ks == {(1, "recursive-200"), (1, "sentence-120")}
    with pytest.raises(ConfigError, match="unknown chunker 'nope'"):
        load_job_config(None, {"judge": {"chunkers": ["nope"]}}, base=DEMO_CONFIG)


def test_cli_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[corpus]\ndemo = true\n[sweep]\nretreivers = ['bm25']\n", encoding="utf-8")
    assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
    broken = tmp_path / "broken.toml"
    broken.write_text("[corpus\n", encoding="utf-8")
    assert main(["run", str(broken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("ragrade: error:") for line in err)
    assert "retreivers" in err[1]


def test_displays_print_one_line_per_stage() -> None:
    import io

    from ragrade.job.progress import Display, RichDisplay

    for cls in (Display, RichDisplay):
        stream = io.StringIO()
        with cls(stream=stream) as shown:
            shown.stage_start(0, 2, "corpus")
            shown.sub_progress("reading", 1, 4)
            shown.stage_done(0, 2, "corpus", 1.25, {"documents": 3, "nested": {"x": 1}})
            shown.stage_reused(1, 2, "chunk:a", 2.0)
        lines = [line for line in stream.getvalue().splitlines() if line.strip()]
        assert lines == [
            f"[ 1/2] {'corpus':<28} done in     1.2s  (documents=3)",
            f"[ 2/2] {'chunk:a':<28} reused (unchanged config)",
        ], (cls, lines)


def test_irt_section_chooses_the_effect_se() -> None:
    from ragrade.job.analysis import _fit_config

    cfg = load_job_config(None, {"corpus": {"demo": True}, "irt": {"se": "jackknife", "jackknife_groups": 8}})
    fit_cfg = _fit_config(cfg, ["retriever", "icl"])
    assert fit_cfg.se == "jackknife" and fit_cfg.jackknife_groups == 8
    assert _fit_config(cfg, []).se == "observed"  # nothing to correct without factors
    assert _fit_config(load_job_config(None, {"corpus": {"demo": True}}), ["icl"]).se == "observed"
    with pytest.raises(ConfigError, match="se"):
        load_job_config(None, {"corpus": {"demo": True}, "irt": {"se": "bootstrap-ish"}})
