"""One grid schema: a sweep file's ``[grid]`` and a job's ``[sweep]`` share keys and defaults; flags build the
same settings object as the equivalent file; the old ``[grid]`` spellings are read with one deprecation line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.run.fakes import make_exam

from ragrade.cli.main import main
from ragrade.cli.sweep import TakeFlags
from ragrade.errors import ConfigError
from ragrade.job.config import SweepSection, load_job_config
from ragrade.job.layout import RunLayout
from ragrade.job.stages import sweep_config
from ragrade.run.spec import GridConfig, expand_pipelines

GRID = 'llms = ["offline/student"]\nretrievers = ["closed", "oracle"]\nk = [1, 3]\nicl = [0, 1]\nmethods = ["auto"]\n'


def _job(tmp_path: Path, sweep: str) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "a.txt").write_text("The Arlen lighthouse has 90 steps. " * 20, encoding="utf-8")
    job = tmp_path / "job.toml"
    job.write_text(f'out = "run"\n[corpus]\npaths = ["docs"]\n[sweep]\n{sweep}', encoding="utf-8")
    return job


def test_one_grid_table_is_read_alike_by_exam_take_and_by_a_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(f"icl_pool = 1\n[grid]\n{GRID}", encoding="utf-8")  # run settings: top level
    job = _job(tmp_path, f"{GRID}icl_pool = 1\n")  # in [sweep], beside the axes
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, 6)

    from_file = TakeFlags(config=sweep_file).sweep_config()
    from_job = sweep_config(load_job_config(job), RunLayout(tmp_path / "run"))
    ids = [s.id for s in expand_pipelines(from_file)]
    assert ids == [s.id for s in expand_pipelines(from_job)]
    # closed book folds k (k=0), oracle takes k=1: 2 ICL levels x (1 + 1) pipelines
    assert len(ids) == 4 and {s.split("|")[1] for s in ids} == {"retriever=closed", "retriever=oracle"}

    assert main(["run", "--check", str(job)]) == 0
    assert "sweep" in capsys.readouterr().out
    assert (
        main(["--dry-run", "exam", "take", str(exam), "--config", str(sweep_file), "--out", str(tmp_path / "o")]) == 0
    )
    out, err = capsys.readouterr()
    counted = json.loads(out.splitlines()[0])["dry_run"][0]
    assert counted["llm"] == "offline/student" and counted["requests"] == 4 * 5  # 4 pipelines x 5 questions
    assert "deprecated" not in err


def test_the_job_sweep_section_is_the_grid_with_its_defaults() -> None:
    grid_fields = set(GridConfig.model_fields)
    assert grid_fields <= set(SweepSection.model_fields)
    section, grid = SweepSection(), GridConfig()
    assert {name: getattr(section, name) for name in grid_fields} == grid.model_dump()
    # the axes [sweep] gained count in the stage key only when set (earlier run folders keep their stages)
    assert "prompts" not in section.stage_key() and "temperature" not in section.stage_key()
    assert SweepSection(temperature=[0.0, 0.7]).stage_key()["temperature"] == [0.0, 0.7]


def test_old_grid_spellings_are_read_with_one_deprecation_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragrade import config

    monkeypatch.setattr(config, "_DEPRECATIONS", set())  # lines printed by earlier tests in this process
    old = tmp_path / "old.toml"  # the pre-0.9 spelling, kept on purpose
    old.write_text(
        '[prompts]\nterse = "terse.txt"\n[grid]\nllm = ["offline/student"]\nretriever = ["closed"]\n'
        'prompt = ["terse"]\nmethod = ["generate"]\nchunker = ["a"]\n',
        encoding="utf-8",
    )
    new = tmp_path / "new.toml"
    new.write_text(
        '[prompts]\nterse = "terse.txt"\n[grid]\nllms = ["offline/student"]\nretrievers = ["closed"]\n'
        'prompts = ["terse"]\nmethods = ["generate"]\nchunkers = ["a"]\n',
        encoding="utf-8",
    )
    assert TakeFlags(config=old).sweep_config() == TakeFlags(config=new).sweep_config()
    err = capsys.readouterr().err
    assert err.count("deprecated") == 1 and err.startswith("ragrade: warning:")
    for renamed in ("llm -> llms", "retriever -> retrievers", "prompt -> prompts", "method -> methods"):
        assert renamed in err
    assert "chunker -> chunkers" in err and str(old) in err

    both = tmp_path / "both.toml"
    both.write_text('[grid]\nllm = ["a/b"]\nllms = ["c/d"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="llm and llms name the same axis"):
        TakeFlags(config=both).sweep_config()
    # a settings dict and the Python API's keywords are read the same way
    assert GridConfig.model_validate({"retriever": ["bm25"]}).retrievers == ["bm25"]
    assert "[grid]: deprecated key spelling (retriever -> retrievers)" in capsys.readouterr().err
    from ragrade.api.exam import _sweep_config

    assert _sweep_config(None, None, {"llm": "offline/student", "k": 2}).grid.llms == ["offline/student"]
    assert "keyword settings: deprecated key spelling (llm -> llms)" in capsys.readouterr().err
    # read again (a grid is validated more than once per command, a job reads its configs per stage): no new line
    assert TakeFlags(config=old).sweep_config() == TakeFlags(config=new).sweep_config()
    GridConfig.model_validate({"retriever": ["bm25"]})
    assert _sweep_config(None, None, {"llm": "offline/student"}).grid.llms == ["offline/student"]
    assert "deprecated" not in capsys.readouterr().err


def test_flags_build_the_same_settings_as_the_equivalent_file(tmp_path: Path) -> None:
    flags = TakeFlags(
        llm="offline/student,openai/x",
        retrievers="closed,oracle",
        k="1,3",
        icl="0,2",
        method="generate",
        query="none",
        score="sum",
        target="letter",
        seed=3,
        limit=5,
        icl_pool=2,
        shard_size=4,
        executor="local",
        no_samples=True,
        adaptive=True,
        budget=50,
        target_se=0.3,
        no_cache=True,
        timeout=9.0,
        concurrency=2,
    )
    file = tmp_path / "sweep.toml"
    file.write_text(
        'seed = 3\nlimit = 5\nicl_pool = 2\nshard_size = 4\nexecutor = "local"\nsamples = false\n'
        '[grid]\nllms = ["offline/student", "openai/x"]\nretrievers = ["closed", "oracle"]\nk = [1, 3]\n'
        'icl = [0, 2]\nmethods = ["generate"]\nquery = ["none"]\n'
        '[answer]\nscore = "sum"\ntarget = "letter"\n'
        "[adaptive]\nenabled = true\nbudget = 50\ntarget_se = 0.3\n"
        "[llm_options]\ncache = false\ntimeout = 9.0\nconcurrency = 2\n",
        encoding="utf-8",
    )
    from_flags, from_file = flags.sweep_config(), TakeFlags(config=file).sweep_config()
    assert from_flags == from_file
    assert from_flags.grid.methods == ["generate"] and from_flags.adaptive.budget == 50 and not from_flags.samples
    assert from_flags != TakeFlags(config=file, k="2").sweep_config()  # a flag overrides the file
    with pytest.raises(ConfigError, match="add --adaptive"):
        TakeFlags(budget=10).sweep_config()
