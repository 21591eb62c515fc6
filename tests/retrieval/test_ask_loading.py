"""`ragrade ask` says what it loads and how long it took, before the first answer (issue 28, 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.retrieval.retrieval_data import FACTS, fact_docs

from ragrade.cli.main import main
from ragrade.corpus.files import write_documents


@pytest.mark.slow  # loads MiniLM when no earlier test of the session did (about 1-3 s on a quiet machine)
def test_ask_reports_what_it_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_documents(tmp_path / "docs.jsonl", fact_docs())
    idx = tmp_path / "idx"
    assert main(["index", str(tmp_path / "docs.jsonl"), "-o", str(idx), "--no-dense", "--json"]) == 0
    capsys.readouterr()
    assert main(["ask", str(idx), FACTS[2][1], "-r", "bm25", "-k", "2"]) == 0
    out, err = capsys.readouterr()
    assert "Extractive baseline" in out
    assert "ragrade: loaded the offline/extractive reader's sentence embedder (MiniLM, shared) in" in err
    assert "query embedder" not in err  # BM25 needs none
