"""Evaluate a pipeline built with LangChain, as it is, through ragrade's external-pipeline hook.

ragrade calls ``answer(request)`` once per question with ``{"id", "question",
"choices", "k"}``; the function runs your own retriever (and, if you give
one, your own chain) and returns the passages it retrieved and, optionally,
the answer it chose. Everything framework-specific is in
:func:`build_pipeline`; replace it with your pipeline. The adapter around it
(:func:`make_handler`) only needs objects shaped like LangChain's: a retriever
with ``invoke(question) -> [Document]`` (``page_content``, ``metadata``) and a
chain with ``invoke(dict) -> str``.

LangChain is an optional extra, never a ragrade dependency::

    pip install 'ragrade[langchain]' rank_bm25
    RAGRADE_LC_CHUNKS=runs/demo/chunks/recursive-200.jsonl PYTHONPATH=examples \\
        ragrade exam take runs/demo/exam/exam.jsonl --out runs/lc \\
        --external lc=langchain_rag:answer --retrievers bm25,external:lc --index runs/demo/index/recursive-200

Without ``answer`` in the reply, the grid's LLM answers from the passages the
LangChain retriever found, so it is compared with ragrade's own retrievers
question by question (paired verdicts, IRT).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any

LETTERS = "ABCDEFGH"


def to_contexts(docs: Sequence[Any], k: int) -> list[dict[str, str]]:
    """LangChain ``Document``-like objects (``page_content``, ``metadata``) as the hook's context objects."""
    out = []
    for i, doc in enumerate(list(docs)[: max(k, 0) or None]):
        meta = dict(getattr(doc, "metadata", None) or {})
        text = getattr(doc, "page_content", None)
        if text is None:
            text = str(doc)
        out.append(
            {
                "text": str(text),
                "id": str(meta.get("chunk_id") or meta.get("id") or getattr(doc, "id", None) or f"lc-{i}"),
                "doc_id": str(meta.get("doc_id") or meta.get("source") or ""),
            }
        )
    return out


def choice_of(reply: str, choices: Sequence[str]) -> int | None:
    """The choice a chain's free-text reply names (ragrade's own letter parser), or None."""
    from ragrade.run.answer import parse_letter

    return parse_letter(reply, list(choices))


def make_handler(retriever: Any, chain: Any = None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The function ragrade calls: retrieve with ``retriever``; answer with ``chain`` when given."""

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        question, choices, k = request["question"], list(request.get("choices") or []), int(request.get("k") or 0)
        contexts = to_contexts(retriever.invoke(question), k)
        reply: dict[str, Any] = {"contexts": contexts}
        if chain is not None:
            options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
            text = chain.invoke(
                {"question": question, "choices": options, "context": "\n\n".join(c["text"] for c in contexts)}
            )
            picked = choice_of(str(text), choices) if choices else None
            reply["answer"] = picked  # None: ragrade's LLM answers from the contexts
        return reply

    return handle


def build_pipeline() -> tuple[Any, Any]:
    """Your LangChain pipeline (here: a BM25 retriever over a ragrade chunks file, no chain)."""
    try:
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.documents import Document
    except ImportError as exc:  # the framework is an optional extra
        raise ImportError("this example needs LangChain: pip install 'ragrade[langchain]' rank_bm25") from exc
    path = os.environ.get("RAGRADE_LC_CHUNKS")
    if not path:
        raise RuntimeError("set RAGRADE_LC_CHUNKS to a chunks JSONL file (e.g. from `ragrade run`)")
    docs = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if "text" in rec and "id" in rec:  # skip the file's header line
                meta = {"chunk_id": rec["id"], "doc_id": rec.get("doc_id", "")}
                docs.append(Document(page_content=rec["text"], metadata=meta))
    retriever = BM25Retriever.from_documents(docs)
    retriever.k = 10
    return retriever, None


_HANDLER: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The ``module:function`` target: builds the pipeline on first use, then answers one question."""
    global _HANDLER
    if _HANDLER is None:
        _HANDLER = make_handler(*build_pipeline())
    return _HANDLER(request)
