"""`ask --llm` with a model that cannot load fails first, in one line, before the index or an embedder loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragrade.cli.main import main


@pytest.mark.parametrize(
    ("llm", "extra", "expected"),
    [
        ("llamacpp/./nope.gguf", [], "llamacpp/./nope.gguf: no such GGUF file (embedded models: gemma-3-270m)."),
        (
            "hf/./nope",
            [],
            "hf/./nope: no model folder at nope (the hf provider loads local folders and .gguf files only)",
        ),
        (
            "offline/studnt",
            [],
            "offline/studnt: unknown offline baseline 'studnt'; valid: extractive, student. Did you mean 'student'?",
        ),
        (
            "openai/m",
            ["--device", "cpu", "--llm-base-url", "http://127.0.0.1:9/v1"],
            "openai/m: the openai provider cannot use the LLM option(s) device (for hf); leave them out",
        ),
    ],
)
def test_ask_checks_the_model_before_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], llm: str, extra: list[str], expected: str
) -> None:
    missing = tmp_path / "no-index-here"  # were the index read first, the error would name it
    assert main(["ask", str(missing), "What is it?", "--llm", llm, *extra]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [f"ragrade: error: {expected}"]


def test_ask_checks_a_rewriting_model_only_when_a_transform_wants_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-index-here"
    args = ["ask", str(missing), "What is it?", "--transform-llm", "llamacpp/./nope.gguf"]
    assert main([*args, "--query", "hyde"]) == 2
    assert capsys.readouterr().err.strip() == (
        "ragrade: error: llamacpp/./nope.gguf: no such GGUF file (embedded models: gemma-3-270m)."
    )
    assert main(args) == 2  # nothing rewrites: the model is not needed, the missing index is the error
    err = capsys.readouterr().err
    assert "nope.gguf" not in err and "no-index-here" in err


def test_probe_reads_the_model_file_before_loading_a_runtime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "m.gguf"
    fake.write_bytes(b"\0" * 64)
    assert main(["llm", "probe", "--llm", f"llamacpp/{fake}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ragrade: error: llamacpp/{fake}: not a GGUF file (its first bytes are not 'GGUF')"
