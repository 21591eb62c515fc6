"""Pytest fixtures shared by every test area (enable with ``pytest_plugins = ["tests.support.fixtures"]``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.llama_server import LlamaServer, llama_server_or_skip
from tests.support.openai_server import OpenAIServer


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started local OpenAI-compatible server (default deterministic replies); stopped after the test.

    Script replies by setting ``openai_server.responder = lambda body: "..."`` (or build your own
    ``OpenAIServer(responder=..., faults=...)`` as a context manager).
    """
    with OpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """The real llama.cpp ``llama-server`` on the embedded Gemma 3 270M (one slot, two threads), shared by
    the session; skips the test when the binary or the model package is missing."""
    server = llama_server_or_skip()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_server_url(llama_server: LlamaServer) -> str:
    """The OpenAI-compatible base URL of :func:`llama_server`: ``http://127.0.0.1:PORT/v1``."""
    return llama_server.base_url


@pytest.fixture
def llm_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty LLM cache directory (``RAGRADE_CACHE_DIR`` points at it for the test)."""
    path = tmp_path / "ragrade-cache"
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(path))
    return path


@pytest.fixture
def isolated_llm_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh LLM cache, a test API key, no OPENAI_BASE_URL / RAGRADE_MAX_FAILED from the caller's shell,
    and no pipeline resources left from an earlier test."""
    from ragrade.run.pipeline import clear_resources

    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RAGRADE_MAX_FAILED", raising=False)
    clear_resources()
