"""CLI verbs for free-text answers: ``ragrade qa generate``, ``ragrade qa answer`` and ``ragrade judge``.

Heavy imports (torch, models, the LLM layer) happen inside the commands so
that ``ragrade --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragrade.cli.common import echo_json, is_tty, split_list
from ragrade.cli.pipelines import (
    ChunkersOption,
    ConcurrencyOption,
    ConfigOption,
    ExecutorOption,
    ExternalOption,
    GridProgress,
    IclOption,
    IclPoolOption,
    IndexOption,
    JsonOption,
    KOption,
    LimitOption,
    LlmBaseUrlOption,
    NoCacheOption,
    PostOption,
    QueryOption,
    RetrieversOption,
    RunDirOption,
    SeedOption,
    ShardSizeOption,
    TransformLlmOption,
    grid_config,
    parse_pairs,
)
from ragrade.errors import ConfigError

qa_app = typer.Typer(
    name="qa", help="Synthetic question/answer datasets and free-text answers from pipelines.", no_args_is_help=True
)


def _config_layer(path: Path | None, table: str) -> dict[str, Any]:
    if path is None:
        return {}
    from ragrade.config import load_toml

    data = load_toml(path)
    layer = data.get(table, data)
    if not isinstance(layer, dict):
        raise ConfigError(f"{path}: [{table}] must be a table")
    return layer


class _Bar:
    """A rich progress bar per metric, shown only on a terminal."""

    def __init__(self) -> None:
        from rich.progress import Progress

        self.progress = Progress(transient=True)
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _Bar:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def __call__(self, name: str, done: int, total: int) -> None:
        if name not in self.tasks:
            self.tasks[name] = self.progress.add_task(name, total=total)
        self.progress.update(self.tasks[name], completed=done, total=total)


def judge(
    answers: Path = typer.Argument(..., help="Answers JSONL (or a `qa answer` run directory)."),
    metrics: str | None = typer.Option(
        None, "--metrics", "-m", help="Comma list of: correctness, faithfulness, relevancy, bertscore, exact."
    ),
    llm: str | None = typer.Option(None, "--llm", help="Judge model, PROVIDER/MODEL."),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", envvar="OPENAI_BASE_URL", help="Base URL of an OpenAI-compatible server."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output directory (default RUN_DIR/judge)."),
    field: list[str] | None = typer.Option(
        None,
        "--field",
        help="Map a field: TARGET=SOURCE (repeatable), targets id, query, answer, contexts, reference, config, error.",
    ),
    samples: int | None = typer.Option(None, "--samples", help="Judge samples per answer (self-consistency)."),
    temperature: float | None = typer.Option(None, "--temperature", help="Judge temperature (default 0)."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of judge sampling and bootstrap."),
    screen_top: int | None = typer.Option(
        None, "--screen-top", help="Rank configurations by BERTScore, LLM-judge only the top K."
    ),
    prompt: list[str] | None = typer.Option(None, "--prompt", help="Prompt file for a judge: METRIC=PATH."),
    bertscore_model: str | None = typer.Option(None, "--bertscore-model", help="Local encoder folder or 'minilm'."),
    bertscore_layer: int | None = typer.Option(None, "--bertscore-layer", help="Encoder layer (default: last)."),
    bertscore_idf: bool | None = typer.Option(None, "--bertscore-idf/--no-bertscore-idf", help="Idf weighting."),
    pass_threshold: float | None = typer.Option(None, "--pass-threshold", help="Correctness counted as a pass."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Answers per saved batch."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Judge requests in flight."),
    max_retries: int | None = typer.Option(None, "--max-retries", help="Retries of a failed judge request."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per judge request."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the LLM response cache."),
    config: Path | None = typer.Option(None, "--config", help="TOML file (a [judge] table)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full summary as JSON."),
) -> None:
    """Score free-text answers (ours or any system's) with LLM judges, BERTScore and exact match."""
    from ragrade.config import build_config
    from ragrade.judge.inputs import parse_field_map
    from ragrade.judge.run import JudgeRunConfig, run_judging

    flags: dict[str, Any] = {
        "metrics": split_list(metrics, "--metrics"),
        "llm": llm,
        "base_url": llm_base_url,
        "fields": parse_field_map(field) or None,
        "samples": samples,
        "temperature": temperature,
        "seed": seed,
        "screen_top": screen_top,
        "prompts": parse_pairs(prompt, "--prompt"),
        "bertscore_model": bertscore_model,
        "bertscore_layer": bertscore_layer,
        "bertscore_idf": bertscore_idf,
        "pass_threshold": pass_threshold,
        "batch_size": batch_size,
        "concurrency": concurrency,
        "max_retries": max_retries,
        "timeout": timeout,
        "cache": False if no_cache else None,
    }
    cfg = build_config(JudgeRunConfig, _config_layer(config, "judge"), flags, source="judge options")
    if out is None:
        if not answers.is_dir():
            raise ConfigError("--out is required when ANSWERS is a file")
        out = answers / "judge"
    if is_tty() and not as_json:
        with _Bar() as bar:
            summary = run_judging(answers, out, cfg, progress=bar)
    else:
        summary = run_judging(answers, out, cfg)
    if as_json:
        echo_json(summary)
        return
    _print_summary(summary, out)


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    for config, metrics in summary["configs"].items():
        parts = []
        for metric, s in metrics.items():
            st = s["statistics"][0]
            val = "n/a" if st["value"] is None else f"{st['value']:.3f}"
            ci = "" if st["ci_low"] is None else f" [{st['ci_low']:.3f}, {st['ci_high']:.3f}]"
            extra = "".join(f" {k[2:]}={s[k]}" for k in ("n_unparsed", "n_failed", "n_skipped") if s[k])
            parts.append(f"{metric}.{st['statistic']}={val}{ci} (n={st['n_used']}{extra})")
        typer.echo(f"{config}: " + "; ".join(parts))
    scr = summary.get("screening")
    if scr:
        typer.echo(f"screening by {scr['metric']}: judged {', '.join(scr['selected']) or '(none)'}")
    typer.echo(f"wrote {out}/scores.jsonl, summary.json, summary.csv, agreement.json")


def _load_chunks(path: Path) -> list[Any]:
    """Chunks from a chunks JSONL or an index directory."""
    if path.is_dir():
        from ragrade.retrieval.index import load_index  # type: ignore[import-not-found,unused-ignore]

        return list(load_index(path).chunks)
    if not path.is_file():
        raise ConfigError(f"{path}: no such chunks file or index directory")
    from ragrade.corpus.files import read_chunks

    return read_chunks(path)


@qa_app.command("generate")
def qa_generate(
    source: Path = typer.Argument(..., help="Chunks JSONL or an index directory."),
    n: int = typer.Option(50, "--n", help="Number of triplets."),
    llm: str = typer.Option(..., "--llm", help="PROVIDER/MODEL, or 'offline' for the extractive baseline."),
    out: Path = typer.Option(..., "--out", "-o", help="QA file to write (JSONL)."),
    qrels: Path | None = typer.Option(None, "--qrels", help="Also write the qrels view (query -> relevant ids)."),
    seed: int = typer.Option(0, "--seed", help="Seed of chunk sampling (and the LLM)."),
    min_chars: int = typer.Option(120, "--min-chars", help="Skip chunks shorter than this."),
    prompt: Path | None = typer.Option(None, "--prompt", help="Prompt file with {passage} (and {source})."),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", envvar="OPENAI_BASE_URL", help="Base URL of an OpenAI-compatible server."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the LLM response cache."),
    as_json: bool = typer.Option(False, "--json", help="Print the funnel as JSON."),
) -> None:
    """Generate synthetic (question, reference answer, context) triplets from chunks."""
    from ragrade.qa.files import write_qa, write_qrels
    from ragrade.qa.generate import OFFLINE, QAGenConfig, generate_qa

    chunks = _load_chunks(source)
    cfg = QAGenConfig(n=n, seed=seed, min_chunk_chars=min_chars, prompt_file=str(prompt) if prompt else None)
    model = None
    if llm != OFFLINE:
        from ragrade.llm import create_llm

        model = create_llm(llm, base_url=llm_base_url, cache=not no_cache)
    items, funnel = generate_qa(chunks, model, cfg)
    gen = "offline-extractive (baseline)" if model is None else llm
    write_qa(out, items, meta={"source": str(source), "generator": gen, "seed": seed, "funnel": funnel.to_dict()})
    if qrels is not None:
        write_qrels(qrels, items)
    report = {"written": len(items), "requested": n, "out": str(out), "generator": gen, "funnel": funnel.to_dict()}
    if as_json:
        echo_json(report)
    else:
        typer.echo(
            f"wrote {len(items)} of {n} requested triplets to {out} ({gen}); funnel: "
            + ", ".join(f"{k}={v}" for k, v in funnel.to_dict().items() if k != "rejected")
        )
        if len(items) < n:
            typer.echo(f"only {len(items)} usable triplets: too few eligible chunks or too many rejections", err=True)


@qa_app.command("answer")
def qa_answer(
    ctx: typer.Context,
    qa: Annotated[Path, typer.Argument(help="QA file from `ragrade qa generate`.")],
    out: RunDirOption,
    config: ConfigOption = None,
    index: IndexOption = None,
    retrievers: RetrieversOption = None,
    llm: str | None = typer.Option(None, "--llm", help="Comma list of PROVIDER/MODEL."),
    icl: IclOption = None,
    k: KOption = None,
    chunkers: ChunkersOption = None,
    prompt: list[str] | None = typer.Option(None, "--prompt", help="[NAME=]FILE answer template with {question}."),
    query: QueryOption = None,
    post: PostOption = None,
    transform_llm: TransformLlmOption = None,
    external: ExternalOption = None,
    seed: SeedOption = None,
    icl_pool: IclPoolOption = None,
    limit: LimitOption = None,
    shard_size: ShardSizeOption = None,
    executor: ExecutorOption = None,
    max_tokens: str = typer.Option(
        "256", "--max-tokens", help="Answer length budget; a comma list makes it a factor of the grid."
    ),
    temperature: str = typer.Option(
        "0", "--temperature", help="Sampling temperature; a comma list makes it a factor of the grid."
    ),
    llm_base_url: LlmBaseUrlOption = None,
    concurrency: ConcurrencyOption = None,
    no_cache: NoCacheOption = False,
    as_json: JsonOption = False,
) -> None:
    """Let every pipeline of the grid answer the QA questions in free text; resumable; writes a run directory."""
    from ragrade.qa.run import run_qa_answers

    if not qa.is_file():
        raise ConfigError(f"{qa}: QA file not found")
    cfg = grid_config(ctx.params)  # the grid flags above, over the --config file
    generation, grid = generation_settings(max_tokens, temperature)
    if grid:
        cfg = cfg.model_copy(update={"grid": cfg.grid.model_copy(update=grid)})
    with GridProgress(enabled=is_tty()) as bar:
        result = run_qa_answers(qa, cfg, out, generation=generation, progress=bar.update)
    if as_json:
        echo_json({"run_dir": str(result.run_dir), "new_rows": result.n_new_rows, "summary": result.summary})
        return
    for row in result.summary:
        em = "n/a" if row.get("exact") is None else f"{row['exact']:.3f}"
        f1 = "n/a" if row.get("token_f1") is None else f"{row['token_f1']:.3f}"
        hit = "n/a" if row.get("hit_rate") is None else f"{row['hit_rate']:.3f}"
        typer.echo(
            f"{row['pipeline']}: exact={em} token_f1={f1} hit={hit} errors={row['n_errors']} "
            f"refusals={row['n_refusals']} (n={row['n']})"
        )
    typer.echo(
        f"wrote {result.run_dir}/answers.jsonl ({result.n_new_rows} new); judge it with "
        f"`ragrade judge {result.run_dir} --metrics ...`"
    )


def generation_settings(max_tokens: str, temperature: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(run settings, grid axes)``: one value of --max-tokens / --temperature is a setting, several a factor."""
    from ragrade.cli.pipelines import parse_ints

    tokens = parse_ints(max_tokens, "--max-tokens") or [256]
    try:
        temps = [float(t) for t in split_list(temperature, "--temperature") or ["0"]]
    except ValueError as exc:
        raise ConfigError(f"--temperature expects numbers, got '{temperature}'") from exc
    if any(t <= 0 for t in tokens) or any(not 0 <= t <= 2 for t in temps):
        raise ConfigError("--max-tokens must be positive and --temperature between 0 and 2")
    generation: dict[str, Any] = {}
    grid: dict[str, Any] = {}
    if len(tokens) == 1:
        generation["max_tokens"] = tokens[0]
    else:
        grid["max_tokens"] = list(dict.fromkeys(tokens))
    if len(temps) == 1:
        generation["temperature"] = temps[0]
    else:
        grid["temperature"] = list(dict.fromkeys(temps))
    return generation, grid


def register(app: typer.Typer) -> None:
    """Add ``qa`` (generate, answer) and ``judge`` to ``app``."""
    app.add_typer(qa_app, name="qa")
    app.command("judge")(judge)
