"""`index --headings`: each chunk is indexed with its heading path, so a query naming a section finds it."""

from __future__ import annotations

from pathlib import Path

from ragrade.corpus.types import Chunk
from ragrade.retrieval.index import IndexConfig, build_index, indexed_text, load_index


def _chunks() -> list[Chunk]:
    rows = [
        ("a", "Run the installer and accept the licence.", ["Tern", "Windows setup"]),
        ("b", "Copy the binary into a folder on the path.", ["Tern", "Linux setup"]),
        ("c", "Logs rotate daily and keep seven files.", ["Tern", "Operations"]),
    ]
    return [
        Chunk(id=i, doc_id="tern", text=t, start=0, end=len(t), strategy="recursive", metadata={"heading_path": p})
        for i, t, p in rows
    ]


def test_indexed_text_puts_the_heading_path_first_only_when_asked() -> None:
    chunk = _chunks()[1]
    assert indexed_text(chunk, headings=False) == chunk.text
    assert indexed_text(chunk, headings=True) == "Tern > Linux setup\n" + chunk.text
    bare = Chunk(id="x", doc_id="d", text="plain", start=0, end=5, strategy="token")
    assert indexed_text(bare, headings=True) == "plain"  # no heading path: the text alone


def test_a_query_naming_a_section_finds_its_chunk_only_with_headings(tmp_path: Path) -> None:
    for headings in (False, True):
        out = tmp_path / f"idx-{headings}"
        build_index(_chunks(), out, IndexConfig(dense=False, headings=headings))
        idx = load_index(out)
        hits = idx.retriever("bm25").retrieve(["linux"], k=3)[0]
        ids = [h.chunk_id for h in hits if h.score > 0]
        assert ids == (["b"] if headings else [])
        assert all(h.text == idx.chunk(h.chunk_id).text for h in hits)  # hits carry the chunk text, not the heading
        assert idx.manifest["indexed_text"] == ("heading path + chunk text" if headings else "chunk text")
        assert idx.chunk("b").text == _chunks()[1].text  # the stored chunk text is unchanged
