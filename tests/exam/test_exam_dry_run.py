"""`ragrade --dry-run`: counts what a command would send to the LLM, sends nothing, keeps no files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragrade.cli.dryrun import redirect_outputs
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


def test_redirect_outputs_moves_every_output_into_the_temporary_folder(tmp_path: Path) -> None:
    args = ["qa", "generate", "c.jsonl", "--out", "/data/qa.jsonl", "--qrels=/data/q.jsonl", "--n", "3"]
    moved = redirect_outputs(args, tmp_path)
    assert moved == [
        "qa",
        "generate",
        "c.jsonl",
        "--out",
        str(tmp_path / "qa.jsonl"),
        f"--qrels={tmp_path / 'q.jsonl'}",
        "--n",
        "3",
    ]
    # a command that writes with a default --out gets one inside the temporary folder
    assert redirect_outputs(["judge", "answers.jsonl"], tmp_path)[-2:] == ["--out", str(tmp_path / "out")]
    assert redirect_outputs(["ask", "idx", "q?"], tmp_path) == ["ask", "idx", "q?"]
