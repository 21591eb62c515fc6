"""kill -9 `ragrade qa answer` after its first committed shard, rerun: the files of an uninterrupted run."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import repo_env
from tests.support.kill import kill_after
from tests.support.openai_server import OpenAIServer

from ragrade.qa.files import QAItem, write_qa

pytestmark = pytest.mark.usefixtures("isolated_llm_env")

N = 12  # questions, answered by one pipeline (closed book)


def _qa(path: Path) -> Path:
    items = [QAItem(id=f"a{i:02d}", question=f"What is item {i}?", reference=f"thing {i}",
                    reference_context=f"item {i} is thing {i}", chunk_id=f"c{i}", doc_id=f"d{i}", source="s")
             for i in range(N)]  # fmt: skip
    write_qa(path, items)
    return path


def _reply(body: dict[str, Any]) -> str:
    """An answer that depends on the prompt (so a row carrying another question's answer would show)."""
    prompt = body["messages"][-1]["content"]
    return f"thing {prompt.split('item ')[-1].split('?')[0]} ({hashlib.sha256(prompt.encode()).hexdigest()[:6]})"


def _cmd(qa: Path, url: str, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "ragrade", "qa", "answer", str(qa), "--out", str(out), "--llm", "openai/test-model",
        "--retrievers", "closed", "--llm-base-url", url, "--max-retries", "0", "--no-cache", "--concurrency", "1",
        "--shard-size", "2",
    ]  # fmt: skip


@pytest.mark.slow
def test_kill_9_after_the_first_shard_then_rerun_gives_the_uninterrupted_files(tmp_path: Path) -> None:
    qa = _qa(tmp_path / "qa.jsonl")
    ref, out = tmp_path / "reference", tmp_path / "killed"
    with OpenAIServer(responder=_reply, latency_s=0.08) as srv:
        done = subprocess.run(_cmd(qa, srv.base_url, ref), env=repo_env(), capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert srv.requests_total == N
        srv.reset_counters()
        kept = kill_after(_cmd(qa, srv.base_url, out), repo_env(), out / "journal.sqlite", rows=2)
        assert 2 <= kept < N and not (out / "answers.jsonl").exists()
        srv.reset_counters()
        rerun = subprocess.run(_cmd(qa, srv.base_url, out), env=repo_env(), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        assert srv.requests_total == N - kept  # nothing committed is asked again
    for name in ("answers.jsonl", "summary.csv"):  # no time stamps or latencies in either: byte for byte
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
