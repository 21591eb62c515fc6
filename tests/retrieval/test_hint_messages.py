"""Error lines name commands that exist: a folder given to `index`, documents given to `exam generate`."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragrade.cli.main import main


def _docs(tmp_path: Path) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nThe alpha service stores 12 queues in Postgres since 2021.\n", "utf-8")
    docs = tmp_path / "docs.jsonl"
    assert main(["corpus", str(folder), "--out", str(docs)]) == 0
    return docs


def test_index_of_a_folder_says_how_to_make_a_documents_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _docs(tmp_path).parent / "site"
    capsys.readouterr()
    assert main(["index", str(folder), "--out", str(tmp_path / "ix"), "--no-dense"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not found" not in err
    assert f"ragrade corpus {folder} --out docs.jsonl" in err and "ragrade index docs.jsonl" in err


def test_exam_generate_on_documents_names_real_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = _docs(tmp_path)
    capsys.readouterr()
    assert main(["exam", "generate", str(docs), "--out", str(tmp_path / "exam.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "corpus chunk" not in err
    assert f"ragrade chunk {docs} --out chunks.jsonl" in err and f"ragrade index {docs} --out INDEX" in err
