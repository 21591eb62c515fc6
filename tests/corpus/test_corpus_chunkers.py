"""Worked examples for the segmenter and each chunker, ids, options and the semantic chunker."""

from __future__ import annotations

import itertools

import pytest
from tests.corpus.helpers import HashEmbedder, check_invariants

from ragrade.corpus.chunk import chunk_documents, create_chunker, strategies, summarize_chunks
from ragrade.corpus.segment import split_sentences
from ragrade.corpus.tokens import get_counter
from ragrade.corpus.types import Document
from ragrade.errors import ConfigError


def _sents(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text)]


def test_sentence_segmenter_rules() -> None:
    assert _sents("Dr. Smith arrived, e.g. at noon. He left! Why? Fine.") == [
        "Dr. Smith arrived, e.g. at noon.",
        "He left!",
        "Why?",
        "Fine.",
    ]
    assert _sents("J. R. R. Tolkien wrote it. Pi is 3.14 exactly.") == [
        "J. R. R. Tolkien wrote it.",
        "Pi is 3.14 exactly.",
    ]
    assert _sents("He said “stop.” Then he went... and came back.") == [
        "He said “stop.”",
        "Then he went... and came back.",
    ]
    assert _sents("東京は首都です。大阪は大きい！本当？「はい。」と言った。") == [
        "東京は首都です。",
        "大阪は大きい！",
        "本当？",
        "「はい。」",
        "と言った。",
    ]
    assert _sents("Heading\n\nBody text\ncontinues here.\n- item one\n- item two") == [
        "Heading",
        "Body text\ncontinues here.",
        "- item one",
        "- item two",
    ]


def test_token_chunker_windows_and_overlap() -> None:
    counter = get_counter()
    words = " ".join(f"w{i}" for i in range(30))
    doc = Document(id="d", text=words, source="s")
    chunker = create_chunker("token", size=10, overlap=4)
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    assert all(c.tokens <= 10 for c in chunks)
    assert sum(1 for c in chunks if c.tokens < 9) <= 1  # windows are full except the last one
    for a, b in itertools.pairwise(chunks):
        shared = counter.index(doc.text).count(b.start, a.end)
        assert 0 < shared <= 4


def test_recursive_prefers_paragraphs() -> None:
    para = "Alpha beta gamma delta. Epsilon zeta eta theta."
    text = "\n\n".join([para] * 4)
    chunks = create_chunker("recursive", size=25, overlap=0).chunk(Document(id="d", text=text, source=""))
    # each paragraph is ~12 tokens: two fit in one chunk, never cut mid-paragraph
    assert [c.text for c in chunks] == [f"{para}\n\n{para}"] * 2


def test_sentence_chunker_keeps_sentences_and_overlaps_whole_sentences() -> None:
    text = "One two three. Four five six. Seven eight nine. Ten eleven twelve."
    chunks = create_chunker("sentence", size=8, overlap=4).chunk(Document(id="d", text=text, source=""))
    assert [c.text for c in chunks] == [
        "One two three. Four five six.",
        "Four five six. Seven eight nine.",
        "Seven eight nine. Ten eleven twelve.",
    ]


def test_oversize_word_is_reported() -> None:
    text = "short words then pneumonoultramicroscopicsilicovolcanoconiosis and more"
    for strategy in ("token", "recursive", "sentence"):
        chunks = create_chunker(strategy, size=3, overlap=0).chunk(Document(id="d", text=text, source=""))
        over = [c for c in chunks if c.oversize]
        assert [c.text for c in over] == ["pneumonoultramicroscopicsilicovolcanoconiosis"], strategy
        assert summarize_chunks(chunks)["oversize"] == 1


def test_ids_stable_and_unique_across_strategies_and_params() -> None:
    doc = Document(
        id="doc-1", text="A sentence here. Another one there. And a third.", source="x", metadata={"topic": "t"}
    )
    first = create_chunker("sentence", size=5, overlap=0).chunk(doc)
    again = create_chunker("sentence", size=5, overlap=0).chunk(doc)
    assert [c.id for c in first] == [c.id for c in again]
    other_size = create_chunker("sentence", size=6, overlap=0).chunk(doc)
    other_strategy = create_chunker("token", size=5, overlap=0).chunk(doc)
    ids = [c.id for c in first + other_size + other_strategy]
    assert len(ids) == len(set(ids))
    assert first[0].id.startswith("doc-1#sentence-") and first[0].metadata == {"topic": "t", "heading_path": []}
    assert first[0].params["size"] == 5 and first[0].params["unit"] == "tokens"


def test_bad_options_have_clear_errors() -> None:
    assert strategies() == ["recursive", "semantic", "sentence", "token"]
    with pytest.raises(ConfigError, match="Did you mean 'sentence'"):
        create_chunker("sentense")
    with pytest.raises(ConfigError, match=r"overlap \(64\) must be smaller than the size \(50\)"):
        create_chunker("token", size=50, overlap=64)
    with pytest.raises(ConfigError, match="positive whole number"):
        create_chunker("recursive", size=0, overlap=0)
    with pytest.raises(ConfigError, match="does not take threshold"):
        create_chunker("token", threshold=90.0)
    with pytest.raises(ConfigError, match="percentile"):
        create_chunker("semantic", threshold=0.0, embedder=HashEmbedder())
    with pytest.raises(ConfigError, match="tokenizer 'nope' not found"):
        create_chunker("token", tokenizer="nope").chunk(Document(id="d", text="x", source=""))


def test_semantic_breaks_at_topic_shift() -> None:
    a = ["Cats purr and cats sleep.", "Cats chase mice, cats climb.", "Cats love sleep and purr."]
    b = ["Rockets burn fuel in space.", "Rockets carry fuel to orbit.", "Space rockets need fuel."]
    text = " ".join(a + b)
    embedder = HashEmbedder()
    chunker = create_chunker("semantic", size=200, overlap=0, embedder=embedder, threshold=80.0, buffer=0)
    chunks = chunker.chunk(Document(id="d", text=text, source=""))
    assert [c.text for c in chunks] == [" ".join(a), " ".join(b)]
    assert chunks[0].params["embedder"] == "test:hash" and chunks[0].params["threshold"] == 80.0


def test_semantic_batches_embeddings_across_documents() -> None:
    embedder = HashEmbedder()
    docs = [Document(id=f"d{i}", text="One. Two three. Four five six. Seven.", source="") for i in range(5)]
    chunker = create_chunker("semantic", size=4, overlap=1, embedder=embedder)
    chunks = chunk_documents(docs, chunker)
    assert embedder.calls == 1
    for doc in docs:
        check_invariants(doc, [c for c in chunks if c.doc_id == doc.id], chunker)


def test_semantic_with_real_minilm() -> None:
    text = (
        "The kitten slept on the warm windowsill. Cats enjoy long naps in the sun. "
        "A sleepy cat curled up beside the radiator. "
        "The central bank raised interest rates again. Inflation data pushed bond yields higher. "
        "Markets fell after the rate decision."
    )
    chunker = create_chunker("semantic", size=200, overlap=0, threshold=75.0, buffer=0)
    doc = Document(id="d", text=text, source="")
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    assert len(chunks) >= 2
    assert any(c.text.endswith("radiator.") for c in chunks)  # the topic shift is a breakpoint
