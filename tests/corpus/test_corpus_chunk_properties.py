"""Property-based tests: every chunker keeps offsets exact, order, coverage and size."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.corpus.helpers import HashEmbedder, check_invariants

from ragrade.corpus.chunk import create_chunker
from ragrade.corpus.segment import split_sentences
from ragrade.corpus.tokens import get_counter
from ragrade.corpus.types import Document

WORDS = [
    "the",
    "model",
    "retrieval",
    "chunk",
    "e.g.",
    "Dr.",
    "unbelievably",
    "tokenization",
    "x",
    "42",
    "3.14",
    "naïve",
    "Straße",
    "東京",
    "日本語",
    "テスト",
    "😀",
    "foo_bar",
    "http://a.example/b?c=d",
    "supercalifragilisticexpialidocious",
    "(",
    ")",
    ",",
    ";",
    "—",
    "'quoted'",
    "“curly”",
]
ENDS = [".", "!", "?", "。", "！", "？", "...", "?!", "。」", ".)", ""]
SEPS = [" ", " ", " ", "\n", "\n\n", "\t", "  ", "\n- ", "\n1. ", ""]


@st.composite
def documents(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 25))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12))
        parts.append(" ".join(words) + draw(st.sampled_from(ENDS)))
        parts.append(draw(st.sampled_from(SEPS)))
    if draw(st.booleans()):
        parts.append(draw(st.text(max_size=60)))  # arbitrary unicode, controls included
    return "".join(parts)


params = st.integers(1, 40).flatmap(lambda size: st.tuples(st.just(size), st.integers(0, size - 1)))


@pytest.mark.parametrize("strategy", ["token", "recursive", "sentence", "semantic"])
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=documents(), sp=params)
def test_chunker_invariants(strategy: str, text: str, sp: tuple[int, int]) -> None:
    size, overlap = sp
    kw = {"embedder": HashEmbedder()} if strategy == "semantic" else {}
    chunker = create_chunker(strategy, size=size, overlap=overlap, **kw)
    doc = Document(id="d", text=text, source="mem", metadata={"topic": "t"})
    chunks = chunker.chunk(doc)
    check_invariants(doc, chunks, chunker)
    if text.strip():
        assert chunks


@settings(max_examples=120, deadline=None)
@given(text=documents(), sp=params)
def test_sentence_chunker_cuts_only_oversized_sentences(text: str, sp: tuple[int, int]) -> None:
    size, overlap = sp
    chunks = create_chunker("sentence", size=size, overlap=overlap).chunk(Document(id="d", text=text, source=""))
    index = get_counter().index(text)
    sentences = split_sentences(text)
    for c in chunks:
        for edge in (c.start, c.end):
            inside = [(s, e) for s, e in sentences if s < edge < e]
            for s, e in inside:  # a chunk edge inside a sentence: only when that sentence alone is too big
                assert index.count(s, e) > size, (text[s:e], edge)
