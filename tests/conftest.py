"""Test-wide settings: offline model loading, no Ray auth token, deterministic hashing."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# the tests' own LLM provider, `py/module:factory` (tests/support/py_llm.py), registered in every process
os.environ.setdefault("RAGRADE_PLUGINS", "tests.support.py_llm")
os.environ.setdefault("RAGRADE_PROGRESS", "off")  # no progress lines in what tests read (see tests/core)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# one response/embedding cache per pytest-xdist worker, so parallel workers never share a cache file
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER:  # parallel workers share the cores: one llama.cpp thread each (its threads spin while waiting)
    os.environ.setdefault("RAGRADE_LLAMACPP_THREADS", "1")
    os.environ.setdefault("RAGRADE_TEST_LLAMA_THREADS", "1")
os.environ.setdefault("RAGRADE_CACHE_DIR", os.path.join(_ROOT, ".pytest_cache", f"ragrade-cache{_WORKER}"))
pytest_plugins = ["tests.support.fixtures"]

# property tests: random examples on a developer's machine (they find new cases), the same examples in CI (a
# green build stays green on a rerun; a case found locally is pinned with @example)
if os.environ.get("CI"):
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("ci", derandomize=True)
    _hypothesis_settings.load_profile("ci")
