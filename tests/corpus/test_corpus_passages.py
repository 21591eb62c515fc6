"""Passages shown to a reader: a part of a split code block gets its fences back; heading paths on request."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from tests.support.typed import as_dict, dig

from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.types import Chunk, Document
from ragrade.exam.files import Question
from ragrade.retrieval.base import Hit
from ragrade.retrieval.passages import heading_line, shown_passages, shown_text
from ragrade.run.pipeline import Resources
from ragrade.run.spec import PipelineSpec

CODE = "\n".join(f"value_{i} = compute({i}, retries=3)" for i in range(30))
PAGE = f"# Tern\n\n## Setup\n\nRun the worker.\n\n```python\n{CODE}\n```\n\n## Next\n\nDone here."


def _chunks() -> list[Chunk]:
    doc = Document(id="d", text=PAGE, source="tern.md", metadata={"title": "Tern"})
    return create_chunker("recursive", size=60, overlap=0).chunk(doc)


def _fences(text: str) -> int:
    return len(re.findall(r"^```", text, re.MULTILINE))


def _hit(c: Chunk, text: str | None = None) -> Hit:
    return Hit(chunk_id=c.id, doc_id=c.doc_id, score=1.0, rank=1, text=c.text if text is None else text)


def test_shown_text_balances_fences_and_adds_the_heading_path() -> None:
    chunks = _chunks()
    middle = chunks[2]
    assert _fences(middle.text) == 0 and "fence_open" in middle.metadata  # a part inside the code block
    assert shown_text(middle.text, middle) == f"```python\n{middle.text}\n```"
    assert heading_line(middle) == "Tern > Setup"
    assert shown_text(middle.text, middle, headings=True) == f"Tern > Setup\n```python\n{middle.text}\n```"
    assert shown_text(chunks[0].text, chunks[0]) == chunks[0].text  # prose: unchanged
    compressed = "value_3 = compute(3, retries=3)"  # post-processing kept a part: shown as kept
    assert shown_text(compressed, middle) == compressed
    assert shown_text(compressed, middle, headings=True) == f"Tern > Setup\n{compressed}"
    assert shown_text("from elsewhere", None, headings=True) == "from elsewhere"
    no_path = Chunk(id="x", doc_id="x", text="t", start=0, end=1, strategy="s", metadata={"heading_path": []})
    assert heading_line(no_path) == "" and shown_text("t", no_path, headings=True) == "t"
    for c in chunks:  # every part of the code block shows an even number of fences
        assert _fences(shown_text(c.text, c)) % 2 == 0, c.text


def test_unknown_chunk_ids_are_shown_as_they_came() -> None:
    from ragrade.errors import DataError

    chunks = {c.id: c for c in _chunks()}

    def lookup(cid: str) -> Chunk:
        if cid not in chunks:
            raise DataError(f"chunk id '{cid}' is not in the index")
        return chunks[cid]

    c = next(c for c in chunks.values() if "fence_close" in c.metadata and "fence_open" in c.metadata)
    outside = Hit(chunk_id="ext-1", doc_id="e", score=0.5, rank=2, text="external text")
    assert shown_passages([_hit(c), outside], lookup) == [c.display_text(), "external text"]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragrade.retrieval.index import IndexConfig, build_index

    out = tmp_path_factory.mktemp("idx") / "idx"
    build_index(_chunks(), out, IndexConfig(dense=False))
    return out


def _question() -> Question:
    return Question(id="q", question="value_17 compute retries", choices=[], answer=-1, doc_id="d", chunk_id="c")


@pytest.mark.parametrize("headings", [False, True])
def test_pipeline_passages_are_display_text(index_dir: Path, headings: bool) -> None:
    res = Resources({"indexes": {"rec": str(index_dir)}, "passage_headings": headings}, questions=[_question()])
    spec = PipelineSpec(retriever="bm25", chunker="rec", k=3)
    got = asyncio.run(res.contexts(spec, [_question()]))[0]
    assert got.error is None and len(got.passages) == 3
    index = res.index("rec")
    for cid, passage in zip(got.chunk_ids, got.passages, strict=True):
        chunk = index.chunk(cid)
        assert passage == (f"Tern > Setup\n{chunk.display_text()}" if headings else chunk.display_text())
        assert _fences(passage) % 2 == 0
    assert any("fence_open" in index.chunk(cid).metadata for cid in got.chunk_ids)  # the case that matters


def test_ask_shows_display_text(index_dir: Path) -> None:
    from ragrade.llm import create_llm
    from ragrade.retrieval.ask import Assistant, render
    from ragrade.retrieval.index import load_index

    index = load_index(index_dir)
    llm = create_llm("offline/extractive", semantic=False, cache=False)  # lexical only: no model to load
    ans = Assistant(index.retriever("bm25"), llm, k=2, chunks=index.chunk, headings=True).ask("value_17 compute")
    assert ans.shown == [f"Tern > Setup\n{index.chunk(h.chunk_id).display_text()}" for h in ans.hits]
    record = as_dict(dig(ans.to_dict(), "passages", 0))
    assert record["text"] == ans.hits[0].text and record["shown"] == ans.shown[0]  # exact slice kept for offsets
    out = render(ans)
    assert "Tern > Setup ```python value_" in out  # the snippet opens the code block it continues
    plain = Assistant(index.retriever("bm25"), llm, k=2).ask("value_17 compute")  # no chunks: raw text
    assert [h.text for h in plain.hits] == plain.shown
