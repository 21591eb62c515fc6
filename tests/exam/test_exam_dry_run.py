"""`ragrade --dry-run`: counts what a command would send to the LLM, sends nothing, keeps no files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragrade.cli.main import main
from ragrade.corpus.files import write_chunks
from ragrade.corpus.types import Chunk


@pytest.fixture
def chunks_file(tmp_path: Path, synth_chunks: list[Chunk], hash_embedder: Any, monkeypatch: pytest.MonkeyPatch) -> Path:
    import ragrade.embedding.embed as embed

    monkeypatch.setattr(embed, "default_embedder", lambda: hash_embedder)
    path = tmp_path / "chunks.jsonl"
    write_chunks(path, synth_chunks)
    return path


def test_dry_run_sends_nothing_and_writes_nothing(
    chunks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], openai_server: Any
) -> None:
    out = tmp_path / "exam.jsonl"
    args = ["exam", "generate", str(chunks_file), "--n", "6", "--llm", "openai/test-model"]
    rc = main(["--dry-run", *args, "--llm-base-url", openai_server.base_url, "--out", str(out), "--no-cache"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert openai_server.requests_total == 0  # nothing reached the server
    assert not out.exists() and not list(tmp_path.glob("exam.*"))  # no file of the dry run is left
    counts = json.loads(captured.out.strip().splitlines()[-1])["dry_run"]
    assert [c["llm"] for c in counts] == ["openai/test-model"]
    assert counts[0]["generate_requests"] >= 6 and counts[0]["prompt_tokens_estimate"] > 0
    assert "nothing was sent" in captured.err


def test_dry_run_writes_every_output_option_into_its_temporary_folder(
    chunks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's settings name the folder; the verb writes --out and --qrels there (no command line rewritten)."""
    out, qrels = tmp_path / "data" / "qa.jsonl", tmp_path / "data" / "qrels.jsonl"
    out.parent.mkdir()
    args = ["qa", "generate", str(chunks_file), "--llm", "offline", "--n", "3", "--out", str(out), f"--qrels={qrels}"]
    assert main(["--dry-run", *args]) == 0
    captured = capsys.readouterr()
    assert "made no LLM request" in captured.err
    assert list(out.parent.iterdir()) == []  # nothing in the user's folder
    written = Path(next(w for w in captured.out.split() if w.endswith("qa.jsonl")).rstrip(",;:()"))
    assert written.name == "qa.jsonl" and written.parent.name.startswith("ragrade-dry-run-")
    assert not written.parent.exists()  # the temporary folder is gone
    assert main(args) == 0 and out.exists() and qrels.exists()  # the same command for real writes both
