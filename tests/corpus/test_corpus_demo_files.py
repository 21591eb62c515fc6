"""The stdlib demo corpus (size, determinism, metadata) and the documents/chunks file round trip."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from ragrade.corpus.chunk import chunk_documents, create_chunker
from ragrade.corpus.demo import DemoStats, build_demo_corpus
from ragrade.corpus.files import read_chunk_file, read_chunks, read_documents, write_chunks, write_documents
from ragrade.corpus.types import Chunk, Document
from ragrade.errors import DataError


@pytest.fixture(scope="module")
def demo() -> tuple[list[Document], DemoStats]:
    stats = DemoStats()
    return build_demo_corpus(stats=stats), stats


def _fingerprint(docs: list[Document]) -> str:
    return hashlib.sha1("\n".join(f"{d.id}\t{d.text}" for d in docs).encode()).hexdigest()


def test_demo_corpus_is_large_sorted_and_described(demo: tuple[list[Document], DemoStats]) -> None:
    docs, stats = demo
    assert len(docs) >= 1000
    assert stats.modules > 100
    assert len({d.id for d in docs}) == len(docs)
    keys = [(d.metadata["module"], d.metadata["title"]) for d in docs]
    assert keys == sorted(keys)
    kinds = {d.metadata["kind"] for d in docs}
    assert kinds == {"module", "class", "function"}
    by_title = {d.metadata["title"]: d for d in docs}
    dumps = by_title["json.dumps"]
    assert dumps.metadata["topic"] == "json" and dumps.text.startswith("json.dumps(obj, *, skipkeys=False")
    assert by_title["email.base64mime"].metadata["topic"] == "email"
    modules = {str(d.metadata["module"]).split(".")[0] for d in docs}
    assert not modules & {"antigravity", "this", "tkinter", "turtle", "idlelib", "test"}
    # defaults that are not literals are elided: no environment variables or addresses leak into the text
    assert not any("0x7f" in d.text or "'PATH':" in d.text for d in docs)


def test_demo_corpus_is_deterministic_across_processes(demo: tuple[list[Document], DemoStats]) -> None:
    code = (
        "from ragrade.corpus.demo import build_demo_corpus; import hashlib; d = build_demo_corpus(); "
        "print(hashlib.sha1('\\n'.join(f'{x.id}\\t{x.text}' for x in d).encode()).hexdigest())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == _fingerprint(demo[0])


def test_demo_limit_spreads_over_topics(demo: tuple[list[Document], DemoStats]) -> None:
    small = build_demo_corpus(limit=60)
    assert len(small) == 60
    assert len({d.metadata["topic"] for d in small}) == 60  # one document from each of 60 topics
    assert {d.id for d in small} <= {d.id for d in demo[0]}
    assert [d.id for d in small] == [d.id for d in build_demo_corpus(limit=60)]


def test_documents_and_chunks_round_trip(tmp_path: Path) -> None:
    docs = [
        Document(id="a", text="First doc. It has two sentences.", source="a.txt", metadata={"topic": "x"}),
        Document(id="b", text="東京は首都です。大阪も。", source="b.txt"),
    ]
    path = tmp_path / "docs.jsonl"
    assert write_documents(path, docs, meta={"note": 1}) == 2
    assert read_documents(path) == docs
    chunker = create_chunker("sentence", size=5, overlap=0)
    chunks = chunk_documents(docs, chunker)
    cpath = tmp_path / "chunks.jsonl"
    write_chunks(cpath, chunks, chunker=chunker, meta={"documents": str(path)})
    cf = read_chunk_file(cpath)
    assert cf.chunks == chunks == read_chunks(cpath)
    assert cf.chunker["strategy"] == "sentence" and cf.chunker["size"] == 5 and cf.meta["documents"] == str(path)
    assert all(isinstance(c, Chunk) and c.tokens > 0 for c in cf.chunks)


def test_file_errors_name_file_and_line(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"docs.jsonl:2: duplicate document id 'a'"):
        read_documents(docs)
    docs.write_text('{"id": "a", "body": "x"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"docs.jsonl:1: bad document record: missing .text."):
        read_documents(docs)
    write_documents(docs, [Document(id="a", text="x", source="")])
    with pytest.raises(DataError, match="expected a 'chunks' file, found a 'documents' file"):
        read_chunks(docs)
    chunks = tmp_path / "c.jsonl"
    chunks.write_text('{"id": "c", "doc_id": "a", "text": "x"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"c.jsonl:1: bad chunk record: missing .start."):
        read_chunks(chunks)
