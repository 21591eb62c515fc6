"""The in-process llama.cpp backend's default thread count: ``$RAGRADE_LLAMACPP_THREADS``, else every core."""

from __future__ import annotations

import os

import pytest

from ragrade.errors import ConfigError
from ragrade.llm.llamacpp import _default_threads


def test_default_threads_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGRADE_LLAMACPP_THREADS", raising=False)
    assert _default_threads() == (os.cpu_count() or 1)
    monkeypatch.setenv("RAGRADE_LLAMACPP_THREADS", "3")
    assert _default_threads() == 3
    monkeypatch.setenv("RAGRADE_LLAMACPP_THREADS", "many")
    with pytest.raises(ConfigError, match="RAGRADE_LLAMACPP_THREADS must be a whole number, got 'many'"):
        _default_threads()
