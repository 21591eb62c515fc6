"""The `ragrade corpus` and `ragrade chunk` verbs: outputs, summaries, and one-line errors with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.corpus.fixtures import build_corpus
from tests.support.typed import dig

from ragrade.cli.main import main
from ragrade.corpus.files import read_chunk_file, read_documents
from ragrade.io import read_jsonl


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("cli-corpus"))


def test_corpus_then_chunk(corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = tmp_path / "docs.jsonl"
    assert main(["corpus", str(corpus_dir), "--out", str(docs)]) == 0
    cap = capsys.readouterr()
    assert "loaded 9 documents" in cap.out
    assert "skipped 8: binary 1, empty 2, encoding 1, invalid-record 2, unreadable 1, unsupported 1" in cap.out
    assert "ignored 1 hidden" in cap.out
    assert "ignored 1 images, stylesheets, scripts and other assets (.png 1)" in cap.out
    warnings = [ln for ln in cap.err.splitlines() if ln.startswith("ragrade: warning: skipped")]
    assert len(warnings) == 8 and any("garbage.txt: not valid UTF-8" in w for w in warnings)
    header, _ = read_jsonl(docs)
    assert header is not None and header.kind == "documents" and header.version == 1
    assert dig(header.meta, "summary", "documents") == 9
    assert len(read_documents(docs)) == 9

    chunks = tmp_path / "chunks.jsonl"
    argv = ["chunk", str(docs), "--strategy", "sentence", "--size", "12", "--overlap", "3", "--out", str(chunks)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "chunks from 9 documents (sentence, size 12 tokens, overlap 3)" in out
    assert "tokens per chunk: mean" in out and "oversize chunks" in out
    cf = read_chunk_file(chunks)
    assert cf.chunker["strategy"] == "sentence" and cf.chunker["size"] == 12 and cf.chunker["overlap"] == 3
    assert all(c.tokens <= 12 or c.oversize for c in cf.chunks)
    texts = {d.id: d.text for d in read_documents(docs)}
    assert all(texts[c.doc_id][c.start : c.end] == c.text for c in cf.chunks)

    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["chunks"] == len(cf.chunks) and summary["documents"] == 9
    assert set(summary["tokens"]) == {"mean", "median", "min", "max"} and summary["tokens"]["max"] <= 12


def test_corpus_json_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"pid": "p1", "body": "Alpha text.\\nDROP me", "a": 1, "b": 2, "c": 3}\n', encoding="utf-8")
    out = tmp_path / "docs.jsonl"
    argv = [
        "corpus",
        str(src),
        "--out",
        str(out),
        "--text-field",
        "body",
        "--id-field",
        "pid",
        "--meta-field",
        "a,b",
        "--drop-pattern",
        "^DROP",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["documents"] == 1 and summary["lines_dropped"] == 1
    (doc,) = read_documents(out)
    assert doc.id == "p1" and doc.text == "Alpha text." and doc.metadata["a"] == 1 and "c" not in doc.metadata


def test_demo_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.jsonl"
    assert main(["corpus", "--demo", "--demo-limit", "40", "--out", str(out)]) == 0
    docs = read_documents(out)
    assert len(docs) == 40
    assert len({d.metadata["topic"] for d in docs}) >= 20  # spread over topics


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["corpus", "--out", "X"], "give at least one PATH"),
        (["corpus", "EMPTYDIR", "--out", "X"], "no usable document in"),
        (["corpus", "EMPTYDIR", "--demo", "--out", "X"], "not both"),
        (["corpus", "NOPE", "--out", "X"], "no usable document"),
        (["corpus", "EMPTYDIR", "--drop-pattern", "(", "--out", "X"], "not a valid regular expression"),
        (["chunk", "DOCS", "--strategy", "sentense", "--out", "X"], "Did you mean 'sentence'"),
        (["chunk", "DOCS", "--size", "10", "--overlap", "10", "--out", "X"], "must be smaller than the size"),
        (["chunk", "DOCS", "--threshold", "90", "--out", "X"], "does not take threshold"),
        (["chunk", "NOPE", "--out", "X"], "file not found"),
        (["chunk", "BADDOCS", "--out", "X"], "BADDOCS:2: not valid JSON"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "zero.txt").write_bytes(b"")
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "hello", "source": "s"}\n', encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "hello"}\n{oops\n', encoding="utf-8")
    subst = {
        "EMPTYDIR": str(tmp_path / "empty"),
        "DOCS": str(docs),
        "BADDOCS": str(bad),
        "NOPE": str(tmp_path / "nope.jsonl"),
        "X": str(tmp_path / "out.jsonl"),
    }
    assert main([subst.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    errors = [ln for ln in err if ln.startswith("ragrade: error:")]
    assert len(errors) == 1 and message.replace("BADDOCS", str(bad)) in errors[0], err
    assert "Traceback" not in "\n".join(err)
    assert not (tmp_path / "out.jsonl").exists()


def test_console_script_no_usable_document(tmp_path: Path) -> None:
    (tmp_path / "e.txt").write_bytes(b"")
    exe = Path(sys.executable).with_name("ragrade")
    proc = subprocess.run(
        [str(exe), "corpus", str(tmp_path), "--out", str(tmp_path / "o.jsonl")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("ragrade: error: no usable document")
    assert "Traceback" not in proc.stderr
