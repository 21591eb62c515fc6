"""CLI verbs of the retrieval stage: ``index``, ``search``, ``ask``, ``retrieval-eval``.

Heavy modules (torch, bm25s, onnxruntime) are imported inside the commands so
that ``ragrade --help`` stays light.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragrade.cli.common import command_progress, echo_json, output_path, split_list
from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import (
    DeviceOption,
    DtypeOption,
    LlmBaseUrlOption,
    MaxRetriesOption,
    TimeoutOption,
    llm_layer,
)
from ragrade.errors import BackendError, ConfigError

if TYPE_CHECKING:
    from ragrade.llm.options import LLMOptions
    from ragrade.retrieval.ask import Assistant

RETRIEVER_HELP = "Retriever: bm25, dense, hybrid, rerank(<base>) (rerank = rerank(hybrid)), closed."


def _check_k(k: int) -> None:
    if k <= 0:
        raise ConfigError(f"-k must be a positive integer, got {k}")


def _open(index_dir: Path, spec: str, **opts: Any) -> Any:
    from ragrade.retrieval.index import load_index
    from ragrade.retrieval.setup import retriever_options

    idx = load_index(index_dir)
    return idx, idx.retriever(spec, **retriever_options(spec, **opts))


QUERY_HELP = "Query transform: none (default), hyde, multi-query, rm3."
POST_HELP = "Post-processing chain joined by '+': rerank, llm-rerank, mmr, threshold, compress, llm-compress."


def _llm_options(
    llm_base_url: str | None,
    *,
    timeout: float | None = None,
    max_retries: int | None = None,
    device: str | None = None,
    dtype: str | None = None,
) -> LLMOptions:
    """The LLM options of the LLM flags (over the defaults of LLMOptions; `ragrade --dry-run` included)."""
    from ragrade.config import build_config
    from ragrade.llm.options import LLMOptions

    layer = llm_layer(llm_base_url=llm_base_url, timeout=timeout, max_retries=max_retries, device=device, dtype=dtype)
    return build_config(LLMOptions, layer, source="LLM options")


def _transform_llm(spec: str | None, options: LLMOptions) -> Any:
    if not spec:
        return None
    from ragrade.llm import create_llm

    return create_llm(spec, options)


def index_cmd(
    input_path: Path = typer.Argument(..., metavar="DOCS_OR_CHUNKS", help="documents.jsonl or chunks.jsonl."),
    out: Path = typer.Option(..., "--out", "-o", help="Index directory to create or rebuild."),
    strategy: str = typer.Option(None, "--strategy", help="Chunker for documents input (token, recursive, ...)."),
    size: int = typer.Option(None, "--size", min=1, help="Chunk size (tokens)."),
    overlap: int = typer.Option(None, "--overlap", min=0, help="Chunk overlap (tokens)."),
    min_size: int = typer.Option(None, "--min-size", min=0, help="Merge chunks under this many tokens (default 10)."),
    embedder: str = typer.Option(None, "--embedder", help="minilm (default), minilm-st, st:PATH, openai:M@URL ..."),
    store: str = typer.Option(None, "--store", help="Vector store: exact (default), faiss, usearch, chroma, pgvector."),
    no_dense: bool = typer.Option(False, "--no-dense", help="Build BM25 only (no embeddings)."),
    headings: bool = typer.Option(
        False, "--headings", help="Index each chunk with its heading path (page > section) before its text."
    ),
    stemmer: str = typer.Option(None, "--stemmer", help="BM25 stemmer language or 'none' (default english)."),
    stopwords: str = typer.Option(None, "--stopwords", help="BM25 stopwords: en or none."),
    device: str = typer.Option(
        None, "--device", help="Local embedding model's device: auto (CUDA, else MPS, else CPU), cpu, cuda[:N], mps."
    ),
    config: Path = typer.Option(None, "--config", help="TOML file with an \\[index] table."),
    as_json: bool = typer.Option(False, "--json", help="Print the build statistics as JSON."),
) -> None:
    """Chunk (if given documents), embed (with the cache) and index a corpus for retrieval."""
    from ragrade import api
    from ragrade.config import build_config, load_toml
    from ragrade.config_paths import resolve_section
    from ragrade.retrieval.index import IndexConfig, IndexStats

    file_layer = (
        resolve_section(load_toml(config).get("index") or {}, config, embedders=("embedder",)) if config else {}
    )
    bm25_flags = {"stemmer": stemmer, "stopwords": stopwords}
    flags = {
        "strategy": strategy,
        "size": size,
        "overlap": overlap,
        "embedder": embedder,
        "store": store,
        "device": device,
        "dense": False if no_dense else None,
        "headings": True if headings else None,
        "bm25": {k: v for k, v in bm25_flags.items() if v is not None},
        "chunker_options": {"min_size": min_size} if min_size is not None else None,
    }
    cfg = build_config(IndexConfig, file_layer, flags, source="index options")
    built: list[IndexStats] = []
    with command_progress("index", status="reading the input ...") as shown:
        api.build_index(input_path, output_path(out), config=cfg, progress=shown.update, show=built.append)
    stats = built[0]
    if as_json:
        echo_json(stats.to_dict())
        return
    dense = (
        f"embedded: {stats.embedded}, cached: {stats.cached} ({stats.embedder}, store {stats.store})"
        if stats.embedder
        else "no dense vectors"
    )
    typer.echo(
        f"indexed {stats.chunks} chunks from {stats.documents} documents into {stats.out}; {dense}; "
        f"{stats.seconds:.1f}s"
    )


def search_cmd(
    index_dir: Path = typer.Argument(..., metavar="INDEX_DIR"),
    query: str = typer.Argument(..., help="The search query."),
    retriever: str = typer.Option("hybrid", "--retriever", "-r", help=RETRIEVER_HELP),
    k: int = typer.Option(5, "-k", "--k", help="Number of hits."),
    embedder: str = typer.Option(None, "--embedder", help="Query embedder (must match the index)."),
    store: str = typer.Option(None, "--store", help="Vector store backend to search (built on first use)."),
    reranker: str = typer.Option(None, "--reranker", help="Cross-encoder model folder for rerank."),
    fusion: str = typer.Option(None, "--fusion", help="Hybrid fusion: rrf (default) or weighted."),
    rrf_k: float = typer.Option(None, "--rrf-k", min=0.0, help="RRF constant (default 60)."),
    query_tx: str = typer.Option(None, "--query", help=QUERY_HELP),
    post: str = typer.Option(None, "--post", help=POST_HELP),
    transform_llm: str = typer.Option(None, "--transform-llm", help="PROVIDER/MODEL for hyde, multi-query, llm-*."),
    llm_base_url: LlmBaseUrlOption = None,
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON."),
) -> None:
    """Search an index and print the top-k chunks."""
    _check_k(k)
    if not query.strip():
        raise ConfigError("the query is empty")
    from ragrade.retrieval.setup import retrieval_pipeline, single_value

    single_value(query_tx, "--query")
    single_value(post, "--post")
    llm = _transform_llm(transform_llm, _llm_options(llm_base_url))  # a wrong model fails before the index loads
    idx, ret = _open(
        index_dir, retriever, embedder=embedder, store=store, reranker=reranker, fusion=fusion, rrf_k=rrf_k
    )
    ret = retrieval_pipeline(idx, ret, query_tx, post, llm, reranker, "--transform-llm")
    got = ret.run([query], k)[0] if hasattr(ret, "run") else None
    hits = got.hits if got is not None else ret.retrieve([query], k)[0]
    if got is not None and got.error:
        typer.echo(f"warning: {got.error}", err=True)
    if as_json:
        echo_json(
            {
                "query": query,
                "retriever": ret.name,
                "k": k,
                "searched": got.searched if got is not None else [query],
                "added_terms": got.added_terms if got is not None else [],
                "transform_error": got.error if got is not None else None,
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
                    for h in hits
                ],
            }
        )
        return
    if not hits:
        typer.echo("no hits")
    from ragrade.retrieval.passages import heading_line, shown_passages

    for h, shown in zip(hits, shown_passages(hits, idx.chunk), strict=True):
        text = " ".join(shown.split())  # a part of a split code block with its fences
        path = heading_line(idx.chunk(h.chunk_id))
        typer.echo(
            f"{h.rank:>2}. {h.score:8.4f}  {h.chunk_id}  {h.source or h.doc_id}" + (f"  [{path}]" if path else "")
        )
        typer.echo(f"    {text[:300] + ('...' if len(text) > 300 else '')}")


@dataclass(frozen=True)
class AskFlags:
    """The options of ``ragrade ask``."""

    retriever: Annotated[str, typer.Option("--retriever", "-r", help=RETRIEVER_HELP)] = "hybrid"
    k: Annotated[int, typer.Option("-k", "--k", help="Passages given to the LLM.")] = 5
    llm: Annotated[
        str | None, typer.Option("--llm", help="PROVIDER/MODEL; default: the offline extractive baseline.")
    ] = None
    llm_base_url: LlmBaseUrlOption = None
    prompt_file: Annotated[
        Path | None,
        typer.Option(
            "--prompt-file", exists=True, dir_okay=False, help="Prompt template with {question} and {passages}."
        ),
    ] = None
    embedder: Annotated[str | None, typer.Option("--embedder", help="Query embedder (must match the index).")] = None
    reranker: Annotated[str | None, typer.Option("--reranker", help="Cross-encoder model folder for rerank.")] = None
    timeout: TimeoutOption = None
    max_retries: MaxRetriesOption = None
    device: DeviceOption = None
    dtype: DtypeOption = None
    query_tx: Annotated[str | None, typer.Option("--query", help=QUERY_HELP)] = None
    post: Annotated[str | None, typer.Option("--post", help=POST_HELP)] = None
    transform_llm: Annotated[
        str | None,
        typer.Option("--transform-llm", help="PROVIDER/MODEL for hyde, multi-query, llm-* (default: --llm)."),
    ] = None
    headings: Annotated[
        bool,
        typer.Option("--headings", help="Show the LLM each passage's heading path (page > section) before its text."),
    ] = False
    as_json: Annotated[bool, typer.Option("--json", help="Print answers as JSON (one object per line).")] = False


@with_flags(AskFlags)
def ask_cmd(
    index_dir: Annotated[Path, typer.Argument(metavar="INDEX_DIR")],
    question: Annotated[str | None, typer.Argument(help="The question; omit it for an interactive session.")] = None,
    *,
    flags: AskFlags,
) -> None:
    """Answer questions from an index, citing chunk ids and source files.

    Only the \\[n] markers the model wrote count, for passages it was given: a reply that repeats the prompt
    (as a base model's does) is cut to the model's own words, with a note, and one with none is a failed answer.

    Without a question it reads one per line from standard input (or asks interactively), loading the models
    once; what it loads and how long that took goes to standard error.
    """
    _check_k(flags.k)
    if question is not None and not question.strip():
        raise ConfigError("the question is empty")
    assistant = _open_assistant(index_dir, flags, one_question=question is not None)
    _answer_all(assistant, question, flags.as_json)


def _open_assistant(index_dir: Path, flags: AskFlags, *, one_question: bool) -> Assistant:
    """The assistant of ``ragrade ask``, its models loaded now (and a hint when that was slow for one question)."""
    import time

    from ragrade import api

    options = _llm_options(
        flags.llm_base_url, timeout=flags.timeout, max_retries=flags.max_retries, device=flags.device, dtype=flags.dtype
    )
    started = time.monotonic()
    assistant = api.open_assistant(
        index_dir, retriever=flags.retriever, k=flags.k, llm=flags.llm, llm_options=options,
        prompt_file=flags.prompt_file, embedder=flags.embedder, reranker=flags.reranker, query=flags.query_tx,
        post=flags.post, transform_llm=flags.transform_llm, headings=flags.headings,
        report=lambda line: typer.echo(f"ragrade: {line}", err=True),
    )  # fmt: skip
    loaded = time.monotonic() - started
    if one_question and loaded > 5:
        typer.echo(
            f"ragrade: loading took {loaded:.0f} s; for several questions keep it loaded: one per line on "
            "standard input, or `ragrade ask INDEX` alone for an interactive session",
            err=True,
        )
    return assistant


def _answer_all(assistant: Assistant, question: str | None, as_json: bool) -> None:
    """Answer ``question``, else every line of standard input (asking for each on a terminal)."""
    import json

    from ragrade.retrieval.ask import render

    model = assistant.llm
    failed = 0

    def answer(q: str) -> None:
        nonlocal failed
        ans = assistant.ask(q)
        failed += ans.error is not None
        typer.echo(json.dumps(ans.to_dict(), ensure_ascii=False) if as_json else render(ans))
        fatal = getattr(getattr(model, "limiter", None), "fatal", None)
        if fatal:  # the server rejected the key or is unreachable: asking more questions cannot help
            raise BackendError(f"{model.name}: {fatal}")

    if question is not None:
        answer(question)
        _raise_if_failed(failed)
        return
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            typer.echo("question> ", nl=False, err=True)
        line = sys.stdin.readline()
        if not line or not line.strip():
            break
        answer(line.strip())
        if not as_json:
            typer.echo("")
    _raise_if_failed(failed)


def _raise_if_failed(failed: int) -> None:
    if failed:
        raise BackendError(f"{failed} question(s) got no answer from the LLM (the error is printed above)")


def _empty_note(n_all: int, n_relevant: int, n_skipped: int, mode: str) -> str:
    """How many queries have no relevant id and what was done with them."""
    n_empty = n_all - n_relevant
    if mode != "skip":
        return f"{n_empty} of {n_all} queries have no relevant id, scored 0 on every metric (ranx's convention)"
    done = [f"{n_skipped} with no judged id skipped (left out of every mean)"] if n_skipped else []
    if n_empty - n_skipped:
        done.append(f"{n_empty - n_skipped} judged only not relevant scored 0 (kept in the means)")
    return (
        f"{n_empty} of {n_all} queries have no relevant id: {', '.join(done)}; "
        "trec_eval's convention, --empty-queries zero scores them all 0"
    )


def eval_cmd(
    index_dir: Path = typer.Argument(..., metavar="INDEX_DIR"),
    qrels: Path = typer.Argument(..., metavar="QRELS", help="Qrels JSONL (query + relevant ids) or an exam file."),
    retriever: str = typer.Option("bm25,dense,hybrid", "--retriever", "-r", help="Comma-separated retrievers."),
    k: int = typer.Option(10, "-k", "--k", min=1, help="Cut-off."),
    level: str = typer.Option("chunk", "--level", help="Relevance of chunk ids or doc ids."),
    embedder: str = typer.Option(None, "--embedder", help="Query embedder (must match the index)."),
    reranker: str = typer.Option(None, "--reranker", help="Cross-encoder model folder for rerank."),
    n_boot: int = typer.Option(2000, "--n-boot", min=1, help="Bootstrap resamples for the intervals."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    out: Path = typer.Option(None, "--out", help="Also write the results (with per-query rows) as JSON."),
    as_json: bool = typer.Option(False, "--json", help="Print results as JSON."),
    empty_queries: str = typer.Option(
        "skip",
        "--empty-queries",
        help="Queries with no relevant id: skip (as trec_eval: one with no judged id is left out of the means "
        "and counted, one judged only not relevant scores 0) or zero (both score 0 on every metric, as ranx).",
    ),
) -> None:
    """Hit rate@k, recall@k, MRR and nDCG@k with bootstrap 95% intervals for each retriever."""
    from ragrade import api
    from ragrade.retrieval.metrics import METRICS

    specs = split_list(retriever, "--retriever") or []
    ev = api.evaluate_retrieval(
        index_dir, qrels, specs, k=k, level=level, embedder=embedder, reranker=reranker, n_boot=n_boot, seed=seed,
        empty_queries=empty_queries, out=output_path(out),  # `ragrade --dry-run`: the run's temporary folder
    )  # fmt: skip
    n_relevant = ev.n_queries - ev.n_empty_queries
    note = _empty_note(ev.n_queries, n_relevant, ev.n_skipped_queries, ev.empty_queries)
    if ev.n_empty_queries:
        typer.echo(f"ragrade: warning: {note}", err=True)
    empty = {
        "n_empty_queries": ev.n_empty_queries,
        "n_skipped_queries": ev.n_skipped_queries,
        "empty_queries": ev.empty_queries,
    }
    if as_json:
        results = [r.to_dict() for r in ev.reports]
        echo_json({"k": k, "level": ev.level, "n_queries": ev.n_queries, **empty, "results": results})
        return
    shown = f" ({note})" if ev.n_empty_queries else ""
    typer.echo(f"{ev.n_queries} queries{shown}, k={k}, {level}-level relevance, 95% bootstrap intervals")
    header = f"{'retriever':<22}" + "".join(f"{m + '@' + str(k):>24}" for m in METRICS)
    typer.echo(header)
    for r in ev.reports:
        cells = "".join(f"{r.metrics[m].mean:>8.3f} [{r.metrics[m].low:.3f},{r.metrics[m].high:.3f}]" for m in METRICS)
        typer.echo(f"{r.retriever:<22}{cells}")


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to ``app``."""
    app.command("index")(index_cmd)
    app.command("search")(search_cmd)
    app.command("ask")(ask_cmd)
    app.command("retrieval-eval")(eval_cmd)
