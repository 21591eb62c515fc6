"""Commands whose options are one typed object (``ragrade.cli.flags.with_flags``) still offer every flag.

The flag sets below were read from each command's ``--help`` before its options moved into a dataclass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import LLMFlags
from ragrade.cli.main import main

LLM = {"--llm", "--llm-base-url", "--base-url", "--max-retries", "--timeout"}
FLAGS: dict[str, set[str]] = {
    "robust run": LLM
    | {"--closed-book", "--no-closed-book", "--concurrency", "--config", "--construction", "--correct-ratio"}
    | {"--docs", "--error-phrases", "--json", "--judge", "--judge-base-url", "--lang", "--limit", "--max-failed"}
    | {"--max-tokens", "--min-positives", "--no-cache", "--noise-ratios", "--out", "--prompts"}
    | {"--rejection-phrases", "--scoring", "--seed", "--shortfall", "--testbed"},
    "robust build": {"--exam", "--index", "--k", "--lang", "--max-negative", "--max-positive", "--max-questions"}
    | {"--min-positives", "--out", "--qa", "--retriever", "--seed"},
    "judge score": LLM
    | {"--batch-size", "--bertscore-idf", "--no-bertscore-idf", "--bertscore-layer", "--bertscore-model"}
    | {"--concurrency", "--config", "--field", "--json", "--max-failed", "--metrics", "-m", "--no-cache"}
    | {"--out", "-o", "--pass-threshold", "--prompt", "--samples", "--screen-top", "--seed", "--temperature"},
    "qa generate": LLM
    | {"--concurrency", "--json", "--max-failed", "--max-tokens", "--min-chars", "--n", "--no-cache", "--out", "-o"}
    | {"--prompt", "--qrels", "--seed"},
    "exam generate": LLM
    | {"--absurd", "--concurrency", "--config", "--domain", "--dup-cosine", "--embedder", "--extra-cosine"}
    | {"--filter-share", "--intra-cosine", "--json", "--max-failed", "--n", "-n", "--no-cache", "--no-json"}
    | {"--out", "-o", "--oversample", "--prompt", "--seed", "--shuffle", "--system-prompt", "--temperature"}
    | {"--topic-field"},
    "ask": LLM
    | {"--embedder", "--headings", "--json", "--k", "-k", "--post", "--prompt-file", "--query", "--reranker"}
    | {"--retriever", "-r", "--transform-llm"},
    "compare": {"--all", "--alpha", "--correction", "--json", "--n-boot", "--out", "--seed", "--top"},
    "run": (LLM - {"--llm"})
    | {"--check", "--concurrency", "--device", "--dtype", "--force", "--json", "--no-cache", "--no-report", "--out"}
    | {"-o", "--post", "--query", "--transform-llm"},
    "irt fit": {"--backend", "--bounds", "--exam", "--factors", "--groups", "--json", "--max-iter", "--model"}
    | {"--n-boot", "--not-applicable", "--out", "--prior", "--se", "--solver"},
    "irt improve": {"--backend", "--bounds", "--drop", "--exam", "--factors", "--json", "--max-iter", "--model"}
    | {"--not-applicable", "--out", "--prior", "--solver", "--steps"},
}


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_help_lists_every_flag(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line per option: no flag name is wrapped
    assert main([*command.split(), "--help"]) == 0
    out = capsys.readouterr().out
    listed = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", out)) - {"--help", "-h"}
    assert listed >= FLAGS[command], sorted(FLAGS[command] - listed)


def test_the_llm_flags_are_one_object_and_one_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragrade.cli.exam import GenerateFlags
    from ragrade.cli.pipelines import GridFlags
    from ragrade.cli.qa import JudgeFlags, QAGenerateFlags
    from ragrade.cli.robust import RunFlags
    from ragrade.cli.run import JobFlags

    for verb in (GenerateFlags, GridFlags, JudgeFlags, QAGenerateFlags, RunFlags, JobFlags):
        assert issubclass(verb, LLMFlags), verb
    given = LLMFlags(llm_base_url="http://x/v1", concurrency=3, no_cache=True, timeout=2.5, max_retries=0)
    assert given.llm_layer() == {"base_url": "http://x/v1", "concurrency": 3, "cache": False, "timeout": 2.5,
                                 "max_retries": 0}  # fmt: skip
    assert LLMFlags().llm_layer() == {}  # nothing given: nothing over the config file
    options = LLMFlags(timeout=2.5, device="cpu").llm_options()
    assert (options.timeout, options.device, options.cache) == (2.5, "cpu", True)  # over the defaults


def test_the_llm_flags_have_their_own_help_panel(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["qa", "generate", "--help"]) == 0
    out = capsys.readouterr().out
    panel = out[out.index("LLM options") :]
    assert "--concurrency" in panel and "--no-cache" in panel and "--min-chars" not in panel
    assert "--min-chars" in out[: out.index("LLM options")]


@dataclass(frozen=True, kw_only=True)
class _ToyFlags:
    count: Annotated[int, typer.Option("--count", min=1, help="How many.")] = 2
    name: Annotated[str, typer.Option("--name", help="Required, after an optional option.")]


def test_with_flags_hands_one_typed_object() -> None:
    got: list[tuple[str, _ToyFlags]] = []
    app = typer.Typer()

    @app.command()
    @with_flags(_ToyFlags)
    def toy(word: Annotated[str, typer.Argument()], flags: _ToyFlags) -> None:
        got.append((word, flags))

    runner = CliRunner()
    assert runner.invoke(app, ["hi", "--name", "x"]).exit_code == 0
    assert runner.invoke(app, ["hi", "--name", "y", "--count", "5"]).exit_code == 0
    assert got == [("hi", _ToyFlags(name="x")), ("hi", _ToyFlags(count=5, name="y"))]
    missing = runner.invoke(app, ["hi"])
    assert missing.exit_code == 2 and "--name" in missing.output
    assert runner.invoke(app, ["hi", "--name", "x", "--count", "0"]).exit_code == 2  # the option's own checks
