"""LLMOptions: one set of defaults for every verb, merged once (defaults < config file < flags), recorded once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.run.fakes import make_exam

from ragrade import config
from ragrade.cli.llm_flags import llm_flag_layer
from ragrade.cli.main import main
from ragrade.config import build_config
from ragrade.judge.run import JudgeRunConfig
from ragrade.llm import LimitConfig, create_llm
from ragrade.llm.options import LLMOptions, lift_flat_options
from ragrade.robust.config import RobustRunConfig

DEFAULTS = LLMOptions()
ROBUST = {"data": "d.jsonl", "testbed": "noise", "llm": ["offline/extractive"], "out": "o"}


def _limits(llm: object) -> LimitConfig:
    limits = getattr(llm, "limits", None)
    assert isinstance(limits, LimitConfig)
    return limits


def _command_options() -> dict[str, dict[str, str]]:
    """Every command path -> {option name: help} of the ragrade CLI."""
    from typer.main import get_command

    from ragrade.cli.app import app

    out: dict[str, dict[str, str]] = {}

    def walk(cmd: object, path: str) -> None:
        subs = getattr(cmd, "commands", None)
        if isinstance(subs, dict):
            for name, sub in subs.items():
                walk(sub, f"{path} {name}".strip())
            return
        params = getattr(cmd, "params", [])
        out[path] = {opt: str(getattr(p, "help", "") or "") for p in params for opt in getattr(p, "opts", [])}

    walk(get_command(app), "")
    return out


def test_every_verb_starts_from_the_one_set_of_defaults(tmp_path: Path) -> None:
    from ragrade.job.config import load_job_config
    from ragrade.run.spec import build_sweep_config

    assert DEFAULTS.timeout == 60.0 and DEFAULTS.max_retries == 5 and DEFAULTS.concurrency == 16 and DEFAULTS.cache
    nothing = llm_flag_layer({"llm_base_url": None, "timeout": None, "no_cache": False})
    assert nothing == {}  # a flag not given never overrides a config file
    assert build_sweep_config({}, {"llm_options": nothing}).llm_options == DEFAULTS  # exam take, qa answer
    assert JudgeRunConfig.model_validate({"llm_options": nothing}).llm_options == DEFAULTS
    assert build_config(RobustRunConfig, ROBUST, {"llm_options": nothing}).llm_options == DEFAULTS
    assert load_job_config(None, {"corpus": {"demo": True}}).llm == DEFAULTS  # ragrade run's [llm]
    limits = _limits(create_llm("offline/student"))  # what the backends enforce
    assert (limits.timeout, limits.max_retries, limits.concurrency, limits.rpm) == (60.0, 5, 16, None)
    assert (LimitConfig().timeout, LimitConfig().backoff_base_s) == (DEFAULTS.timeout, DEFAULTS.backoff_s)


def test_help_texts_quote_the_model_defaults() -> None:
    wanted = {
        "--timeout": f"(default {DEFAULTS.timeout:g})",
        "--max-retries": f"(default {DEFAULTS.max_retries})",
        "--concurrency": f"(default {DEFAULTS.concurrency})",
    }
    seen = 0
    for path, options in _command_options().items():
        for opt, text in wanted.items():
            if opt in options and path != "llm probe":  # a probe has its own quick settings, named in its help
                assert text in options[opt], f"ragrade {path} {opt}: {options[opt]!r}"
                seen += 1
    assert seen >= 12  # exam generate/take, qa generate/answer, judge, robust run, run, ask (at least)
    assert "(default 30)" in _command_options()["llm probe"]["--timeout"]


def test_file_beats_default_and_flag_beats_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragrade.cli.qa import AnswerFlags
    from ragrade.job.config import load_job_config

    sweep = tmp_path / "sweep.toml"
    sweep.write_text("[llm_options]\nconcurrency = 3\ntimeout = 30\n", encoding="utf-8")
    cfg = AnswerFlags(config=sweep, timeout=7.0).sweep_config()  # qa answer (and exam take: the same flags)
    assert cfg.llm_options == LLMOptions(concurrency=3, timeout=7.0)
    job = tmp_path / "job.toml"
    job.write_text("[corpus]\ndemo = true\n[llm]\nconcurrency = 3\ntimeout = 30\n", encoding="utf-8")
    got = load_job_config(job, {"llm": llm_flag_layer({"timeout": 7.0})}).llm
    assert got == LLMOptions(concurrency=3, timeout=7.0)
    file_layer = {**ROBUST, "llm_options": {"concurrency": 3, "timeout": 30}}  # [robust.llm_options]
    robust = build_config(RobustRunConfig, file_layer, {"llm_options": llm_flag_layer({"timeout": 7.0})})
    assert robust.llm_options == LLMOptions(concurrency=3, timeout=7.0)


def test_exam_take_and_judge_record_the_merged_options_once(tmp_path: Path, isolated_llm_env: None) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, n=4)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text("[llm_options]\nconcurrency = 3\ntimeout = 30\n", encoding="utf-8")
    argv = ["--llm", "offline/student", "--retrievers", "closed", "--config", str(sweep), "--timeout", "7"]
    assert main(["exam", "take", str(exam), *argv, "--out", str(tmp_path / "run")]) == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["llm_options"] == LLMOptions(concurrency=3, timeout=7.0).model_dump(mode="json")
    assert manifest["config"]["llm_options"]["timeout"] == 7.0  # the config record readers already know

    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "a", "query": "Q?", "answer": "x", "reference": "x"}) + "\n")
    judge = tmp_path / "judge.toml"
    judge.write_text("[judge.llm_options]\nmax_retries = 2\ntimeout = 30\n", encoding="utf-8")
    out = tmp_path / "judged"
    assert main(["judge", str(answers), "-m", "exact", "--config", str(judge), "--timeout", "7", "-o", str(out)]) == 0
    recorded = json.loads((out / "manifest.json").read_text())["llm_options"]
    assert recorded == LLMOptions(max_retries=2, timeout=7.0).model_dump(mode="json")


def test_unknown_llm_option_exits_2_with_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_llm_env: None
) -> None:
    exam = tmp_path / "exam.jsonl"
    make_exam(exam, n=2)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text("[llm_options]\ntimout = 30\n", encoding="utf-8")
    assert main(["exam", "take", str(exam), "--config", str(sweep), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "llm_options.timout: unknown key" in err and "Did you mean 'timeout'?" in err
    assert not (tmp_path / "run").exists()
    job = tmp_path / "job.toml"
    job.write_text("[corpus]\ndemo = true\n[llm_options]\nmax_retry = 1\n", encoding="utf-8")
    assert main(["run", str(job), "--check"]) == 2
    err = capsys.readouterr().err
    assert "llm_options.max_retry: unknown key" in err and "Did you mean 'max_retries'?" in err


def test_old_flat_spelling_is_read_with_one_warning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setattr(config, "_DEPRECATIONS", set())  # messages printed by earlier tests in this process
    cfg = JudgeRunConfig.model_validate({"timeout": 9, "cache": False, "llm_options": {"concurrency": 2}})
    assert cfg.llm_options == LLMOptions(timeout=9, cache=False, concurrency=2)
    JudgeRunConfig.model_validate({"timeout": 9, "cache": False})  # the same message is not repeated
    err = capsys.readouterr().err
    assert err.count("ragrade: warning:") == 1 and "[judge]: timeout, cache at the top level" in err
    robust = build_config(RobustRunConfig, {**ROBUST, "base_url": "http://h:1/v1", "judge_base_url": "http://j/v1"})
    assert robust.llm_options.base_url == "http://h:1/v1" and robust.judge_base_url == "http://j/v1"
    assert lift_flat_options(["not", "a", "table"], "[x]") == ["not", "a", "table"]


def test_a_job_configs_old_llm_table_is_read_once_with_a_warning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragrade.job.config import load_job_config

    monkeypatch.setattr(config, "_DEPRECATIONS", set())
    new = load_job_config(None, {"corpus": {"demo": True}, "llm_options": {"timeout": 9, "concurrency": 2}})
    assert new.llm == LLMOptions(timeout=9, concurrency=2) and capsys.readouterr().err == ""
    old = load_job_config(None, {"corpus": {"demo": True}, "llm": {"timeout": 9, "concurrency": 2}})
    assert old.llm == new.llm
    # the file's old table under the flags' new one: a flag wins where both set a key
    both = load_job_config(None, {"corpus": {"demo": True}, "llm": {"timeout": 9}}, {"llm_options": {"timeout": 3}})
    assert both.llm.timeout == 3
    err = capsys.readouterr().err
    assert err.count("ragrade: warning:") == 1  # once per process
    assert "job config: the [llm] table is the old name of [llm_options]; rename it" in err


def test_what_workers_and_keys_receive(isolated_llm_env: None) -> None:
    from ragrade.run.spec import build_sweep_config

    opts = LLMOptions(timeout=7.0, dry_run=True, base_url="http://h/v1", cache=False)
    shipped = opts.worker_dict()  # the JSON a Ray actor or worker process gets
    assert shipped == {"timeout": 7.0, "dry_run": True, "base_url": "http://h/v1", "cache": False}
    assert LLMOptions.model_validate(json.loads(json.dumps(shipped))) == opts
    assert opts.answer_options() == {"dry_run": True, "base_url": "http://h/v1"}  # resume fingerprints
    # ragrade run's stage keys: what can change an answer (the server always), never a throughput setting
    assert DEFAULTS.stage_key() == {"base_url": None}
    assert LLMOptions(dry_run=True).stage_key() == DEFAULTS.stage_key()
    for throughput in ({"rpm": 30}, {"concurrency": 3}, {"timeout": 9.0}, {"max_retries": 1}, {"cache": False}):
        assert LLMOptions.model_validate(throughput).stage_key() == DEFAULTS.stage_key(), throughput
    assert LLMOptions(seed=3, base_url="http://h/v1").stage_key() == {"base_url": "http://h/v1", "seed": 3}
    assert getattr(create_llm("openai/x", options=opts), "is_dry_run", False)
    # a backend's own options ([llm_options] letter_fallback, n_threads, ...) reach the backend when set
    sweep = build_sweep_config({"llm_options": {"letter_fallback": True, "base_url": "http://127.0.0.1:9/v1"}})
    assert sweep.llm_options.backend_kwargs() == {"letter_fallback": True}
    backend = create_llm("openai/x", options=LLMOptions.model_validate(sweep.llm_options.worker_dict()))
    assert (
        getattr(backend, "letter_fallback", None) is True
        and getattr(backend, "base_url", None) == "http://127.0.0.1:9/v1"
    )
    with pytest.warns(DeprecationWarning, match=r"create_llm\(spec, max_retries=\.\.\.\) is deprecated"):
        old = create_llm("offline/student", options=LLMOptions(timeout=3), max_retries=1)  # the old keywords
    assert _limits(old) == LLMOptions(timeout=3, max_retries=1).limits()
