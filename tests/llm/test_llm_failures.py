"""Capability fallbacks happen only on "unsupported" errors; a rejected key or a dead server stops the backend."""

from __future__ import annotations

import logging

import pytest
from tests.llm.options_given import given
from tests.support.openai_server import Faults, OpenAIServer, always
from tests.support.typed import narrow

from ragrade.llm import GenerationRequest, LoglikelihoodRequest, Message, create_llm, generate, loglikelihood
from ragrade.llm.openai import OpenAILLM
from ragrade.llm.options import LLMOptions

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}


def _llm(url: str, *, timeout: float | None = None, max_retries: int = 0, backoff_s: float | None = None) -> OpenAILLM:
    llm = create_llm(
        "openai/test-model",
        LLMOptions(
            base_url=url, cache=False, max_retries=max_retries, concurrency=1, **given(None, backoff_s, timeout)
        ),
        api_key="sk-test",
    )
    return narrow(llm, OpenAILLM)


def test_a_401_is_no_missing_capability(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), OpenAIServer(faults=always("401")) as srv:
        llm = _llm(srv.base_url)
        [ll] = loglikelihood(llm, [LoglikelihoodRequest("The sky is", (" blue", " green"))])
        reqs = [GenerationRequest(messages=(Message("user", f"q{i}"),), json_schema=SCHEMA) for i in range(4)]
        gens = generate(llm, reqs)
        assert srv.requests_total == 1  # nothing is sent after the key was rejected
    assert "rejected the API key" in str(ll.error) and all("rejected the API key" in str(g.error) for g in gens)
    assert llm.loglikelihood_mode is None and llm._json_mode == "json_schema"
    assert "falling back" not in caplog.text and "refused response_format" not in caplog.text


def test_an_unsupported_response_format_degrades_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), OpenAIServer(faults=Faults(script=["400"])) as srv:
        llm = _llm(srv.base_url)
        [g] = generate(llm, [GenerationRequest(messages=(Message("user", "q"),), json_schema=SCHEMA)])
        assert g.ok and srv.requests_total == 2
    assert llm._json_mode == "json_object" and "refused response_format=json_schema" in caplog.text


def test_a_dead_start_declares_the_server_unreachable_but_a_live_one_never() -> None:
    with OpenAIServer(faults=always("500")) as srv:
        llm = _llm(srv.base_url)
        out = generate(llm, [GenerationRequest(messages=(Message("user", f"q{i}"),)) for i in range(8)])
        assert srv.requests_total == 5
    assert [str(c.error).startswith("not sent: server unreachable") for c in out].count(True) == 3
    with OpenAIServer(faults=Faults(script=["ok", *["500"] * 7])) as srv:  # one success: failures stay per request
        llm = _llm(srv.base_url)
        generate(llm, [GenerationRequest(messages=(Message("user", f"q{i}"),)) for i in range(8)])
        assert srv.requests_total == 8


def test_a_hanging_request_is_bounded_by_timeout_and_retries() -> None:
    import time

    with OpenAIServer(faults=always("hang", hang_s=10)) as srv:
        llm = _llm(srv.base_url, timeout=0.3, max_retries=2, backoff_s=0.01)
        t0 = time.monotonic()
        [c] = generate(llm, [GenerationRequest(messages=(Message("user", "q"),))])
        elapsed = time.monotonic() - t0
        assert srv.requests_total == 3
    assert not c.ok and c.attempts == 3 and "timed out after 0.3s" in str(c.error)
    # (max_retries + 1) attempts of timeout (+ grace) and short backoffs, plus slack for the SDK's first import;
    # far from the 3 x 60 s of the defaults or the server's 10 s hang
    assert elapsed < 8.0
