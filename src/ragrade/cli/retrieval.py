"""CLI verbs of the retrieval stage: ``index``, ``search``, ``ask``, ``retrieval-eval``.

Heavy modules (torch, bm25s, onnxruntime) are imported inside the commands so
that ``ragrade --help`` stays light.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragrade.cli.common import command_progress, echo_json, output_path, split_list
from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import (
    DeviceOption,
    DtypeOption,
    LlmBaseUrlOption,
    LLMFlags,
    MaxRetriesOption,
    TimeoutOption,
)
from ragrade.errors import BackendError, ConfigError

if TYPE_CHECKING:
    from ragrade.retrieval.ask import Assistant

RETRIEVER_HELP = "Retriever: bm25, dense, hybrid, rerank(<base>) (rerank = rerank(hybrid)), closed."


def _check_k(k: int) -> None:
    if k <= 0:
        raise ConfigError(f"-k must be a positive integer, got {k}")


QUERY_HELP = "Query transform: none (default), hyde, multi-query, rm3."
POST_HELP = "Post-processing chain joined by '+': rerank, llm-rerank, mmr, threshold, compress, llm-compress."


@dataclass(frozen=True, kw_only=True)
class IndexFlags:
    """The options of ``ragrade index`` (``None``: not given, never overrides the config's \\[index] table)."""

    out: Annotated[Path, typer.Option("--out", "-o", help="Index directory to create or rebuild.")]
    strategy: Annotated[
        str | None, typer.Option("--strategy", help="Chunker for documents input (token, recursive, ...).")
    ] = None
    size: Annotated[int | None, typer.Option("--size", min=1, help="Chunk size (tokens).")] = None
    overlap: Annotated[int | None, typer.Option("--overlap", min=0, help="Chunk overlap (tokens).")] = None
    min_size: Annotated[
        int | None, typer.Option("--min-size", min=0, help="Merge chunks under this many tokens (default 10).")
    ] = None
    embedder: Annotated[
        str | None, typer.Option("--embedder", help="minilm (default), minilm-st, st:PATH, openai:M@URL ...")
    ] = None
    store: Annotated[
        str | None, typer.Option("--store", help="Vector store: exact (default), faiss, usearch, chroma, pgvector.")
    ] = None
    no_dense: Annotated[bool, typer.Option("--no-dense", help="Build BM25 only (no embeddings).")] = False
    headings: Annotated[
        bool,
        typer.Option("--headings", help="Index each chunk with its heading path (page > section) before its text."),
    ] = False
    stemmer: Annotated[
        str | None, typer.Option("--stemmer", help="BM25 stemmer language or 'none' (default english).")
    ] = None
    stopwords: Annotated[str | None, typer.Option("--stopwords", help="BM25 stopwords: en or none.")] = None
    device: Annotated[
        str | None,
        typer.Option(
            "--device", help="Local embedding model's device: auto (CUDA, else MPS, else CPU), cpu, cuda[:N], mps."
        ),
    ] = None
    config: Annotated[Path | None, typer.Option("--config", help="TOML file with an \\[index] table.")] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print the build statistics as JSON.")] = False

    def layer(self) -> dict[str, object]:
        """The :class:`~ragrade.retrieval.index.IndexConfig` layer of these flags (over the config file's)."""
        bm25 = {"stemmer": self.stemmer, "stopwords": self.stopwords}
        return {
            "strategy": self.strategy,
            "size": self.size,
            "overlap": self.overlap,
            "embedder": self.embedder,
            "store": self.store,
            "device": self.device,
            "dense": False if self.no_dense else None,
            "headings": True if self.headings else None,
            "bm25": {k: v for k, v in bm25.items() if v is not None},
            "chunker_options": {"min_size": self.min_size} if self.min_size is not None else None,
        }


@with_flags(IndexFlags)
def index_cmd(
    input_path: Annotated[Path, typer.Argument(metavar="DOCS_OR_CHUNKS", help="documents.jsonl or chunks.jsonl.")],
    *,
    flags: IndexFlags,
) -> None:
    """Chunk (if given documents), embed (with the cache) and index a corpus for retrieval."""
    from ragrade import api
    from ragrade.config import build_config, load_toml
    from ragrade.config_paths import resolve_section
    from ragrade.retrieval.index import IndexConfig

    config = flags.config
    file_layer = (
        resolve_section(load_toml(config).get("index") or {}, config, embedders=("embedder",)) if config else {}
    )
    cfg = build_config(IndexConfig, file_layer, flags.layer(), source="index options")
    with command_progress("index", status="reading the input ...") as shown:
        stats = api.build_index(input_path, output_path(flags.out), config=cfg, progress=shown.update).stats
    if flags.as_json:
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


@dataclass(frozen=True)
class SearchFlags:
    """The options of ``ragrade search``."""

    retriever: Annotated[str, typer.Option("--retriever", "-r", help=RETRIEVER_HELP)] = "hybrid"
    k: Annotated[int, typer.Option("-k", "--k", help="Number of hits.")] = 5
    embedder: Annotated[str | None, typer.Option("--embedder", help="Query embedder (must match the index).")] = None
    store: Annotated[
        str | None, typer.Option("--store", help="Vector store backend to search (built on first use).")
    ] = None
    reranker: Annotated[str | None, typer.Option("--reranker", help="Cross-encoder model folder for rerank.")] = None
    fusion: Annotated[str | None, typer.Option("--fusion", help="Hybrid fusion: rrf (default) or weighted.")] = None
    rrf_k: Annotated[float | None, typer.Option("--rrf-k", min=0.0, help="RRF constant (default 60).")] = None
    query_tx: Annotated[str | None, typer.Option("--query", help=QUERY_HELP)] = None
    post: Annotated[str | None, typer.Option("--post", help=POST_HELP)] = None
    transform_llm: Annotated[
        str | None, typer.Option("--transform-llm", help="PROVIDER/MODEL for hyde, multi-query, llm-*.")
    ] = None
    llm_base_url: LlmBaseUrlOption = None
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON.")] = False


@with_flags(SearchFlags)
def search_cmd(
    index_dir: Annotated[Path, typer.Argument(metavar="INDEX_DIR")],
    query: Annotated[str, typer.Argument(help="The search query.")],
    *,
    flags: SearchFlags,
) -> None:
    """Search an index and print the top-k chunks."""
    from ragrade import api

    _check_k(flags.k)
    found = api.search_index(
        index_dir, query, retriever=flags.retriever, k=flags.k, embedder=flags.embedder, store=flags.store,
        reranker=flags.reranker, fusion=flags.fusion, rrf_k=flags.rrf_k, query_transform=flags.query_tx,
        post=flags.post, transform_llm=flags.transform_llm,
        llm_options=LLMFlags(llm_base_url=flags.llm_base_url).llm_options(),  # search offers one of the LLM flags
    )  # fmt: skip
    if found.transform_error:
        typer.echo(f"warning: {found.transform_error}", err=True)
    if flags.as_json:
        echo_json(found.to_dict())
        return
    if not found.hits:
        typer.echo("no hits")
    for h, shown, path in zip(found.hits, found.passages, found.headings, strict=True):
        text = " ".join(shown.split())  # a part of a split code block with its fences
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
    once; what it loads and how long that took goes to standard error. An LLM server that takes no connection
    is said there before the first question (exit 2); a question left without an answer exits 2 with its error.
    """
    _check_k(flags.k)
    if question is not None and not question.strip():
        raise ConfigError("the question is empty")
    if question is not None:  # before any model loads (Assistant.ask checks each question of standard input)
        from ragrade.schemas import MAX_QUESTION_CHARS, size_error

        too_long = size_error("the question", question.strip(), MAX_QUESTION_CHARS)
        if too_long is not None:
            raise ConfigError(too_long)
    assistant = _open_assistant(index_dir, flags, one_question=question is not None)
    _answer_all(assistant, question, flags.as_json)


def _open_assistant(index_dir: Path, flags: AskFlags, *, one_question: bool) -> Assistant:
    """The assistant of ``ragrade ask``, its models loaded now (and a hint when that was slow for one question)."""
    import time

    from ragrade import api

    options = LLMFlags(  # ask offers five of the LLM flags
        llm_base_url=flags.llm_base_url,
        timeout=flags.timeout,
        max_retries=flags.max_retries,
        device=flags.device,
        dtype=flags.dtype,
    ).llm_options()
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
    last: list[str] = []  # the last question's error, for the line on standard error

    def answer(q: str) -> None:
        nonlocal failed
        ans = assistant.ask(q)
        failed += ans.error is not None
        if ans.error is not None:
            last[:] = [ans.error]
        typer.echo(json.dumps(ans.to_dict(), ensure_ascii=False) if as_json else render(ans))
        fatal = getattr(getattr(model, "limiter", None), "fatal", None)
        if fatal:  # the server rejected the key or is unreachable: asking more questions cannot help
            raise BackendError(f"{model.name}: {fatal}")

    if question is not None:
        answer(question)
        _raise_if_failed(failed, last)
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
    _raise_if_failed(failed, last)


def _raise_if_failed(failed: int, last: list[str]) -> None:
    """BackendError (standard error) with the failure itself: the answer on standard output shows it too."""
    if failed:
        why = " ".join((last[0] if last else "unknown error").split())
        why = why if len(why) <= 300 else why[:297] + "..."
        raise BackendError(f"{failed} question(s) got no answer from the LLM (last error: {why})")


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


@dataclass(frozen=True)
class EvalFlags:
    """The options of ``ragrade retrieval-eval``."""

    retriever: Annotated[str, typer.Option("--retriever", "-r", help="Comma-separated retrievers.")] = (
        "bm25,dense,hybrid"
    )
    k: Annotated[int, typer.Option("-k", "--k", min=1, help="Cut-off.")] = 10
    level: Annotated[str, typer.Option("--level", help="Relevance of chunk ids or doc ids.")] = "chunk"
    embedder: Annotated[str | None, typer.Option("--embedder", help="Query embedder (must match the index).")] = None
    reranker: Annotated[str | None, typer.Option("--reranker", help="Cross-encoder model folder for rerank.")] = None
    n_boot: Annotated[int, typer.Option("--n-boot", min=1, help="Bootstrap resamples for the intervals.")] = 2000
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0
    out: Annotated[Path | None, typer.Option("--out", help="Also write the results (with per-query rows) as JSON.")] = (
        None
    )
    as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False
    empty_queries: Annotated[
        str,
        typer.Option(
            "--empty-queries",
            help="Queries with no relevant id: skip (as trec_eval: one with no judged id is left out of the means "
            "and counted, one judged only not relevant scores 0) or zero (both score 0 on every metric, as ranx).",
        ),
    ] = "skip"


@with_flags(EvalFlags)
def eval_cmd(
    index_dir: Annotated[Path, typer.Argument(metavar="INDEX_DIR")],
    qrels: Annotated[Path, typer.Argument(metavar="QRELS", help="Qrels JSONL (query + relevant ids) or an exam file.")],
    *,
    flags: EvalFlags,
) -> None:
    """Hit rate@k, recall@k, MRR and nDCG@k with bootstrap 95% intervals for each retriever."""
    from ragrade import api
    from ragrade.retrieval.metrics import METRICS

    k = flags.k
    specs = split_list(flags.retriever, "--retriever") or []
    ev = api.evaluate_retrieval(
        index_dir, qrels, specs, k=k, level=flags.level, embedder=flags.embedder, reranker=flags.reranker,
        n_boot=flags.n_boot, seed=flags.seed, empty_queries=flags.empty_queries,
        out=output_path(flags.out),  # `ragrade --dry-run`: the run's temporary folder
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
    if flags.as_json:
        results = [r.to_dict() for r in ev.reports]
        echo_json({"k": k, "level": ev.level, "n_queries": ev.n_queries, **empty, "results": results})
        return
    shown = f" ({note})" if ev.n_empty_queries else ""
    typer.echo(f"{ev.n_queries} queries{shown}, k={k}, {flags.level}-level relevance, 95% bootstrap intervals")
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
