"""Opening a retriever from the settings a verb takes: its options, and the query transform and post-processing
chain around it (``ragrade search``, ``ask`` and ``retrieval-eval``, and the Python API).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError

if TYPE_CHECKING:
    from ragrade.llm.base import LLM
    from ragrade.retrieval.base import Retriever
    from ragrade.retrieval.index import Index
    from ragrade.retrieval.transforms import RetrievalPipeline


def retriever_options(
    spec: str,
    *,
    embedder: str | None = None,
    store: str | None = None,
    reranker: str | None = None,
    fusion: str | None = None,
    rrf_k: float | None = None,
) -> dict[str, Any]:
    """The options of retriever ``spec`` that apply to it (``Index.retriever(spec, **options)``).

    ``embedder`` and ``store`` for dense, hybrid and rerank; ``reranker`` (a cross-encoder folder) for rerank;
    ``fusion`` and ``rrf_k`` for hybrid only (ConfigError elsewhere).
    """
    kw: dict[str, Any] = {}
    name = spec.split("(", 1)[0].strip()
    if name in ("dense", "hybrid", "rerank"):
        if embedder:
            kw["embedder"] = embedder
        if store:
            kw["store"] = store
    if name == "rerank" and reranker:
        kw["model"] = reranker
    if name == "hybrid":
        if fusion:
            kw["fusion"] = fusion
        if rrf_k is not None:
            kw["rrf_k"] = rrf_k
    elif fusion or rrf_k is not None:
        raise ConfigError("$fusion and $rrf_k apply to the hybrid retriever only")
    return kw


def single_value(value: str | None, setting: str) -> str:
    """One query transform or post-processing chain (``none`` when not given); a comma list is a grid's.
    ``setting`` names it in the error (``$query``)."""
    value = (value or "none").strip()
    if not value or "," in value:
        raise ConfigError(f"{setting} takes one value here (a grid is for exam take, qa answer and run)")
    return value


def retrieval_pipeline(
    index: Index,
    retriever: Retriever,
    query: str | None,
    post: str | None,
    llm: LLM | None,
    reranker: str | None,
    setting: str,
) -> Retriever | RetrievalPipeline:
    """``retriever`` itself, or a RetrievalPipeline with the query transform and the post-processing chain.

    ``llm`` rewrites queries and reranks or compresses passages where the transform needs one (``setting``
    names where it comes from in an error); ``reranker``: the cross-encoder folder of ``rerank``.
    """
    q, p = single_value(query, "$query"), single_value(post, "$post")
    if q == "none" and p == "none":
        return retriever
    from ragrade.retrieval.transforms import build_pipeline, check_transforms

    check_transforms(q, p, llm is not None, setting)  # names and the LLM, before anything loads
    options = {"rerank": {"model": reranker}} if reranker else {}
    return build_pipeline(index, retriever, q, p, llm=llm, options=options, setting=setting)


__all__ = ["retrieval_pipeline", "retriever_options", "single_value"]
