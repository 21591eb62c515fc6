from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.support.openai_server import OpenAIServer

from ragrade.cli.main import main

DATA = Path(__file__).parent / "data"


def _reply(body: dict[str, Any]) -> str:
    user = body["messages"][-1]["content"]
    return "Port Alder" if "Harbor Games" in user else "I do not know."


def test_run_and_table_verbs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer(responder=_reply) as srv:
        rc = main(
            [
                "robust",
                "run",
                str(DATA / "en_base.jsonl"),
                "--testbed",
                "noise",
                "--llm",
                "openai/test-model",
                "--llm-base-url",
                srv.base_url,
                "--out",
                str(tmp_path / "run"),
                "--noise-ratios",
                "0,0.2",
                "--no-cache",
            ]
        )
    out = capsys.readouterr().out
    assert rc == 0
    assert "noise (default scoring, %; columns: requested noise ratio)" in out and "openai/test-model" in out
    assert "25.00" in out and "actual noise ratio" in out
    assert "n=8 failed=0" in out
    rc = main(["robust", "table", str(tmp_path / "run"), "--out", str(tmp_path / "t.csv")])
    assert rc == 0
    assert (tmp_path / "t.csv").read_text().splitlines()[1] == "openai/test-model,25.00,25.00,0.300,0.400"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--testbed", "bogus"], "unknown testbed 'bogus'"),
        (["--testbed", "noise", "--noise-ratios", "0,1.0"], "--testbed negative"),
        (["--testbed", "noise", "--noise-ratios", "x"], "--noise-ratios expects numbers"),
        (["--testbed", "negative", "--noise-ratios", "0.2"], "does not apply"),
        (["--testbed", "integration"], "needs integration records"),
        (["--testbed", "noise", "--scoring", "strict"], "scoring"),
        (["--testbed", "noise", "--docs", "0"], "--docs must be at least 1"),
        (["--testbed", "noise", "--prompts", "missing.toml"], "prompt file not found"),
    ],
)
def test_bad_run_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc = main(
        [
            "robust",
            "run",
            str(DATA / "en_base.jsonl"),
            "--llm",
            "offline/extractive",
            "--out",
            str(tmp_path / "o"),
            *args,
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_missing_data_and_bad_build_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "robust",
            "run",
            str(tmp_path / "nope.jsonl"),
            "--testbed",
            "noise",
            "--llm",
            "offline/extractive",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2 and "file not found" in capsys.readouterr().err
    rc = main(["robust", "build", "--out", str(tmp_path / "b"), "--index", str(tmp_path)])
    assert rc == 2 and "exactly one of --exam or --qa" in capsys.readouterr().err
    rc = main(["robust", "table", str(tmp_path)])
    assert rc == 2 and "no metrics.json" in capsys.readouterr().err


def test_prompt_override_file(tmp_path: Path) -> None:
    from ragrade.errors import ConfigError
    from ragrade.robust.prompts import answer_messages, load_prompts

    p = tmp_path / "p.toml"
    p.write_text(
        '[en]\nuser = "Q: {question}\\nD:\\n{documents}"\nrejection_sentence = "Cannot say."\n'
        '[judge]\nrejection = "Refused? {response}"\n'
    )
    prompts = load_prompts(p)
    (_system, sys_text), (_, user) = answer_messages(prompts.lang("en"), "Who?", ["a", "b"])
    assert user == "Q: Who?\nD:\n[1] a\n[2] b" and "Cannot say." in sys_text
    assert prompts.judge_rejection == "Refused? {response}"
    p.write_text('[en]\nuser = "{question} {nope}"\n')
    with pytest.raises(ConfigError, match="unknown placeholder"):
        load_prompts(p)
    p.write_text('[fr]\nuser = "x"\n')
    with pytest.raises(ConfigError, match="unknown section"):
        load_prompts(p)
