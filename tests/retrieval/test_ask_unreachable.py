"""`ragrade ask` against a server that is down or fails (issue 51 item 7, issue 52 item 8).

A server that takes no connection is said before the first question, on standard error, with nothing on
standard output (its one request was retried for 15-35 s, then the error went to standard output while
standard error said "printed above"); a server that takes the connection but fails says its error on
standard error too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.retrieval.retrieval_data import FACTS, fact_chunks
from tests.support.openai_server import OpenAIServer, always, dead_base_url

from ragrade.cli.main import main
from ragrade.retrieval.index import IndexConfig, build_index

pytestmark = pytest.mark.usefixtures("isolated_llm_env")


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ask") / "index"
    build_index(fact_chunks(), out, IndexConfig(dense=False))
    return out


def _ask(index: Path, url: str, *extra: str) -> list[str]:
    return ["ask", str(index), FACTS[2][1], "-r", "bm25", "--llm", "openai/test-model", "--llm-base-url", url, *extra]


def test_a_server_that_is_down_is_one_line_on_stderr_before_the_question(
    bm25_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = dead_base_url()
    assert main(_ask(bm25_index, url)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"ragrade: error: openai/test-model: server unreachable: {url} takes no connection")
    assert "(connection refused)" in err and "--llm-base-url" in err


def test_a_server_that_fails_says_its_error_on_stderr(bm25_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer(faults=always("500")) as srv:
        assert main(_ask(bm25_index, srv.base_url, "--max-retries", "0")) == 2
    out, err = capsys.readouterr()
    assert "Answer failed:" in out  # the answer shown with its passages, as before
    line = err.strip().splitlines()[-1]
    assert line.startswith("ragrade: error: 1 question(s) got no answer from the LLM (last error: ")
    assert "HTTP 500" in line and "printed above" not in err
