"""Using an index: searching it, evaluating its retrievers and answering from it (``ragrade search``,
``retrieval-eval``, ``ask``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike

if TYPE_CHECKING:
    from ragrade.llm.options import LLMOptions
    from ragrade.retrieval.ask import Assistant
    from ragrade.retrieval.base import Hit
    from ragrade.retrieval.evaluate import RetrievalEvaluation
    from ragrade.retrieval.index import Index


@dataclass(frozen=True)
class SearchResult:
    """What :func:`search_index` found: the hits (best first), with each hit's passage as an LLM would be shown
    it (``passages``) and its heading path (``headings``, '' when none); what was searched (the query, or the
    queries a transform made of it), the terms a transform added, and a transform's error (then the plain
    query's hits)."""

    query: str
    retriever: str
    k: int
    hits: list[Hit]
    passages: list[str]
    headings: list[str]
    searched: list[str] = field(default_factory=list)
    added_terms: list[str] = field(default_factory=list)
    transform_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape ``ragrade search --json`` prints."""
        return {
            "query": self.query,
            "retriever": self.retriever,
            "k": self.k,
            "searched": self.searched,
            "added_terms": self.added_terms,
            "transform_error": self.transform_error,
            "hits": [
                {
                    "rank": h.rank,
                    "chunk_id": h.chunk_id,
                    "doc_id": h.doc_id,
                    "score": h.score,
                    "source": h.source,
                    "text": h.text,
                    **({"spans": [list(s) for s in h.spans]} if h.spans is not None else {}),
                }
                for h in self.hits
            ],
        }


def search_index(
    index: Index | PathLike,
    query: str,
    *,
    retriever: str = "hybrid",
    k: int = 5,
    embedder: str | None = None,
    store: str | None = None,
    reranker: str | None = None,
    fusion: str | None = None,
    rrf_k: float | None = None,
    query_transform: str | None = None,
    post: str | None = None,
    transform_llm: str | None = None,
    llm_options: LLMOptions | None = None,
) -> SearchResult:
    """Search an index for the top-``k`` chunks of ``query`` (``ragrade search``).

    ``retriever``: bm25, dense, hybrid, rerank(<base>), closed; ``store``: the vector store to search (built
    on first use); ``fusion``/``rrf_k``: hybrid fusion. ``query_transform`` (none, hyde, multi-query, rm3)
    and ``post`` (a post-processing chain joined by '+') run with ``transform_llm`` where they need an LLM
    (built with ``llm_options``).
    """
    from ragrade.errors import ConfigError
    from ragrade.retrieval.index import load_index
    from ragrade.retrieval.passages import heading_line, shown_passages
    from ragrade.retrieval.setup import retrieval_pipeline, retriever_options, single_value

    if k <= 0:
        raise ConfigError(f"$k must be a positive integer, got {k}")
    if not query.strip():
        raise ConfigError("the query is empty")
    single_value(query_transform, "$query")
    single_value(post, "$post")
    tx_llm = _transform_llm(transform_llm, llm_options)  # a wrong model fails before the index loads
    idx = load_index(index) if isinstance(index, (str, Path)) else index
    opts = retriever_options(retriever, embedder=embedder, store=store, reranker=reranker, fusion=fusion, rrf_k=rrf_k)
    ret = retrieval_pipeline(idx, idx.retriever(retriever, **opts), query_transform, post, tx_llm, reranker,
                             "$transform_llm")  # fmt: skip
    got = ret.run([query], k)[0] if hasattr(ret, "run") else None
    hits = list(got.hits if got is not None else ret.retrieve([query], k)[0])
    return SearchResult(
        query=query, retriever=ret.name, k=k, hits=hits, passages=shown_passages(hits, idx.chunk),
        headings=[heading_line(idx.chunk(h.chunk_id)) for h in hits],
        searched=list(got.searched) if got is not None else [query],
        added_terms=list(got.added_terms) if got is not None else [], transform_error=got.error if got else None,
    )  # fmt: skip


def _transform_llm(spec: str | None, options: LLMOptions | None) -> Any:
    """The LLM of query transforms and post-processors (None: none asked for)."""
    if not spec:
        return None
    from ragrade.config import build_config
    from ragrade.llm import create_llm
    from ragrade.llm.options import LLMOptions

    return create_llm(spec, options if options is not None else build_config(LLMOptions, source="LLM options"))


def evaluate_retrieval(
    index: Index | PathLike,
    qrels: PathLike,
    retrievers: Sequence[str] = ("bm25", "dense", "hybrid"),
    *,
    k: int = 10,
    level: str = "chunk",
    embedder: str | None = None,
    reranker: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    empty_queries: str = "skip",
    out: PathLike | None = None,
) -> RetrievalEvaluation:
    """Hit rate@k, recall@k, MRR and nDCG@k with bootstrap 95% intervals per retriever (``ragrade retrieval-eval``).

    ``qrels``: a qrels JSONL (query + relevant ids) or an exam file; ``level``: ``chunk`` or ``doc`` ids.
    Queries with no relevant id: as trec_eval (``empty_queries="skip"``), one with no judged id is skipped and one
    judged only not relevant (grade 0) scores 0; as ranx (``"zero"``), both score 0. Writes the results with
    per-query rows as JSON to ``out`` when given.
    """
    from ragrade.retrieval.evaluate import evaluate_retrieval as _evaluate

    return _evaluate(
        index, qrels, retrievers, k=k, level=level, embedder=embedder, reranker=reranker, n_boot=n_boot, seed=seed,
        empty_queries=empty_queries, out=out,
    )  # fmt: skip


def open_assistant(
    index: Index | PathLike,
    *,
    retriever: str = "hybrid",
    k: int = 5,
    llm: str | None = None,
    llm_options: LLMOptions | None = None,
    prompt_file: PathLike | None = None,
    embedder: str | None = None,
    reranker: str | None = None,
    query: str | None = None,
    post: str | None = None,
    transform_llm: str | None = None,
    headings: bool = False,
    report: Callable[[str], None] | None = None,
) -> Assistant:
    """An assistant answering from an index (``ragrade ask``): ``.ask(question)`` retrieves ``k`` passages with
    ``retriever`` and answers from them, citing them (an :class:`~ragrade.retrieval.ask.Answer`).

    ``llm``: PROVIDER/MODEL (default: the offline extractive reader), built with ``llm_options``; ``query`` and
    ``post``: one query transform and one post-processing chain (their LLM: ``transform_llm``, else ``llm``);
    ``prompt_file``: a template with ``{question}`` and ``{passages}``. With ``report``, the models load now
    (one line each, with how long it took) rather than at the first question.
    """
    from ragrade.llm import create_llm, options_for_llms
    from ragrade.retrieval.ask import Assistant, load_prompt, warm_up
    from ragrade.retrieval.index import load_index
    from ragrade.retrieval.setup import retrieval_pipeline, retriever_options, single_value

    spec = llm or "offline/extractive"
    rewrites = single_value(query, "$query") != "none" or single_value(post, "$post") != "none"
    tx_spec = (transform_llm or llm) if rewrites else None  # the answering LLM rewrites too, unless told otherwise
    # a wrong model or option fails now, before anything loads; each LLM gets the options it can use
    options = options_for_llms([spec, *([tx_spec] if tx_spec else [])], llm_options)
    prompt = load_prompt(prompt_file)
    idx = load_index(index) if isinstance(index, (str, Path)) else index
    ret = idx.retriever(retriever, **retriever_options(retriever, embedder=embedder, reranker=reranker))
    model = create_llm(spec, options[spec])
    # one object when the same model answers and rewrites (one load of the weights, one limiter against the
    # server), and no rewriting LLM at all when no query transform or post chain asks for one
    tx_llm = None if tx_spec is None else model if tx_spec == spec else create_llm(tx_spec, options[tx_spec])
    pipeline = retrieval_pipeline(idx, ret, query, post, tx_llm, reranker, "$transform_llm or $llm")
    assistant = Assistant(pipeline, model, k=k, prompt=prompt, chunks=idx.chunk, headings=headings)
    if report is not None:
        warm_up(idx, retriever, model, report)
    return assistant
