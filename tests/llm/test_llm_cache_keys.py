"""The SQLite cache under concurrent writers and kill -9; the API key never lands in any artefact."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.openai_server import Faults, OpenAIServer
from tests.support.typed import dig, narrow

from ragrade.cli.main import main
from ragrade.io import write_json
from ragrade.llm import GenerationRequest, Message, create_llm, generate
from ragrade.llm.cache import ResponseCache, make_key
from ragrade.llm.openai import OpenAILLM
from ragrade.llm.options import LLMOptions

WRITER = """
import sys
from ragrade.llm.cache import ResponseCache
cache = ResponseCache(sys.argv[1])
tag, n = sys.argv[2], int(sys.argv[3])
i = 0
while n < 0 or i < n:
    cache.put(f"{tag}-{i}", {"text": "x" * 200, "i": i}, provider="p", model="m", kind="generate")
    i += 1
"""


def test_make_key_is_stable_and_sensitive() -> None:
    assert make_key({"a": 1, "b": [1, 2]}) == make_key({"b": [1, 2], "a": 1})
    assert make_key({"a": 1}) != make_key({"a": 1.5})


def test_concurrent_writer_processes(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{k}", "150"]) for k in range(4)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    cache = ResponseCache(path)
    assert cache.info()["entries"] == 600
    assert cache.get("w3-149") == {"text": "x" * 200, "i": 149}


def test_kill_9_leaves_a_usable_cache(tmp_path: Path) -> None:
    path = tmp_path / "k.sqlite"
    ResponseCache(path).close()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "k", "-1"])
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until it has written something
        time.sleep(0.3)
        try:
            if narrow(ResponseCache(path).info()["entries"], int) > 20:
                break
        except Exception:
            pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    cache = ResponseCache(path)
    n = narrow(cache.info()["entries"], int)
    assert n > 20 and dig(cache.get("k-0"), "i") == 0
    cache.put("after", {"ok": True}, provider="p", model="m", kind="generate")
    assert cache.get("after") == {"ok": True}


def test_api_key_never_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = "sk-ragrade-DUMMY-7f3a9c1e"
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("RAGRADE_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with caplog.at_level(logging.DEBUG), OpenAIServer(faults=Faults(script=["ok", "500", "401"])) as srv:
        url = srv.base_url.replace("http://", "http://user:" + secret + "@")  # credentials in the URL too
        llm = narrow(
            create_llm("openai/test-model", LLMOptions(base_url=url, max_retries=1, backoff_s=0.01, concurrency=1)),
            OpenAILLM,
        )
        out = generate(llm, [GenerationRequest(messages=(Message("user", f"q{i}"),)) for i in range(3)])
        assert srv.auth_headers_seen >= 3
        errors = sorted(str(c.error) for c in out[1:])
        assert out[0].ok and "***" in errors[1]  # the echoed key is scrubbed
        assert errors[0].startswith("not sent: the server rejected the API key")  # no request after the 401
        write_json(
            tmp_path / "run" / "manifest.json",
            {"llm": llm.describe(), "errors": [c.error for c in out], "usage": llm.usage.as_dict()},
        )
        assert main(["llm", "probe", "--llm", "openai/test-model", "--llm-base-url", srv.base_url]) == 0
        assert main(["cache", "info", "--json"]) == 0
    captured = capsys.readouterr()
    blobs = [captured.out, captured.err, caplog.text, json.dumps(llm.describe())]
    for root, _dirs, files in os.walk(tmp_path):
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                blobs.append(fh.read().decode("latin-1"))
    assert len(blobs) > 5 and any("test-model" in b for b in blobs)
    assert not [b[:80] for b in blobs if secret in b]
