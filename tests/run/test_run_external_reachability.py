"""An ``--external`` system under the reachability rule of LLM servers (issue 52, item 4).

A URL that takes no connection fails before the run folder exists; a system whose first requests are all
refused (HTTP 404 here) or unreachable stops the run with one line naming it, exit 2, instead of being
retried question by question and reported as failed LLM requests (exit 3). A system that answered once keeps
its later failures per row.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.cli.test_failed_requests import _exam
from tests.support.openai_server import OpenAIServer, dead_base_url

from ragrade.cli.main import main

pytestmark = pytest.mark.usefixtures("isolated_llm_env")
N = 40


def _take(exam: Path, out: Path, target: str) -> list[str]:
    return ["exam", "take", str(exam), "--out", str(out), "--llm", "offline/student", "--external", f"x={target}",
            "--retrievers", "external:x"]  # fmt: skip


def test_a_url_nothing_listens_on_fails_before_the_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = dead_base_url() + "/rag"
    out = tmp_path / "run"
    assert main(_take(_exam(tmp_path, N), out, url)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"external system 'x': {url} is unreachable (connection refused)" in err
    assert not out.exists()


def test_a_system_refusing_every_request_stops_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    with OpenAIServer() as srv:  # takes connections; /rag is no route of it: HTTP 404 to every request
        url = f"{srv.base_url}/rag"
        code = main(_take(_exam(tmp_path, N), out, url))
        sent = srv.requests_total
    err = capsys.readouterr().err
    assert code == 2, err  # before: exit 3 after every question was sent ("40 of 40 LLM requests failed")
    assert err.count("\n") == 1 and f"external system 'x' ({url}) refused or could not take each of its first" in err
    assert "HTTP 404" in err and sent < N


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return f"{name}:answer"


def test_a_callable_that_cannot_reach_its_backend_is_named_one_that_answered_fails_per_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "def answer(req):\n    raise ConnectionRefusedError(111, 'Connection refused')\n"
    target = _module(tmp_path, monkeypatch, "rag_down_52", body)
    assert main(_take(_exam(tmp_path, N), tmp_path / "run", target)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"(the callable {target}) refused or could not take" in err
    # a system that answered keeps its later failures per row: missing, asked again by the rerun (exit 3)
    body = (
        "def answer(req):\n"
        "    if int(req['id'][1:]) % 2:\n"
        "        raise ConnectionRefusedError(111, 'Connection refused')\n"
        "    return {'answer': 1}\n"
    )
    target = _module(tmp_path, monkeypatch, "rag_flaky_52", body)
    out = tmp_path / "run2"
    code = main(_take(_exam(tmp_path, N), out, target))
    err = capsys.readouterr().err
    assert code == 3 and "refused or could not take" not in err, err
    df = pd.read_parquet(out / "responses.parquet")
    assert len(df) == N and int(df["correct"].isna().sum()) == N // 2
