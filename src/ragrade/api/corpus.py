"""Loading and chunking documents, and building the retrieval index (``ragrade corpus``, ``chunk``, ``index``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike, settings_layer
from ragrade.errors import ConfigError, DataError

if TYPE_CHECKING:
    from ragrade.api.built_index import BuiltIndex
    from ragrade.api.types import ChunkedDocuments, LoadedCorpus
    from ragrade.corpus.load import CorpusConfig
    from ragrade.corpus.types import Chunk, Document
    from ragrade.progress import ProgressFn
    from ragrade.retrieval.index import IndexConfig


def load_corpus(
    paths: Sequence[PathLike] | PathLike = (),
    *,
    demo: bool = False,
    demo_limit: int | None = None,
    demo_topics: Sequence[str] | None = None,
    config: CorpusConfig | None = None,
    out: PathLike | None = None,
    warn: Callable[[str], None] | None = None,
    **settings: Any,
) -> LoadedCorpus:
    """Load documents from files and folders, or the demo corpus (``ragrade corpus``).

    ``settings`` are :class:`~ragrade.corpus.load.CorpusConfig` fields (``text_field``, ``drop_patterns``,
    ``min_chars``, ...) over ``config`` when given. Skipped files are counted in one warning
    (:mod:`warnings`), or given one by one to ``warn``. Writes the documents JSONL file ``out`` when given
    (as ``ragrade corpus --out``). DataError when no document is usable. Returns the documents (a list) with
    the load summary as ``.summary`` (documents, characters, formats, skipped files by reason, ...).
    """
    from ragrade.api.types import LoadedCorpus
    from ragrade.config import build_config
    from ragrade.corpus.load import CorpusConfig
    from ragrade.corpus.load import load_corpus as _load

    sources = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    if demo == bool(sources):
        raise ConfigError("give paths or demo=True, not both (and not neither)")
    cfg = build_config(CorpusConfig, settings_layer(config), settings, source="corpus settings")
    header: dict[str, Any] = {"config": cfg.model_dump()}
    if demo:
        from ragrade.corpus.demo import demo_load_report

        report, header["demo"] = demo_load_report(demo_limit, list(demo_topics) if demo_topics else None)
    else:
        report = _load(sources, cfg)
    if warn is None:
        _warn_skipped(report.skipped, report.warnings)
    else:
        for line in report.skip_lines():  # one line per reason met more than three times
            warn(line)
        for where, note in report.warnings:
            warn(f"{where}: {note}")
    summary = report.checked_summary(", ".join(sources) or "the demo corpus")
    if out is not None:
        from ragrade.corpus.files import write_documents

        write_documents(out, report.documents, meta={**header, "summary": summary})
    return LoadedCorpus(list(report.documents), summary, Path(out) if out is not None else None)


def _warn_skipped(skipped: Sequence[tuple[str, str]], notes: Sequence[tuple[str, str]]) -> None:
    import warnings

    if skipped:
        first = "; ".join(f"{where}: {why}" for where, why in skipped[:3])
        warnings.warn(
            f"ragrade: skipped {len(skipped)} file(s) ({first}{', ...' if len(skipped) > 3 else ''})", stacklevel=3
        )
    for where, note in notes:
        warnings.warn(f"ragrade: {where}: {note}", stacklevel=3)


def chunk(
    docs: Sequence[Document] | PathLike,
    *,
    strategy: str = "recursive",
    size: int = 200,
    overlap: int = 20,
    min_size: int = 10,
    tokenizer: str = "minilm",
    out: PathLike | None = None,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> ChunkedDocuments:
    """Split documents (objects or a documents JSONL file) into chunks (``ragrade chunk``).

    Sizes are in tokens; ``options`` are strategy options (semantic: ``threshold``, ``buffer``, ``embedder``).
    Writes the chunks JSONL file ``out`` when given. ``progress(n)`` is called with the documents done per
    batch. Returns the chunks (a list) with the summary written in the file's header as ``.summary``
    (strategy, params, token and character statistics, oversize chunks).
    """
    from ragrade.api.types import ChunkedDocuments
    from ragrade.corpus.chunk import chunk_documents, create_chunker, summarize_chunks
    from ragrade.corpus.files import read_documents, write_chunks

    chunker = create_chunker(strategy, size=size, overlap=overlap, tokenizer=tokenizer, min_size=min_size, **options)
    documents = read_documents(docs) if isinstance(docs, (str, Path)) else list(docs)
    if not documents:
        raise DataError(f"{docs}: no documents to chunk" if isinstance(docs, (str, Path)) else "no documents to chunk")
    chunks = chunk_documents(documents, chunker, progress=progress)
    summary: dict[str, Any] = {
        "strategy": chunker.strategy,
        "params": chunker.describe(),
        **summarize_chunks(chunks, len(documents)),
    }
    if out is not None:
        source = str(docs) if isinstance(docs, (str, Path)) else None
        write_chunks(out, chunks, chunker=chunker, meta={"documents": source, "summary": summary})
    return ChunkedDocuments(chunks, summary, Path(out) if out is not None else None)


def build_index(
    source: Sequence[Chunk] | Sequence[Document] | PathLike,
    out: PathLike,
    *,
    config: IndexConfig | None = None,
    progress: ProgressFn | None = None,
    **settings: Any,
) -> BuiltIndex:
    """Build (or rebuild) the retrieval index folder ``out`` (``ragrade index``) and return it opened.

    ``source``: chunks, documents (chunked with ``strategy``/``size``/``overlap``), or a JSONL file of
    either. ``settings`` are :class:`~ragrade.retrieval.index.IndexConfig` fields: ``embedder`` (default
    minilm), ``dense`` (False: BM25 only), ``store``, ``bm25={"stemmer": ...}``, ... Writes the chunks,
    the BM25 index, the dense vectors and a manifest under ``out``; embeddings are cached.
    ``progress(what, done, total)`` follows the build. Returns the opened index with the build's statistics
    as ``.stats`` (chunks, documents, embedded and cached vectors, seconds).
    """
    from ragrade.api.built_index import BuiltIndex
    from ragrade.config import build_config
    from ragrade.retrieval.index import IndexConfig, load_index
    from ragrade.retrieval.index import build_index as _build

    cfg = build_config(IndexConfig, settings_layer(config), settings, source="index settings")
    if cfg.dense and cfg.store:
        from ragrade.registry import lookup

        lookup("vector_store", cfg.store)  # a bad store fails now, not after the embedding
    stats = _build(source, out, cfg, progress=progress)
    return BuiltIndex(load_index(out), stats)
