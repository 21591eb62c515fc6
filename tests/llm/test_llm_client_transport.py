"""The OpenAI backend's client path: SDK transport choice, client lifecycle, raw-JSON reading, streamed cache writes."""

from __future__ import annotations

import asyncio
import gc
import logging
import sqlite3
import warnings
from pathlib import Path
from typing import Any, Unpack

import pytest
from tests.support.llm_requests import GenerationKw
from tests.support.openai_server import OpenAIServer
from tests.support.typed import narrow

from ragrade.errors import ConfigError
from ragrade.llm import Completion, GenerationRequest, Message, create_llm, generate
from ragrade.llm.cache import default_cache_path
from ragrade.llm.openai import OpenAILLM
from ragrade.llm.options import LLMOptions


def chat(text: str, **kw: Unpack[GenerationKw]) -> GenerationRequest:
    return GenerationRequest(messages=(Message("user", text),), **kw)


def test_results_reach_the_cache_while_the_batch_runs(llm_cache_dir: Path) -> None:
    path = default_cache_path(llm_cache_dir)
    seen: list[int] = []

    def responder(
        body: dict[str, Any],
    ) -> str:  # runs in the server: how many answers are stored when this request arrives?
        with sqlite3.connect(path) as conn:
            seen.append(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
        return "ok"

    with OpenAIServer(responder=responder) as srv:
        llm = narrow(
            create_llm("openai/test-model", LLMOptions(base_url=srv.base_url, concurrency=1), api_key="sk-test"),
            OpenAILLM,
        )
        llm.cache_flush_every = 2
        out = generate(llm, [chat(f"q{i}") for i in range(8)])
    assert all(c.ok for c in out)
    assert seen[-1] >= 6  # earlier answers were written before the batch ended (pairs of 2)
    assert llm.cache is not None and len(llm.cache.get_many([llm.generation_key(chat(f"q{i}")) for i in range(8)])) == 8


def test_a_failing_cache_write_keeps_the_answers(
    openai_server: OpenAIServer, llm_cache_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    llm = narrow(
        create_llm("openai/test-model", LLMOptions(base_url=openai_server.base_url), api_key="sk-test"), OpenAILLM
    )

    def broken(*args: object, **kwargs: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(llm.cache, "put_many", broken)
    llm.cache_flush_every = 1
    with caplog.at_level(logging.WARNING, logger="ragrade.llm"):
        out = generate(llm, [chat(f"w{i}") for i in range(5)])
    assert all(c.ok for c in out)
    assert sum("could not write to the response cache" in m for m in caplog.messages) == 1


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"choices": "nope"}, "unreadable response: no choices"),
        ({"error": {"message": "model overloaded"}}, "server error in the reply: model overloaded"),
        ({"choices": [{"index": 0, "message": {"role": "assistant", "content": 7}}]}, "message content is a int"),
        ({"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "refusal": "no"}}]}, "refused"),
    ],
)
def test_odd_replies_end_as_recorded_errors(llm_cache_dir: Path, reply: dict[str, Any], expected: str) -> None:
    with OpenAIServer(responder=lambda body: reply) as srv:
        llm = create_llm(
            "openai/test-model", LLMOptions(base_url=srv.base_url, max_retries=1, backoff_s=0.01), api_key="sk-test"
        )
        [c] = generate(llm, [chat("x")])
    assert not c.ok and c.text is None and expected in (c.error or "")


def test_content_parts_are_joined(llm_cache_dir: Path) -> None:
    reply = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": [{"type": "text", "text": "Par"}, {"text": "is"}]},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": "2"},
    }
    with OpenAIServer(responder=lambda body: reply) as srv:
        llm = create_llm("openai/test-model", LLMOptions(base_url=srv.base_url), api_key="sk-test")
        [c] = generate(llm, [chat("capital?")])
    assert c.ok and c.text == "Paris" and c.finish_reason == "stop"
    assert (c.usage.prompt_tokens, c.usage.completion_tokens) == (3, 2)


def test_one_client_per_loop_shared_by_concurrent_batches_and_closed_after(
    openai_server: OpenAIServer, llm_cache_dir: Path
) -> None:
    llm = narrow(
        create_llm("openai/test-model", LLMOptions(base_url=openai_server.base_url, cache=False), api_key="sk-test"),
        OpenAILLM,
    )

    async def two_batches() -> list[Completion]:
        a, b = await asyncio.gather(llm.agenerate([chat(f"a{i}") for i in range(20)]), llm.agenerate([chat("b0")]))
        return a + b

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = asyncio.run(two_batches())
        again = generate(llm, [chat("c0")])
        gc.collect()
    assert all(c.ok for c in out + again) and openai_server.requests_total == 22
    assert llm._sessions == {}  # the last batch on a loop closes its client
    assert not [w for w in caught if "Unclosed" in str(w.message)]
    assert llm.describe()["transport"] == "auto"


def test_httpx_transport_and_bad_transport(openai_server: OpenAIServer, llm_cache_dir: Path) -> None:
    llm = create_llm(
        "openai/test-model", LLMOptions(base_url=openai_server.base_url, transport="httpx"), api_key="sk-test"
    )
    [c] = generate(llm, [chat("via httpx")])
    assert c.ok and openai_server.auth_headers_seen == 1
    with pytest.raises(ConfigError, match="transport must be one of"):
        create_llm("openai/test-model", LLMOptions(base_url=openai_server.base_url, transport="carrier-pigeon"))
