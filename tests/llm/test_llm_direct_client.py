"""The direct aiohttp client (``transport="auto"``) against the official SDK path (``transport="httpx"``).

Same requests, same results, same recorded errors for every fault the local server injects; error texts
are worded as the SDK words them (reference: the SDK's own status-error construction).
"""

from __future__ import annotations

import importlib
import json
from typing import Any, Unpack

import pytest
from tests.llm.options_given import given
from tests.support.llm_requests import GenerationKw
from tests.support.openai_server import OpenAIServer, always, dead_base_url

from ragrade.llm import Completion, GenerationRequest, Message, create_llm, generate
from ragrade.llm.openai import _error_message
from ragrade.llm.openai_http import join_url, status_message
from ragrade.llm.options import LLMOptions


def chat(text: str, **kw: Unpack[GenerationKw]) -> GenerationRequest:
    return GenerationRequest(messages=(Message("user", text),), **kw)


def _run(
    base_url: str,
    transport: str,
    reqs: list[GenerationRequest],
    *,
    max_retries: int | None = None,
    backoff_s: float | None = None,
    timeout: float | None = None,
) -> list[Completion]:
    llm = create_llm(
        "openai/test-model",
        LLMOptions(base_url=base_url, transport=transport, cache=False, **given(max_retries, backoff_s, timeout)),
        api_key="sk-direct",
    )
    assert llm.describe()["transport"] == transport
    return generate(llm, reqs)


def test_same_answers_and_requests_as_the_sdk(openai_server: OpenAIServer) -> None:
    reqs = [chat(f"q{i}", temperature=0.3, max_tokens=9, stop=("\n",), seed=4) for i in range(6)]
    reqs.append(GenerationRequest(prompt="Once upon", max_tokens=3))
    reqs.append(chat("json please", json_schema={"type": "object", "properties": {"a": {"type": "integer"}}}))
    direct = _run(openai_server.base_url, "auto", reqs)
    bodies_direct = list(openai_server.log)
    assert openai_server.auth_headers_seen == len(reqs)  # every request carried the key
    openai_server.reset_counters()
    sdk = _run(openai_server.base_url, "httpx", reqs)
    bodies_sdk = list(openai_server.log)
    assert all(c.ok for c in direct)

    def key(c: Completion) -> tuple[object, ...]:
        return (c.text, c.finish_reason, c.usage, c.response_format)

    assert [key(c) for c in direct] == [key(c) for c in sdk]

    def by_content(bodies: list[dict[str, Any]]) -> list[str]:
        return sorted(json.dumps(b, sort_keys=True) for b in bodies)

    assert by_content(bodies_direct) == by_content(bodies_sdk)  # the server got the same requests


@pytest.mark.parametrize("kind", ["500", "429", "400", "401", "malformed"])
def test_faults_are_recorded_as_the_sdk_records_them(kind: str) -> None:
    with OpenAIServer(faults=always(kind, retry_after_s=0.01)) as srv:
        [direct] = _run(srv.base_url, "auto", [chat("x")], max_retries=1, backoff_s=0.01)
        [sdk] = _run(srv.base_url, "httpx", [chat("x")], max_retries=1, backoff_s=0.01)
    assert not direct.ok and direct.error == sdk.error and direct.attempts == sdk.attempts
    assert "sk-direct" not in str(direct.error)


def test_hang_times_out_and_refused_connection_is_a_connection_error() -> None:
    with OpenAIServer(faults=always("hang", hang_s=2)) as srv:
        [hung] = _run(srv.base_url, "auto", [chat("x")], max_retries=0, timeout=0.3)
    assert not hung.ok and hung.error == "timed out after 0.3s"
    [refused] = _run(dead_base_url(), "auto", [chat("x")], max_retries=0, timeout=5)
    assert not refused.ok and "connection error: ClientConnectorError" in str(refused.error)


def test_base_url_query_travels_with_every_request() -> None:
    with OpenAIServer() as srv:
        [c] = _run(srv.base_url + "?api-version=2024-01", "auto", [chat("x")])
        assert c.ok and srv.requests_total == 1
    assert join_url("http://h:1/v1", "/chat/completions", {"api-version": "2024-01"}) == (
        "http://h:1/v1/chat/completions?api-version=2024-01"
    )
    assert join_url("http://h:1/v1/", "completions", {}) == "http://h:1/v1/completions"
    assert join_url("http://h:1/v1", "http://h:1/tokenize", {"a": "b c"}) == "http://h:1/tokenize?a=b+c"


@pytest.mark.parametrize(
    ("status", "content"),
    [
        (500, b'{"error": {"message": "boom", "type": "server_error"}}'),
        (400, b'{"message": "flat message"}'),
        (422, b'{"error": "just a string"}'),
        (404, b'{"detail": "Not Found"}'),
        (502, b"<html>bad gateway</html>"),
        (503, b""),
        (400, b'{"error": {"error": {"message": "nested"}}}'),
        (429, b'{"error": {"message": ""}}'),
        (400, b"[1, 2]"),
    ],
)
def test_status_messages_match_the_sdk(status: int, content: bytes) -> None:
    openai = pytest.importorskip("openai")
    client = openai.AsyncOpenAI(api_key="sk-x", base_url="http://127.0.0.1:1/v1")
    base = next(c for c in type(client._client).__mro__ if c.__name__ == "AsyncClient")  # httpx or httpx2
    httpx_mod = importlib.import_module(base.__module__.split(".")[0])
    resp = httpx_mod.Response(status, content=content, request=httpx_mod.Request("POST", "http://127.0.0.1:1/v1"))
    sdk_exc = client._make_status_error_from_response(resp)
    assert status_message(status, content) == _error_message(sdk_exc)
