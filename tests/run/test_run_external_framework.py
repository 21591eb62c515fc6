"""The worked example of evaluating a LangChain pipeline through the external hook (examples/langchain_rag.py).

The adapter is tested with framework-shaped stubs written here (LangChain is an optional extra and not
installed with ragrade); the real framework path runs only where LangChain is installed.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.run.fakes import make_exam

from ragrade.cli.main import main
from ragrade.run.summary import read_responses

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def lc_example() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module("langchain_rag")
    finally:
        sys.path.remove(str(EXAMPLES))


@dataclass
class StubDocument:
    """Shaped like langchain_core.documents.Document."""

    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)


class StubRetriever:
    """Shaped like a LangChain retriever: ``invoke(question) -> [Document]``; finds the site's record."""

    def __init__(self, records: dict[str, tuple[str, str]]) -> None:
        self.records = records  # chunk id -> (doc id, text)

    def invoke(self, question: str) -> list[StubDocument]:
        site = question.split("site ")[1].split()[0]
        hits = [(cid, d, t) for cid, (d, t) in self.records.items() if f"site {site} " in t]
        return [StubDocument(t, {"chunk_id": cid, "doc_id": d}) for cid, d, t in hits]


class StubChain:
    """Shaped like a LangChain runnable chain: ``invoke(dict) -> str``; names the option the context states."""

    def invoke(self, inputs: dict[str, str]) -> str:
        for line in inputs["choices"].splitlines():
            letter, _, option = line.partition(". ")
            if option and option in inputs["context"]:
                return f"The answer is {letter}."
        return "I cannot tell."


def test_adapter_turns_documents_into_hook_replies(lc_example: Any) -> None:
    docs = [StubDocument("alpha", {"chunk_id": "c1", "doc_id": "d1"}), StubDocument("beta", {"source": "b.txt"})]
    assert lc_example.to_contexts(docs, 5) == [
        {"text": "alpha", "id": "c1", "doc_id": "d1"},
        {"text": "beta", "id": "lc-1", "doc_id": "b.txt"},
    ]
    assert len(lc_example.to_contexts(docs, 1)) == 1
    assert lc_example.choice_of("The answer is C.", ["w", "x", "y", "z"]) == 2
    assert lc_example.choice_of("no idea", ["w", "x", "y", "z"]) is None


def _stub_module(qs: list[Any], with_chain: bool) -> str:
    import types

    mod = types.ModuleType("stub_lc_pipeline")
    records = {q.chunk_id: (q.doc_id, q.context) for q in qs}
    lc = importlib.import_module("langchain_rag")
    mod.answer = lc.make_handler(StubRetriever(records), StubChain() if with_chain else None)  # type: ignore[attr-defined]
    sys.modules[mod.__name__] = mod
    return f"{mod.__name__}:answer"


@pytest.mark.parametrize("with_chain", [False, True])
def test_stub_pipeline_takes_the_exam(lc_example: Any, tmp_path: Path, with_chain: bool) -> None:
    qs = make_exam(tmp_path / "exam.jsonl", 12)
    target = _stub_module(qs, with_chain)
    out = tmp_path / "run"
    llm = "py/tests.run.fakes:make_llm"
    args = ["exam", "take", str(tmp_path / "exam.jsonl"), "--out", str(out), "--external", f"lc={target}"]
    assert main([*args, "--llm", llm]) == 0
    df = read_responses(out)
    assert (df["retriever"] == "external:lc").all() and df["error"].isna().all()
    assert [r[0] for r in df["retrieved"]] == [q.chunk_id for q in qs]  # the framework's chunk ids kept
    assert df["gold_doc_retrieved"].all()
    if with_chain:  # the chain answered itself, from the passage that states the answer
        assert (df["method"] == "external").all() and df["correct"].all()
    else:  # the grid's LLM answered from the framework's passages
        assert (df["method"] != "external").all()


def test_real_langchain_pipeline(lc_example: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_community.retrievers", reason="LangChain is an optional extra")
    pytest.importorskip("rank_bm25", reason="LangChain's BM25Retriever needs rank_bm25")
    from ragrade.corpus.files import write_chunks
    from ragrade.corpus.types import Chunk

    qs = make_exam(tmp_path / "exam.jsonl", 6)
    chunks = [
        Chunk(id=q.chunk_id, doc_id=q.doc_id, text=q.context, start=0, end=len(q.context), strategy="whole") for q in qs
    ]
    write_chunks(tmp_path / "chunks.jsonl", chunks)
    monkeypatch.setenv("RAGRADE_LC_CHUNKS", str(tmp_path / "chunks.jsonl"))
    monkeypatch.setattr(lc_example, "_HANDLER", None)
    reply = lc_example.answer({"id": "q000", "question": qs[0].question, "choices": qs[0].choices, "k": 3})
    assert reply["contexts"] and reply["contexts"][0]["id"] == qs[0].chunk_id
