"""``ragrade run`` validates the whole config before the first stage; ``--check`` prints the plan, runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrade.cli.main import main


def _config(tmp_path: Path, extra: str = "") -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The Arlen lighthouse has 90 steps. " * 20, encoding="utf-8")
    cfg = tmp_path / "job.toml"
    cfg.write_text(f'out = "{tmp_path / "run"}"\n[corpus]\npaths = ["docs"]\n{extra}', encoding="utf-8")
    return cfg


@pytest.mark.parametrize(
    ("table", "word"),
    [
        ('[irt]\nmodel = "4pl"\n', "irt.model: unknown IRT model '4pl'"),
        ('[robust]\ntestbeds = ["noise", "nosie"]\n', "[robust] testbeds"),
        ('[judge]\nenabled = true\nmetrics = ["exact", "bogus"]\n', "[judge] metrics"),
        ('[sweep]\nretrievers = ["bm25", "hybird"]\n', "[sweep] retrievers"),
        ('[sweep]\nllms = ["offline/student", "offline/studnet"]\n', "[sweep] llms"),
        ('[robust]\nllm = ["nosuch/model"]\n', "[robust] llm"),
        ('[robust]\njudge = "nosuch/model"\n', "[robust] judge"),
        (
            '[judge]\nenabled = true\nmetrics = ["correctness"]\nllm = "offline/judge"\n',
            "[judge] llm offline/judge is the offline claims baseline",
        ),
        # every path the job names, checked before the first stage (a missing one failed only at its stage)
        ('[exam]\npath = "."\n', "is a folder; give the exam"),
        ('[exam]\npath = "nosuch.jsonl"\n', "[exam] path: "),
        ('[exam]\nprompt_file = "nosuch.txt"\n', "[exam] prompt_file"),
        ('[robust]\nprompts = "nosuch.toml"\n', "[robust] prompts: "),
        ('[judge]\nenabled = true\nprompts = { correctness = "no.txt" }\n', "[judge] prompts.correctness: "),
        # the judge's own checks, before the first stage (they failed at the judge stage)
        ('[judge]\nenabled = true\nmetrics = ["correctness"]\n', "[judge] LLM-judged metrics (correctness) need llm"),
        ('[judge]\nenabled = true\nscreen_top = 2\nmetrics = ["exact"]\n', "[judge] screen_top ranks"),
        ('[robust]\ndata = "nosuch.jsonl"\n', "[robust] data: "),
        ("[sweep]\nllms = []\n", "grid axis 'llms' is empty"),  # said "the sweep has no pipelines"
        ("[sweep]\nk = []\n", "grid axis 'k' is empty"),
        # [irt] against the grid's responses (it failed at the IRT stage, after the sweep had run)
        ('[irt]\nfactors = ["nosuch"]\n', "[irt] factors: 'nosuch' is not a column of the sweep's responses"),
        ('[irt]\nfactors = ["retriver"]\n', "Did you mean 'retriever'?"),
        ('[irt]\nfactors = ["temperature"]\n', "'temperature' is not a column"),  # no pipeline sets one
    ],
)
def test_a_bad_setting_fails_before_any_stage_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, word: str
) -> None:
    cfg = _config(tmp_path, table)
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragrade: error:") and word in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()
    assert main(["run", "--check", str(cfg)]) == 2


def test_a_missing_corpus_path_fails_the_check_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path)
    cfg.write_text(cfg.read_text(encoding="utf-8").replace('"docs"', '"docs", "nosuch"'), encoding="utf-8")
    assert main(["run", "--check", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "[corpus] paths: " in err and "nosuch does not exist" in err and err.count("\n") == 1
    assert main(["run", str(cfg)]) == 2
    assert not (tmp_path / "run").exists()


def test_check_prints_the_plan_and_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path)
    assert main(["run", "--check", "--json", str(cfg)]) == 0
    plan = json.loads(capsys.readouterr().out)
    stages = [s["stage"] for s in plan["stages"]]
    assert plan["valid"] and stages[0] == "corpus" and "sweep" in stages and "report" in stages
    assert all(s["action"] == "run" for s in plan["stages"])
    assert not (tmp_path / "run").exists()
    assert main(["run", "--check", str(cfg)]) == 0
    assert "config is valid" in capsys.readouterr().out


def test_the_offline_claims_judge_is_a_valid_judge_llm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, '[judge]\nenabled = true\nmetrics = ["claims", "exact"]\nllm = "offline/judge"\n')
    assert main(["run", str(cfg), "--check"]) == 0
    assert "config is valid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("robust", "word"),
    [
        # a testbed that reads other records than the data file holds failed at its stage, after the sweep
        ('testbeds = ["noise", "counterfactual"]', "[robust] testbeds: counterfactual: "),
        ('testbeds = ["noise"]\nmin_positives = 3', "[robust] testbeds: noise: "),  # every question skipped
    ],
)
def test_robust_testbeds_are_checked_against_the_data_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], robust: str, word: str
) -> None:
    data = tmp_path / "rgb.jsonl"  # base records, two supporting passages each
    data.write_text(
        "".join(
            json.dumps({"id": i, "query": f"Which town hosted game {i}?", "answer": [[f"Town {i}"]],
                        "positive": [f"Game {i} was held in Town {i}.", f"Town {i} hosted game {i}."],
                        "negative": [f"Game {i + 10} was held elsewhere.", "Nothing here."]}) + "\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )  # fmt: skip
    cfg = _config(tmp_path, f'[robust]\ndata = "{data}"\nllm = ["offline/student"]\n{robust}\n')
    assert main(["run", "--check", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragrade: error:") and word in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()
