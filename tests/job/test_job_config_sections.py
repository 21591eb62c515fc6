"""Each stage table of a job config is its stage's own settings model plus the job's keys (issue 37, item 4).

A key means the same in ``[robust]`` as in ``robust run``'s config, in ``[judge]`` as in ``judge``'s, in
``[irt]`` as in an IRT fit's, in ``[exam]`` as in ``exam generate``'s; the old job-only spellings are read
for one release with one warning line; stage keys keep their old shape so earlier run folders are reused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from ragrade import config
from ragrade.errors import ConfigError
from ragrade.exam.config import ExamConfig
from ragrade.irt.model import Bounds, Priors
from ragrade.irt.problem import FitConfig
from ragrade.job.analysis import _fit_config
from ragrade.job.config import (
    DEMO_CONFIG,
    ExamSection,
    IRTSection,
    JobConfig,
    JudgeSection,
    RobustSection,
    load_job_config,
)
from ragrade.job.layout import RunLayout
from ragrade.job.runner import build_stages, stage_hashes
from ragrade.judge.run import JudgeRunConfig, JudgeSettings
from ragrade.robust.config import RobustRunConfig, RobustSettings
from ragrade.run.manifest import build_manifest

DEMO = {"corpus": {"demo": True}}


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    config._DEPRECATIONS.clear()  # each test sees the one-per-process deprecation lines afresh


@pytest.mark.parametrize(
    ("section", "stage_model", "own"),
    [
        (RobustSection, RobustRunConfig, {"data", "testbed", "llm", "out", "llm_options"}),
        (JudgeSection, JudgeRunConfig, {"llm_options"}),
        (IRTSection, FitConfig, set()),
        (ExamSection, ExamConfig, set()),
    ],
)
def test_a_section_holds_every_setting_of_its_stage(
    section: type[BaseModel], stage_model: type[BaseModel], own: set[str]
) -> None:
    """The stage's keys are the section's keys (less the ones a job sets itself: data, out, LLM options)."""
    missing = set(stage_model.model_fields) - set(section.model_fields) - (own - {"llm"})
    assert missing == set()


@pytest.mark.parametrize(
    ("section", "settings", "job_defaults"),
    [
        (RobustSection, RobustSettings, {"noise_ratios", "limit"}),
        (JudgeSection, JudgeSettings, set()),
        (IRTSection, FitConfig, {"factors"}),
        (ExamSection, ExamConfig, {"n", "topic_field"}),
    ],
)
def test_sections_default_to_the_stage_defaults_but_where_the_job_needs_its_own(
    section: type[BaseModel], settings: type[BaseModel], job_defaults: set[str]
) -> None:
    mine, theirs = section().model_dump(), settings().model_dump()
    differ = {k for k in theirs if mine[k] != theirs[k]}
    assert differ == job_defaults
    assert RobustSection().lang == "auto"  # was "en" in the job only; auto finds English as before


@pytest.mark.parametrize(
    ("table", "old", "current", "where"),
    [
        ("robust", {"llms": ["offline/student"]}, {"llm": ["offline/student"]}, "[robust] llms is the old name of llm"),
        ("robust", {"n": 7}, {"limit": 7}, "[robust] n is the old name of limit"),
        ("judge", {"judge_llm": "offline/judge"}, {"llm": "offline/judge"}, "[judge] judge_llm is the old name of llm"),
        ("irt", {"groups": 8}, {"jackknife_groups": 8}, "[irt] groups is the old name of jackknife_groups"),
        ("irt", {"prior": "none"}, {"priors": "none"}, "[irt] prior is the old name of priors"),
        ("exam", {"options": {"stem_window": 4}}, {"stem_window": 4}, "[exam.options] is the old spelling"),
    ],
)
def test_an_old_spelling_is_read_once_with_one_warning_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    table: str,
    old: dict[str, object],
    current: dict[str, object],
    where: str,
) -> None:
    old_cfg = load_job_config(None, {**DEMO, table: old})
    load_job_config(None, {**DEMO, table: old})  # a second read says nothing more
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and where in err[0] and err[0].startswith("ragrade: warning:"), err
    assert "read until the next release" in err[0]
    new_cfg = load_job_config(None, {**DEMO, table: current})
    assert capsys.readouterr().err == ""
    (key,) = current
    assert getattr(getattr(old_cfg, table), key) == getattr(getattr(new_cfg, table), key)
    assert getattr(getattr(old_cfg, table), key) != getattr(getattr(JobConfig.model_validate(DEMO), table), key)
    layout = RunLayout(tmp_path)
    assert stage_hashes(build_stages(old_cfg, layout)) == stage_hashes(build_stages(new_cfg, layout))


def test_old_spellings_in_a_file_win_over_the_base_and_resolve_paths(tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        '[robust]\nllms = ["llamacpp/./m.gguf"]\nn = 5\n[exam]\noptions = { prompt_file = "p.txt", stem_window = 3 }\n'
        '[judge]\nenabled = true\nmetrics = ["claims"]\njudge_llm = "offline/judge"\n'
        '[irt]\nprior = "none"\ngroups = 4\n',
        encoding="utf-8",
    )
    cfg = load_job_config(job, base=DEMO_CONFIG)  # the demo's base spells them the current way
    assert cfg.robust.llm == [f"llamacpp/{tmp_path.resolve() / 'm.gguf'}"] and cfg.robust.limit == 5
    assert cfg.exam.prompt_file == str(tmp_path.resolve() / "p.txt") and cfg.exam.stem_window == 3
    assert cfg.exam.stem_subject == "topic"  # the rest of the demo's [exam] stays
    assert cfg.judge.llm == "offline/judge" and cfg.irt.priors == Priors.named("none")
    assert cfg.irt.jackknife_groups == 4


def test_stage_keys_keep_their_old_shape() -> None:
    """Earlier run folders are reused: the keys hash the names and values they always had."""
    cfg = load_job_config(None, base=DEMO_CONFIG)
    assert cfg.irt.stage_key() == {
        "enabled": True,
        "model": "3pl",
        "factors": ["retriever", "chunker", "icl"],
        "improve_steps": 3,
        "drop": 0.1,
        "prior": "weak",
        "se": "observed",
        "groups": 20,
    }
    assert cfg.exam.stage_key() == {
        "enabled": True,
        "path": None,
        "llm": "offline",
        "n": 200,
        "seed": 0,
        "chunker": None,
        "topic_field": "topic",
        "options": {"stem_window": 6, "stem_subject": "topic"},
    }
    judge = cfg.judge.stage_key()
    assert judge["judge_llm"] == "offline/judge" and "llm" not in judge and "samples" not in judge
    assert cfg.robust.build_key() == {"chunker": None, "retriever": "bm25", "k": 30, "seed": 0, "lang": "auto", "n": 40}
    testbed = cfg.robust.testbed_key()
    assert testbed["llms"] == ["offline/extractive"] and testbed["n"] == 40 and "scoring" not in testbed


@pytest.mark.parametrize(
    ("table", "setting", "stages"),
    [
        ("robust", {"scoring": "rgb"}, {"robust:noise", "robust:negative", "robust:counterfactual"}),
        ("robust", {"docs": 3}, {"robust:noise", "robust:negative", "robust:counterfactual"}),
        ("robust", {"limit": 10}, {"robust:build", "robust:noise", "robust:negative", "robust:counterfactual"}),
        ("judge", {"samples": 3}, {"judge"}),
        ("judge", {"llm": "offline/judge", "metrics": ["claims"]}, {"judge"}),
        ("irt", {"solver": "lbfgs"}, {"irt"}),
        ("irt", {"priors": "none"}, {"irt"}),
        ("exam", {"oversample": 2.0}, {"exam", "sweep", "irt", "adaptive", "robust:build", "robust:noise"}),
    ],
)
def test_a_changed_setting_reruns_its_stage_and_what_reads_it_only(
    tmp_path: Path, table: str, setting: dict[str, object], stages: set[str]
) -> None:
    layout = RunLayout(tmp_path)
    base = load_job_config(None, base=DEMO_CONFIG)
    same = stage_hashes(build_stages(load_job_config(None, {table: {}}, base=DEMO_CONFIG), layout))
    before = stage_hashes(build_stages(base, layout))
    assert same == before  # unchanged settings: every stage reused
    after = stage_hashes(build_stages(load_job_config(None, {table: setting}, base=DEMO_CONFIG), layout))
    changed = {name for name in before if before[name] != after[name]} - {"report"}
    assert stages <= changed, changed
    assert "corpus" not in changed and not any(n.startswith(("chunk:", "index:")) for n in changed)
    if table != "exam":
        assert "exam" not in changed and "sweep" not in changed


def test_the_stage_gets_the_sections_settings(tmp_path: Path) -> None:
    cfg = load_job_config(
        None,
        {
            **DEMO,
            "robust": {"docs": 3, "scoring": "rgb", "temperature": 0.5, "limit": 9},
            "judge": {"samples": 2, "bertscore_idf": True, "llm": "offline/judge", "metrics": ["claims"]},
            "irt": {"solver": "lbfgs", "bounds": "theta=-3:3", "priors": "none", "max_iter": 50},
            "exam": {"oversample": 2.0, "n": 30, "near_duplicate": {"mode": "off"}},
        },
    )
    run = RobustRunConfig.model_validate(
        {**cfg.robust.run_settings(), "data": tmp_path / "d.jsonl", "testbed": "noise", "llm": ["x/y"], "out": tmp_path}
    )
    assert (run.docs, run.scoring, run.temperature, run.limit, run.lang) == (3, "rgb", 0.5, 9, "auto")
    judge = JudgeRunConfig.model_validate(cfg.judge.judge_settings())
    assert judge.samples == 2 and judge.bertscore_idf and judge.llm == "offline/judge"
    fit = _fit_config(cfg, ["retriever"])
    assert fit.solver == "lbfgs" and fit.max_iter == 50 and fit.priors == Priors.named("none")
    assert fit.bounds == Bounds.parse("theta=-3:3") and fit.factors == ("retriever",)
    assert fit.not_applicable == {"*": ("none", "")}
    exam = cfg.exam.exam_config()
    assert type(exam) is ExamConfig and exam.oversample == 2.0 and exam.n == 30 and exam.topic_field == "topic"
    assert exam.near_duplicate.mode == "off"


def test_the_manifest_records_every_setting(tmp_path: Path) -> None:
    cfg = load_job_config(None, {**DEMO, "robust": {"scoring": "rgb"}, "irt": {"solver": "lbfgs"}})
    recorded = build_manifest("job", cfg)["config"]
    assert recorded["robust"]["scoring"] == "rgb" and recorded["robust"]["lang"] == "auto"
    assert recorded["irt"]["solver"] == "lbfgs" and recorded["irt"]["priors"]["theta_sd"] == 1.0
    assert recorded["judge"]["samples"] == 1 and recorded["exam"]["oversample"] == 1.3
    assert set(RobustSection.model_fields) <= set(recorded["robust"])


@pytest.mark.parametrize(
    ("irt", "message"),
    [
        ({"se": "jackknife", "factors": []}, "irt: se jackknife corrects factor effects: it needs factors"),
        ({"solver": "sgd"}, "irt: unknown solver 'sgd'"),
        ({"priors": "strong"}, "irt: unknown prior 'strong'"),
        ({"not_applicable": {"*": ["n/a"]}}, "irt: not_applicable is set by the job"),
        ({"model": "4pl"}, "irt.model: unknown IRT model '4pl'"),
    ],
)
def test_a_bad_irt_setting_is_one_line_naming_the_table(irt: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_job_config(None, {**DEMO, "irt": irt})
    assert message in str(err.value) and "\n" not in str(err.value) and "$" not in str(err.value)


def test_the_job_keeps_its_checks_on_the_embedded_settings() -> None:
    with pytest.raises(ConfigError, match="min_positives"):
        load_job_config(None, {**DEMO, "robust": {"min_positives": 6}})  # a built question keeps 5 at most
    with pytest.raises(ConfigError, match=r"robust\.lang"):
        load_job_config(None, {**DEMO, "robust": {"lang": "fr"}})
    with pytest.raises(ConfigError, match=r"judge\.samples"):
        load_job_config(None, {**DEMO, "judge": {"samples": 0}})
    with pytest.raises(ConfigError, match=r"exam\.oversample"):
        load_job_config(None, {**DEMO, "exam": {"oversample": 0.5}})
    with pytest.raises(ConfigError, match="unknown key"):
        load_job_config(None, {**DEMO, "robust": {"llm_options": {"timeout": 3}}})  # the job's [llm_options] only
    assert JobConfig.model_validate({**DEMO, "robust": {"n": 3}}).robust.limit == 3  # old spelling, the model too


def test_index_and_calibration_sections_are_their_stage_configs() -> None:
    from ragrade.job.config import CalibrationSection, IndexSection, load_job_config
    from ragrade.judge.calibrate import CalibrationConfig
    from ragrade.retrieval.index import IndexConfig

    assert issubclass(IndexSection, IndexConfig) and issubclass(CalibrationSection, CalibrationConfig)
    demo = {"corpus": {"demo": True}}
    cfg = load_job_config(None, {**demo, "index": {"store": "exact", "bm25": {"k1": 1.2}, "headings": True}})
    built = cfg.index.index_config(dense=False)
    assert type(built) is IndexConfig and built.bm25.k1 == 1.2 and built.headings and not built.dense
    for key, why in (("size", "chunking is set per \\[\\[chunkers\\]\\] table"), ("dense", "when a retriever")):
        with pytest.raises(ConfigError, match=rf"\[index\] {key}: .*{why}"):
            load_job_config(None, {**demo, "index": {key: 100 if key == "size" else True}})
