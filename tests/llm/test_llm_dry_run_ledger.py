"""The dry-run ledger: a command's own counts (``mark``/``since``), also of an LLM reused across runs and of
counts sent back by workers in other processes; and a dry run is chosen by the LLM options alone."""

from __future__ import annotations

from ragrade.llm import GenerationRequest, LoglikelihoodRequest, Message, create_llm, generate, loglikelihood
from ragrade.llm.dryrun import LEDGER, DryRunLLM, is_dry_run
from ragrade.llm.options import LLMOptions


def _ask(llm: DryRunLLM, n: int) -> None:
    generate(llm, [GenerationRequest(messages=(Message("user", f"question {i}"),), max_tokens=5) for i in range(n)])


def test_since_counts_only_what_came_after_the_mark_and_merges_remote_counts() -> None:
    llm = create_llm("openai/ledger-a", LLMOptions(base_url="http://127.0.0.1:9/v1", dry_run=True))
    assert isinstance(llm, DryRunLLM) and is_dry_run(llm)
    _ask(llm, 2)  # an earlier run of this process (e.g. a cached pipeline) asked these
    mark = LEDGER.mark()
    _ask(llm, 3)
    loglikelihood(llm, [LoglikelihoodRequest(context="The sky is", continuations=(" blue", " green"))])
    remote = {  # what a Ray actor's LLM counted in its own process, sent back
        "llm": "openai/ledger-a",
        "dry_run": True,
        "requests": 4,
        "generate_requests": 4,
        "loglikelihood_requests": 0,
        "loglikelihood_continuations": 0,
        "prompt_tokens_estimate": 8,
        "max_completion_tokens": 20,
        "by_task": {"generate": 4},
    }
    LEDGER.add([remote])
    [got] = [s for s in LEDGER.since(mark) if s["llm"] == "openai/ledger-a"]
    assert got["generate_requests"] == 3 + 4  # this run's 3 (not the earlier 2) and the worker's 4
    assert got["loglikelihood_requests"] == 1 and got["loglikelihood_continuations"] == 2
    assert got["requests"] == 8 and got["max_completion_tokens"] == 3 * 5 + 20
    assert got["by_task"] == {"generate": 7, "loglikelihood": 1}
    later = LEDGER.mark()
    assert [s for s in LEDGER.since(later) if s["llm"] == "openai/ledger-a"] == []  # nothing new: nothing reported


def test_without_the_option_an_llm_is_real() -> None:
    llm = create_llm("openai/ledger-b", LLMOptions(base_url="http://127.0.0.1:9/v1", cache=False))
    assert not is_dry_run(llm)
