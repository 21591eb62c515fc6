"""One rule for paths in config files: relative to the config file's folder; command-line flags to the CWD."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.typed import dig

from ragrade.cli.main import main
from ragrade.config_paths import resolve_llm_spec, resolve_section
from ragrade.job.config import load_job_config
from ragrade.run.spec import load_sweep_file


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """A project folder (config in ``project/cfg``, documents in ``project/docs``) and an unrelated CWD."""
    project, elsewhere = tmp_path / "project", tmp_path / "deep" / "elsewhere"
    (project / "cfg").mkdir(parents=True)
    (project / "docs").mkdir()
    (project / "docs" / "a.txt").write_text("The Arlen lighthouse has 90 steps and a red gallery. " * 20, "utf-8")
    elsewhere.mkdir(parents=True)
    return project, elsewhere


def test_every_path_of_a_job_config_is_relative_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, elsewhere = _tree(tmp_path)
    cfg_file = project / "cfg" / "job.toml"
    cfg_file.write_text(
        'out = "../runs/job"\n'
        '[corpus]\npaths = ["../docs", "/abs/docs"]\n'
        '[index]\nembedder = "st:./models/mini"\n'
        '[exam]\npath = "exam.jsonl"\nllm = "llamacpp/./m.gguf"\nprompt_file = "p.txt"\n'
        '[sweep]\nllms = ["offline/student", "llamacpp/models/q4.gguf", "hf/org/name", "llamacpp/gemma-3-270m"]\n'
        '[robust]\ndata = "../rgb.jsonl"\nllm = ["hf/../hfmodel"]\nprompts = "rp.toml"\njudge = "hf/./judge"\n'
        '[adaptive]\ncalibration = "old/irt.json"\n'
        '[judge]\nenabled = true\nllm = "openai/gpt-4o"\nprompts = { correctness = "c.txt" }\n'
        '[calibration]\nhuman = "labels.jsonl"\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(elsewhere)
    cfg = load_job_config(Path("../../project/cfg/job.toml"))
    root, here = project.resolve(), (project / "cfg").resolve()
    assert cfg.out == str(root / "runs" / "job")
    assert cfg.corpus.paths == [str(root / "docs"), "/abs/docs"]
    assert cfg.index.embedder == f"st:{here / 'models' / 'mini'}"
    assert cfg.exam.path == str(here / "exam.jsonl") and cfg.exam.llm == f"llamacpp/{here / 'm.gguf'}"
    assert cfg.exam.prompt_file == str(here / "p.txt")
    assert cfg.sweep.llms == [
        "offline/student",
        f"llamacpp/{here / 'models/q4.gguf'}",
        "hf/org/name",
        "llamacpp/gemma-3-270m",
    ]
    assert cfg.robust.data == str(root / "rgb.jsonl") and cfg.robust.llm == [f"hf/{root / 'hfmodel'}"]
    assert cfg.robust.prompts == here / "rp.toml" and cfg.robust.judge == f"hf/{here / 'judge'}"
    assert cfg.adaptive.calibration == str(here / "old" / "irt.json")
    assert cfg.judge.llm == "openai/gpt-4o" and cfg.judge.prompts == {"correctness": str(here / "c.txt")}
    assert cfg.calibration.human == str(here / "labels.jsonl")
    flagged = load_job_config(Path("../../project/cfg/job.toml"), {"out": "mine"})
    assert flagged.out == "mine"  # a command-line value is taken as given (relative to the CWD)


def _small_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    project, elsewhere = _tree(tmp_path)
    cfg_file = project / "cfg" / "job.toml"
    cfg_file.write_text(
        'out = "../runs/job"\n[corpus]\npaths = ["../docs"]\n[[chunkers]]\nsize = 64\noverlap = 8\n'
        "[exam]\nenabled = false\n[sweep]\nenabled = false\n[irt]\nenabled = false\n"
        "[robust]\nenabled = false\n[report]\nenabled = false\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(elsewhere)
    return project, elsewhere, "../../project/cfg/job.toml"


def test_run_check_prints_the_resolved_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project, elsewhere, rel = _small_job(tmp_path, monkeypatch)
    assert main(["run", "--check", "--json", rel]) == 0
    paths = json.loads(capsys.readouterr().out)["paths"]
    assert paths["out"] == str((project / "runs" / "job").resolve())
    assert paths["corpus"] == [str((project / "docs").resolve())]
    assert main(["run", "--check", rel, "--out", "here"]) == 0
    text = capsys.readouterr().out
    assert f"out                  {(elsewhere / 'here').resolve()}" in text  # a flag: relative to the CWD
    assert f"corpus               {(project / 'docs').resolve()}" in text
    assert not (project / "runs").exists() and list(elsewhere.iterdir()) == []


@pytest.mark.slow
def test_run_writes_where_the_config_says_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project, elsewhere, rel = _small_job(tmp_path, monkeypatch)
    assert main(["run", rel]) == 0
    capsys.readouterr()
    run_dir = project / "runs" / "job"
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["paths"]["out"] == str(run_dir.resolve())
    assert manifest["paths"]["corpus"] == [str((project / "docs").resolve())]
    assert (run_dir / "corpus").is_dir() or any(run_dir.iterdir())
    assert not (tmp_path / "runs").exists() and list(elsewhere.iterdir()) == []  # nothing beside the CWD


def test_sweep_file_paths_are_relative_to_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "cwd").mkdir()
    sweep = tmp_path / "conf" / "sweep.toml"
    sweep.write_text(
        'transform_llm = "llamacpp/../rw.gguf"\n'
        '[indexes]\nr = "../idx"\n[prompts]\nshort = "short.txt"\n'
        '[grid]\nllms = ["./m.gguf", "llamacpp/./m.gguf", "openai/x"]\n'
        '[[pipelines]]\nllm = "hf/./local"\nretriever = "closed"\n'
        '[llm_options]\nreplay_from = "../runs/full"\n[adaptive]\ncalibration = "irt.json"\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path / "cwd")
    layer = load_sweep_file("../conf/sweep.toml")
    conf = (tmp_path / "conf").resolve()
    assert layer["indexes"] == {"r": str(tmp_path.resolve() / "idx")}
    assert layer["prompts"] == {"short": str(conf / "short.txt")}
    assert dig(layer, "grid", "llms") == ["./m.gguf", f"llamacpp/{conf / 'm.gguf'}", "openai/x"]  # no provider: invalid
    assert dig(layer, "pipelines", 0, "llm") == f"hf/{conf / 'local'}"
    assert layer["transform_llm"] == f"llamacpp/{tmp_path.resolve() / 'rw.gguf'}"
    assert dig(layer, "llm_options", "replay_from") == str(tmp_path.resolve() / "runs" / "full")
    assert dig(layer, "adaptive", "calibration") == str(conf / "irt.json")


def test_verb_config_tables_and_llm_specs(tmp_path: Path) -> None:
    config = tmp_path / "c" / "robust.toml"
    table = {
        "data": "rgb.jsonl",
        "out": "/abs/out",
        "prompts": "~/p.toml",
        "llm": ["replay/llamacpp/./q.gguf"],
        "judge": "openai/j",
        "noise_ratios": [0.2],
    }
    got = resolve_section(table, config, paths=("data", "out", "prompts"), llms=("llm", "judge"))
    base = (tmp_path / "c").resolve()
    assert got["data"] == str(base / "rgb.jsonl") and got["out"] == "/abs/out"
    assert got["prompts"] == str(Path("~/p.toml").expanduser())
    assert got["llm"] == [f"replay/llamacpp/{base / 'q.gguf'}"] and got["judge"] == "openai/j"
    assert got["noise_ratios"] == [0.2]
    judge = resolve_section(
        {"prompts": {"claims": "c.txt"}, "llm": "hf/org/m"}, config, maps=("prompts",), llms=("llm",)
    )
    assert judge == {"prompts": {"claims": str(base / "c.txt")}, "llm": "hf/org/m"}
    assert resolve_llm_spec("llamacpp//abs/q.gguf", base) == "llamacpp//abs/q.gguf"
    assert resolve_llm_spec("openai/http://x", base) == "openai/http://x"


def test_a_home_folder_of_an_unknown_user_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job.toml"
    job.write_text('[corpus]\npaths = ["~no-such-user-here-7/docs"]\n')
    for extra in (["--check"], []):
        assert main(["run", str(job), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cannot expand '~no-such-user-here-7/docs'" in err[0], err
