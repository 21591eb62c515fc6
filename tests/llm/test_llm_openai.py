"""The OpenAI-compatible backend against the local test server: generation, log-likelihood, faults, limits."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Unpack

import pytest
from tests.support.llm_requests import GenerationKw
from tests.support.openai_server import Faults, OpenAIServer, token_logprob, tokenize
from tests.support.typed import narrow

from ragrade.errors import ConfigError
from ragrade.llm import (
    GenerationRequest,
    LoglikelihoodRequest,
    Message,
    create_llm,
    generate,
    loglikelihood,
    parse_spec,
)
from ragrade.llm.openai import OpenAILLM
from ragrade.llm.options import LLMOptions


def chat(text: str, **kw: Unpack[GenerationKw]) -> GenerationRequest:
    return GenerationRequest(messages=(Message("user", text),), **kw)


def test_chat_and_completion_forward_every_parameter(openai_server: OpenAIServer, llm_cache_dir: Path) -> None:
    openai_server.responder = lambda body: "forty-two. And more text"
    llm = narrow(
        create_llm("openai/test-model", LLMOptions(base_url=openai_server.base_url), api_key="sk-test"), OpenAILLM
    )
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    out = generate(
        llm,
        [
            chat("Q?", temperature=0.7, max_tokens=50, stop=(".",), seed=3, json_schema=schema),
            GenerationRequest(prompt="Once upon a time", max_tokens=2),
        ],
    )
    assert out[0].ok and out[0].text == "forty-two"
    assert out[0].usage.prompt_tokens > 0 and out[0].usage.completion_tokens == len(tokenize("forty-two"))
    assert out[1].text == "forty" + "-" and out[1].finish_reason == "length"
    body = next(b for b in openai_server.log if "messages" in b)
    assert body["temperature"] == 0.7 and body["max_tokens"] == 50 and body["stop"] == ["."] and body["seed"] == 3
    assert body["response_format"]["json_schema"]["schema"] == schema
    assert next(b for b in openai_server.log if "prompt" in b)["prompt"] == "Once upon a time"
    assert openai_server.requests_by_path == {"/v1/chat/completions": 1, "/v1/completions": 1}
    assert openai_server.auth_headers_seen == 2
    assert llm.usage.requests == 2 and llm.usage.prompt_tokens == sum(c.usage.prompt_tokens for c in out)


def test_spec_parsing_and_unknown_provider() -> None:
    assert parse_spec("openai/meta-llama/Llama-3.1-8B") == ("openai", "meta-llama/Llama-3.1-8B")
    with pytest.raises(ConfigError, match="PROVIDER/MODEL"):
        parse_spec("gpt4")
    with pytest.raises(ConfigError, match="Did you mean 'openai'"):
        create_llm("opanai/x")


def test_faults_all_end_recorded_and_second_run_is_cached(llm_cache_dir: Path) -> None:
    faults = Faults(rate=0.2, seed=7, retry_after_s=0.02, hang_s=8.0)
    reqs = [chat(f"question number {i}") for i in range(200)]
    with OpenAIServer(faults=faults) as srv:
        llm = create_llm(
            "openai/test-model",
            LLMOptions(base_url=srv.base_url, timeout=3.0, backoff_s=0.01, max_retries=5, concurrency=32),
            api_key="sk-test",
        )
        assert isinstance(llm, OpenAILLM)
        out = generate(llm, reqs)
        assert len(out) == 200
        assert all((c.ok and c.error is None) or (c.text is None and c.error) for c in out)
        injected = sum(srv.faults_injected.values())
        retries = sum(c.attempts - 1 for c in out)
        failed = [c for c in out if not c.ok]
        assert injected >= 20 and set(srv.faults_injected) == {"429", "500", "hang", "malformed", "truncated"}
        assert retries == llm.usage.retries and retries + len(failed) >= injected
        assert srv.requests_total <= 200 + retries
        assert all("gave up after 6 attempts" in (c.error or "") for c in failed)
        assert llm.usage.errors == len(failed) and len(failed) <= 2
        srv.reset_counters()
        again = generate(llm, reqs)
        # a second identical run: the successes come from the cache, only earlier failures are sent again
        assert srv.requests_total == len(failed)
        assert sum(c.cached for c in again) == 200 - len(failed)
        assert [c.text for c in again if c.cached] == [c.text for c in out if c.ok]
    with OpenAIServer() as srv2:  # another base URL is another cache key
        llm2 = create_llm("openai/test-model", LLMOptions(base_url=srv2.base_url), api_key="sk-test")
        assert generate(llm2, reqs[:3])[0].ok and srv2.requests_total == 3


def test_cached_request_makes_no_network_call(openai_server: OpenAIServer, llm_cache_dir: Path) -> None:
    llm = create_llm("openai/test-model", LLMOptions(base_url=openai_server.base_url), api_key="sk-test")
    reqs = [chat("hello"), chat("hello", temperature=0.5), chat("hello")]
    first = generate(llm, reqs)
    assert openai_server.requests_total == 2  # identical requests in a batch are sent once
    assert first[0].text == first[2].text
    second = generate(llm, reqs)
    assert openai_server.requests_total == 2 and all(c.cached for c in second)
    nocache = create_llm(
        "openai/test-model", LLMOptions(base_url=openai_server.base_url, cache=False), api_key="sk-test"
    )
    generate(nocache, reqs[:1])
    assert openai_server.requests_total == 3


def test_retry_after_is_honoured_and_permanent_errors_not_retried(llm_cache_dir: Path) -> None:
    with OpenAIServer(faults=Faults(script=["429", "ok", "400"], retry_after_s=0.4)) as srv:
        llm = create_llm(
            "openai/test-model", LLMOptions(base_url=srv.base_url, backoff_s=0.01, concurrency=1), api_key="sk-test"
        )
        t0 = time.perf_counter()
        [a] = generate(llm, [chat("a")])
        assert a.ok and a.attempts == 2 and time.perf_counter() - t0 >= 0.4
        [b] = generate(llm, [chat("b")])
        assert not b.ok and b.attempts == 1 and "HTTP 400" in (b.error or "")


def test_timeout_recorded_per_request(llm_cache_dir: Path) -> None:
    with OpenAIServer(faults=Faults(script=["hang", "ok"], hang_s=5.0)) as srv:
        llm = create_llm(
            "openai/test-model",
            LLMOptions(base_url=srv.base_url, timeout=0.5, max_retries=0, concurrency=1),
            api_key="sk-test",
        )
        out = generate(llm, [chat("slow"), chat("fast")])
        assert not out[0].ok and "timed out" in (out[0].error or "")
        assert out[1].ok


def test_concurrency_and_rpm_limits(llm_cache_dir: Path) -> None:
    with OpenAIServer(latency_s=0.1) as srv:
        llm = create_llm(
            "openai/test-model", LLMOptions(base_url=srv.base_url, concurrency=4, cache=False), api_key="sk-test"
        )
        generate(llm, [chat(f"c{i}") for i in range(16)])
        assert srv.max_in_flight == 4
    with OpenAIServer() as srv:
        llm = create_llm(
            "openai/test-model", LLMOptions(base_url=srv.base_url, rpm=600, cache=False), api_key="sk-test"
        )
        t0 = time.perf_counter()
        generate(llm, [chat(f"r{i}") for i in range(6)])
        assert time.perf_counter() - t0 >= 0.45  # 6 starts spaced 0.1 s apart


def test_echo_loglikelihood_matches_server_tokens(openai_server: OpenAIServer, llm_cache_dir: Path) -> None:
    llm = create_llm("openai/test-model", LLMOptions(base_url=openai_server.base_url), api_key="sk-test")
    ctx = "The capital of France is"
    [r] = loglikelihood(llm, [LoglikelihoodRequest(ctx, (" Paris", " Rome city"))])
    assert r.ok and r.method == "echo-logprobs" and r.token_counts == [1, 2]
    assert r.logprobs is not None and r.logprobs[0] == pytest.approx(token_logprob(" is", " Paris"))
    assert r.logprobs[1] == pytest.approx(token_logprob(" is", " Rome") + token_logprob(" Rome", " city"))
    probe, body = openai_server.log  # a short probe settles the method, then the request itself
    assert probe["echo"] is True and len(probe["prompt"]) == 2
    assert body["echo"] is True and body["prompt"] == [ctx + " Paris", ctx + " Rome city"]
    assert llm.describe()["loglikelihood_mode"] == "echo"


def test_no_prompt_logprobs_fail_clearly_unless_letter_picking_is_allowed(
    caplog: pytest.LogCaptureFixture, llm_cache_dir: Path
) -> None:
    # echo ignored, /tokenize served but logit_bias ignored: no way to score log-likelihoods
    with OpenAIServer(prompt_logprobs=False, logit_bias=False, responder=lambda body: "B") as srv:
        reqs = [LoglikelihoodRequest(f"Question {i}: pick one.", (" yes", " no", " maybe")) for i in range(3)]
        llm = narrow(
            create_llm("openai/test-model", LLMOptions(base_url=srv.base_url, cache=False), api_key="sk-test"),
            OpenAILLM,
        )
        out = loglikelihood(llm, reqs)
        assert all(not r.ok and "cannot score log-likelihoods" in str(r.error) for r in out)
        # each request's error names the settings in words (it is kept in result files); a grid's tally marks
        # them again ($methods) when it raises, and the CLI spells the flag
        assert all("set methods to generate" in str(r.error) and "letter_fallback = true" in str(r.error) for r in out)
        assert not [r for r in out if "$" in str(r.error)]
        assert "echo ignored" in str(out[0].error) and "ignored logit_bias" in str(out[0].error)
        assert srv.requests_by_path["/v1/completions"] == 2 and "/v1/chat/completions" not in srv.requests_by_path
        assert llm.loglikelihood_mode == "none"
        allowed = create_llm(
            "openai/test-model", LLMOptions(base_url=srv.base_url, letter_fallback=True), api_key="sk-test"
        )
        assert isinstance(allowed, OpenAILLM)
        with caplog.at_level(logging.WARNING, logger="ragrade.llm"):
            out = loglikelihood(allowed, reqs)
        assert all(r.ok and r.method == "letter-choice" for r in out)
        assert out[0].logprobs == [-50.0, 0.0, -50.0]
        assert sum("as letter_fallback allows" in m for m in caplog.messages) == 1
        assert allowed.loglikelihood_mode == "chat-logprobs"
        strict = create_llm("openai/test-model", LLMOptions(base_url=srv.base_url), api_key="sk-test")
        assert not any(r.ok or r.cached for r in loglikelihood(strict, reqs))  # the cached letters are not for it


def test_dry_run_counts_without_sending(openai_server: OpenAIServer) -> None:
    from ragrade.llm.dryrun import dry_run_summary

    llm = create_llm("openai/test-model", LLMOptions(base_url=openai_server.base_url, dry_run=True))
    out = generate(llm, [chat("one two three", task="answer"), chat("four", max_tokens=10)])
    loglikelihood(llm, [LoglikelihoodRequest("ctx", (" a", " b"))])
    assert all(not c.ok and "dry run" in (c.error or "") for c in out)
    summary = dry_run_summary(llm)
    assert summary is not None
    assert summary["requests"] == 3 and summary["generate_requests"] == 2
    assert summary["by_task"] == {"answer": 1, "generate": 1, "loglikelihood": 1}
    assert narrow(summary["prompt_tokens_estimate"], int) >= 8
    assert openai_server.requests_total == 0
