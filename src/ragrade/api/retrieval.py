"""Using an index: evaluating its retrievers and answering from it (``ragrade retrieval-eval``, ``ask``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragrade.api._common import PathLike

if TYPE_CHECKING:
    from ragrade.llm.options import LLMOptions
    from ragrade.retrieval.ask import Assistant
    from ragrade.retrieval.evaluate import RetrievalEvaluation
    from ragrade.retrieval.index import Index


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
    rewrites = single_value(query, "--query") != "none" or single_value(post, "--post") != "none"
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
    pipeline = retrieval_pipeline(idx, ret, query, post, tx_llm, reranker, "--transform-llm or --llm")
    assistant = Assistant(pipeline, model, k=k, prompt=prompt, chunks=idx.chunk, headings=headings)
    if report is not None:
        warm_up(idx, retriever, model, report)
    return assistant
