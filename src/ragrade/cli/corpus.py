"""CLI verbs of the corpus stage: ``ragrade corpus`` and ``ragrade chunk``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from ragrade.cli.common import check_out_file, echo_json, is_tty, output_path, split_list
from ragrade.cli.flags import with_flags
from ragrade.errors import ConfigError

MINILM_MAX_TOKENS = 256

CORPUS_HELP = (
    "Load documents from files and folders (or the built-in demo corpus) into a documents JSONL file.\n\n"
    "Folders are read recursively: .txt/.md/.rst, .html/.htm (main text only), .json/.jsonl records and .pdf. "
    "Text is cleaned: Unicode NFC, control characters removed, whitespace normalised, --drop-pattern lines "
    "removed.\n\n"
    "Documentation sites load as built: pages take their mkdocs.yml nav or Sphinx toctree titles, MkDocs "
    "snippets and reST/MyST includes are inlined (a missing file is warned), and theme templates, mkdocstrings "
    "':::' and autodoc blocks and {{ macro }} placeholders are left out and counted (\\[corpus] api_docstrings "
    "= true in --config fills API blocks from the installed package; templates = true loads templates).\n\n"
    "Unusable files (binary, not decodable, empty, too large, unsupported; JSON Schema and data files of a "
    "documentation site) are skipped and counted, with one warning each, or one line per reason with examples "
    "when a reason is met more than three times; the command fails (exit 2) when no document is usable."
)

CHUNK_HELP = (
    "Split a documents file into chunks.\n\n"
    "Sizes are in TOKENS of the bundled all-MiniLM-L6-v2 word-piece tokenizer (or --tokenizer), for every "
    "strategy: --size is the most tokens per chunk, --overlap the most tokens two consecutive chunks share. "
    "MiniLM embeds at most 256 tokens, so --size 200 --overlap 20 keeps every chunk whole for the default "
    "embedder.\n\n"
    "Strategies: token (windows cut between words); recursive (paragraph, line, sentence, word splits until "
    "pieces fit, then merged up to --size); sentence (whole sentences packed up to --size, CJK sentence ends "
    "included); semantic (breakpoints where the embedding similarity of consecutive sentences drops; "
    "--threshold, --buffer, --embedder).\n\n"
    "Chunks keep exact character offsets into the document; only whitespace between chunks is left out. "
    "A single word longer than --size becomes an 'oversize' chunk and is counted."
)


_JOB_ONLY_KEYS = ("paths", "demo", "demo_limit", "demo_topics")


def _read_config_section(path: Path | None, section: str) -> dict[str, Any]:
    if path is None:
        return {}
    from ragrade.config import load_toml

    data = load_toml(path)
    value = data.get(section, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: [{section}] must be a table")
    return value


def _meta_fields(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    out: list[str] = []
    for value in values:
        out.extend(split_list(value, "--meta-field") or [])
    return out


@dataclass(frozen=True, kw_only=True)
class CorpusFlags:
    """The options of ``ragrade corpus`` (``None``: not given, never overrides the config's \\[corpus] table)."""

    out: Annotated[Path, typer.Option("--out", "-o", help="Documents JSONL file to write.")]
    demo: Annotated[
        bool,
        typer.Option(
            "--demo", help="Build the demo corpus from the Python standard library's docstrings (no download)."
        ),
    ] = False
    demo_limit: Annotated[
        int | None, typer.Option("--demo-limit", min=1, help="Keep N demo documents, spread over topics.")
    ] = None
    demo_topics: Annotated[
        list[str] | None,
        typer.Option(
            "--demo-topics",
            help=(
                "Build the demo corpus from these standard-library modules/packages only (e.g. "
                "email,xml,asyncio); repeat or comma-separate."
            ),
        ),
    ] = None
    text_field: Annotated[
        str | None,
        typer.Option(
            "--text-field",
            help=("JSON field with the text (default: first of text, content, contents, body, page_content, ...)."),
        ),
    ] = None
    id_field: Annotated[
        str | None,
        typer.Option(
            "--id-field",
            help=(
                "JSON field with the document id (default: first of id, doc_id, docid, _id, uuid, key; else derived)."
            ),
        ),
    ] = None
    meta_field: Annotated[
        list[str] | None,
        typer.Option(
            "--meta-field",
            help=("JSON field(s) kept as metadata; repeat or comma-separate (default: all other fields)."),
        ),
    ] = None
    drop_pattern: Annotated[
        list[str] | None,
        typer.Option("--drop-pattern", help="Regular expression; lines matching it are removed (repeatable)."),
    ] = None
    max_bytes: Annotated[
        int | None, typer.Option("--max-bytes", min=1, help="Skip files larger than this (default 64 MiB).")
    ] = None
    min_chars: Annotated[
        int | None,
        typer.Option("--min-chars", min=1, help="Skip documents shorter than this after cleaning (default 1)."),
    ] = None
    no_dedupe: Annotated[
        bool, typer.Option("--no-dedupe", help="Keep documents whose text repeats an earlier one.")
    ] = False
    api_docstrings: Annotated[
        bool,
        typer.Option(
            "--api-docstrings",
            help=(
                "Fill mkdocstrings ':::' blocks and autodoc directives from the installed "
                "package's docstrings where it imports (runs the package's import code; no "
                "network, no install)."
            ),
        ),
    ] = False
    templates: Annotated[
        bool,
        typer.Option(
            "--templates", help="Load theme templates (Jinja, .html under overrides/ or _templates/) as documents."
        ),
    ] = False
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML file with a \\[corpus] table of these options.")
    ] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False

    def layer(self) -> dict[str, Any]:
        """The CLI layer of the corpus config (None means the flag was not given)."""
        return {
            "text_field": self.text_field,
            "id_field": self.id_field,
            "meta_fields": _meta_fields(self.meta_field),
            "drop_patterns": list(self.drop_pattern) if self.drop_pattern else None,
            "max_bytes": self.max_bytes,
            "min_chars": self.min_chars,
            "dedupe": False if self.no_dedupe else None,
            "api_docstrings": self.api_docstrings or None,
            "templates": self.templates or None,
        }


@with_flags(CorpusFlags)
def corpus_cmd(
    paths: list[Path] | None = typer.Argument(
        None, help="Files or folders to load (folders recursively).", show_default=False
    ),
    *,
    flags: CorpusFlags,
) -> None:
    """Load documents into a documents JSONL file."""
    from ragrade import api
    from ragrade.config import build_config
    from ragrade.corpus.load import CorpusConfig

    paths = paths or []
    demo = flags.demo
    _check_corpus_sources(paths, demo, flags.demo_limit)
    out = check_out_file(output_path(flags.out))  # `ragrade --dry-run`: the run's temporary folder
    topics = [t for value in flags.demo_topics or [] for t in split_list(value, "--demo-topics") or []] or None
    if topics is not None and not demo:
        raise ConfigError("--demo-topics needs --demo")
    section = _read_config_section(flags.config, "corpus")
    for key in _JOB_ONLY_KEYS:  # a job config's [corpus] also says where documents come from (arguments here)
        section.pop(key, None)
    cfg = build_config(CorpusConfig, section, flags.layer(), source="corpus options")
    docs = api.load_corpus(
        [] if demo else list(paths), demo=demo, demo_limit=flags.demo_limit, demo_topics=topics, config=cfg, out=out,
        warn=lambda message: typer.echo(f"ragrade: warning: {message}", err=True),
    )  # fmt: skip
    _show_corpus({**docs.summary, "out": str(out)}, out, flags.as_json)


def _check_corpus_sources(paths: list[Path], demo: bool, demo_limit: int | None) -> None:
    """ConfigError unless exactly one of PATH arguments and --demo is given (and --demo-limit only with --demo)."""
    if demo and paths:
        raise ConfigError("give PATH arguments or --demo, not both")
    if not demo and not paths:
        raise ConfigError("give at least one PATH (file or folder) or --demo")
    if demo_limit is not None and not demo:
        raise ConfigError("--demo-limit needs --demo")


def _show_corpus(summary: dict[str, Any], out: Path, as_json: bool) -> None:
    """Print the load summary (as JSON with ``--json``)."""
    if as_json:
        echo_json(summary)
        return
    _print_corpus_summary(summary, out)


def _print_corpus_summary(summary: dict[str, Any], out: Path) -> None:
    from ragrade.corpus.load import left_out_label

    formats = ", ".join(f"{k} {v}" for k, v in summary["by_format"].items())
    typer.echo(f"loaded {summary['documents']:,} documents ({summary['characters']:,} characters; {formats}) -> {out}")
    reasons = ", ".join(f"{k} {v}" for k, v in summary["skipped_by_reason"].items())
    typer.echo(f"skipped {summary['skipped']:,}: {reasons}" if summary["skipped"] else "skipped 0")
    if summary["hidden_ignored"]:
        typer.echo(f"ignored {summary['hidden_ignored']:,} hidden files or folders")
    if summary["assets_ignored"]:
        assets = summary["assets_ignored"]
        kinds = ", ".join(f"{ext} {n:,}" for ext, n in assets.items())
        typer.echo(f"ignored {sum(assets.values()):,} images, stylesheets, scripts and other assets ({kinds})")
    if summary["lines_dropped"]:
        typer.echo(f"dropped {summary['lines_dropped']:,} lines matching --drop-pattern")
    for kind, n in summary.get("left_out", {}).items():
        typer.echo(f"left out {n:,} {left_out_label(kind)}")


@dataclass(frozen=True, kw_only=True)
class ChunkFlags:
    """The options of ``ragrade chunk``."""

    out: Annotated[Path, typer.Option("--out", "-o", help="Chunks JSONL file to write.")]
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="token, recursive, sentence or semantic.")] = (
        "recursive"
    )
    size: Annotated[int, typer.Option("--size", min=1, help="Most tokens per chunk.")] = 200
    overlap: Annotated[
        int, typer.Option("--overlap", min=0, help="Most tokens shared by consecutive chunks (< --size).")
    ] = 20
    min_size: Annotated[
        int,
        typer.Option(
            "--min-size", min=0, help="Merge fragments under this many tokens (a lone heading) into a neighbour."
        ),
    ] = 10
    tokenizer: Annotated[
        str,
        typer.Option(
            "--tokenizer", help="'minilm' (bundled) or a path to a tokenizer.json or a model folder holding one."
        ),
    ] = "minilm"
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold", help="semantic: percentile of sentence distances above which a chunk ends (default 95)."
        ),
    ] = None
    buffer: Annotated[
        int | None,
        typer.Option(
            "--buffer", help=("semantic: neighbouring sentences embedded with each sentence on each side (default 1).")
        ),
    ] = None
    embedder: Annotated[
        str | None, typer.Option("--embedder", help="semantic: embedder spec (default: the bundled MiniLM).")
    ] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False


@with_flags(ChunkFlags)
def chunk_cmd(
    docs: Path = typer.Argument(..., help="Documents JSONL file (from `ragrade corpus`)."),
    *,
    flags: ChunkFlags,
) -> None:
    """Split documents into chunks."""
    extra: dict[str, Any] = {
        k: v
        for k, v in {"threshold": flags.threshold, "buffer": flags.buffer, "embedder": flags.embedder}.items()
        if v is not None
    }
    out = check_out_file(output_path(flags.out))  # `ragrade --dry-run`: the run's temporary folder
    strategy, size, overlap, tokenizer = flags.strategy, flags.size, flags.overlap, flags.tokenizer
    if size > MINILM_MAX_TOKENS and tokenizer == "minilm" and not flags.as_json:
        typer.echo(
            f"ragrade: note: the MiniLM embedder reads at most {MINILM_MAX_TOKENS} tokens; longer "
            "chunks are truncated when embedded",
            err=True,
        )
    settings = {
        "strategy": strategy,
        "size": size,
        "overlap": overlap,
        "min_size": flags.min_size,
        "tokenizer": tokenizer,
    }
    summary = {**_chunk_with_progress(docs, out, settings, extra), "out": str(out)}
    if flags.as_json:
        echo_json(summary)
        return
    tok, chars = summary["tokens"], summary["chars"]
    typer.echo(
        f"{summary['chunks']:,} chunks from {summary['documents']:,} documents ({strategy}, size "
        f"{size} tokens, overlap {overlap}) -> {out}"
    )
    typer.echo(
        f"tokens per chunk: mean {tok['mean']:.1f}, min {tok['min']}, max {tok['max']}; characters: "
        f"mean {chars['mean']:.1f}, min {chars['min']}, max {chars['max']}"
    )
    typer.echo(f"oversize chunks (one word longer than --size): {summary['oversize']}")
    if summary.get("documents_without_chunks"):
        typer.echo(f"documents without chunks (blank text): {summary['documents_without_chunks']}")


def _chunk_with_progress(docs: Path, out: Path, settings: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """Chunk through :func:`ragrade.api.chunk`, with a progress bar on a terminal; the chunks' summary."""
    from ragrade import api

    if not is_tty():
        return api.chunk(docs, out=out, **settings, **options).summary
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task("chunking")

        def advance(n: int) -> None:
            progress.advance(task, n)

        return api.chunk(docs, out=out, progress=advance, **settings, **options).summary


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to ``app``."""
    app.command("corpus", help=CORPUS_HELP)(corpus_cmd)
    app.command("chunk", help=CHUNK_HELP)(chunk_cmd)
