"""CLI verbs for free-text answers: ``ragrade qa generate``, ``ragrade qa answer`` and ``ragrade judge``.

Heavy imports (torch, models, the LLM layer) happen inside the commands so
that ``ragrade --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragrade.cli.common import (
    LOADING,
    check_out_file,
    command_progress,
    dry_run_requested,
    echo_json,
    split_list,
)
from ragrade.cli.pipelines import (
    ChunkersOption,
    ConcurrencyOption,
    ConfigOption,
    ExecutorOption,
    ExternalOption,
    IclOption,
    IclPoolOption,
    IndexOption,
    JsonOption,
    KOption,
    LimitOption,
    LlmBaseUrlOption,
    MaxFailedOption,
    MaxRetriesOption,
    NoCacheOption,
    PostOption,
    QueryOption,
    RetrieversOption,
    RunDirOption,
    SeedOption,
    ShardSizeOption,
    TimeoutOption,
    TransformLlmOption,
    check_grid_failures,
    grid_config,
    parse_pairs,
)
from ragrade.errors import ConfigError, DataError
from ragrade.llm.failures import MAX_FAILED_HELP, FailureTally

qa_app = typer.Typer(
    name="qa", help="Synthetic question/answer datasets and free-text answers from pipelines.", no_args_is_help=True
)


def _config_layer(path: Path | None, table: str) -> dict[str, Any]:
    if path is None:
        return {}
    from ragrade.config import load_toml
    from ragrade.config_paths import resolve_section

    data = load_toml(path)
    layer = data.get(table, data)
    if not isinstance(layer, dict):
        raise ConfigError(f"{path}: [{table}] must be a table")
    return dict(resolve_section(layer, path, llms=("llm",), maps=("prompts",)))


def judge(
    answers: Path = typer.Argument(..., help="Answers JSONL (or a `qa answer` run directory)."),
    metrics: str | None = typer.Option(
        None,
        "--metrics",
        "-m",
        help="Comma list of: correctness, faithfulness, relevancy, claims, bertscore, exact.",
    ),
    llm: str | None = typer.Option(
        None, "--llm", help="Judge model, PROVIDER/MODEL (offline/judge: the offline claims baseline)."
    ),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", envvar="OPENAI_BASE_URL", help="Base URL of an OpenAI-compatible server."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output directory (default RUN_DIR/judge)."),
    field: list[str] | None = typer.Option(
        None,
        "--field",
        help="Map a field: TARGET=SOURCE (repeatable), targets id, query, answer, contexts, reference, config, error.",
    ),
    samples: int | None = typer.Option(None, "--samples", min=1, help="Judge samples per answer (self-consistency)."),
    temperature: float | None = typer.Option(None, "--temperature", min=0.0, help="Judge temperature (default 0)."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of judge sampling and bootstrap."),
    screen_top: int | None = typer.Option(
        None, "--screen-top", help="Rank configurations by BERTScore, LLM-judge only the top K."
    ),
    prompt: list[str] | None = typer.Option(None, "--prompt", help="Prompt file for a judge: METRIC=PATH."),
    bertscore_model: str | None = typer.Option(None, "--bertscore-model", help="Local encoder folder or 'minilm'."),
    bertscore_layer: int | None = typer.Option(None, "--bertscore-layer", min=0, help="Encoder layer (default: last)."),
    bertscore_idf: bool | None = typer.Option(None, "--bertscore-idf/--no-bertscore-idf", help="Idf weighting."),
    pass_threshold: float | None = typer.Option(None, "--pass-threshold", help="Correctness counted as a pass."),
    batch_size: int | None = typer.Option(None, "--batch-size", min=1, help="Answers per saved batch."),
    concurrency: int | None = typer.Option(None, "--concurrency", min=1, help="Judge requests in flight."),
    max_retries: int | None = typer.Option(None, "--max-retries", min=0, help="Retries of a failed judge request."),
    timeout: float | None = typer.Option(None, "--timeout", min=0.1, help="Seconds per judge request."),
    max_failed: float | None = typer.Option(None, "--max-failed", help=MAX_FAILED_HELP),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the LLM response cache."),
    config: Path | None = typer.Option(None, "--config", help="TOML file (a \\[judge] table)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full summary as JSON."),
) -> None:
    """Score free-text answers (ours or any system's) with LLM judges, BERTScore and exact match.

    Human labels (`ragrade label`) correct the judges' means: `ragrade judge calibrate SCORES --human LABELS`.
    """
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
        "dry_run": dry_run_requested() or None,
    }
    cfg = build_config(JudgeRunConfig, _config_layer(config, "judge"), flags, source="judge options")
    if out is None:
        if not answers.is_dir():
            raise ConfigError("--out is required when ANSWERS is a file")
        out = answers / "judge"
    with command_progress("judge", status=LOADING) as shown:
        summary = run_judging(answers, out, cfg, progress=shown.update)
    if as_json:
        echo_json(summary)
    else:
        _print_summary(summary, out)
    _check_judge_failures(summary, max_failed)


def _check_judge_failures(summary: dict[str, Any], max_failed: float | None) -> None:
    """Exit 2/3 when judge requests failed beyond the threshold (per configuration and metric)."""
    from ragrade.judge.run import check_judge_failures

    check_judge_failures(summary, max_failed)


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    for config, metrics in summary["configs"].items():
        parts = []
        for metric, s in metrics.items():
            st = s["statistics"][0]
            val = "n/a" if st["value"] is None else f"{st['value']:.3f}"
            ci = "" if st["ci_low"] is None else f" [{st['ci_low']:.3f}, {st['ci_high']:.3f}]"
            counted = ("n_unparsed", "n_failed", "n_skipped", "n_abstained")
            extra = "".join(f" {k[2:]}={s[k]}" for k in counted if s.get(k))
            parts.append(f"{metric}.{st['statistic']}={val}{ci} (n={st['n_used']}{extra})")
        typer.echo(f"{config}: " + "; ".join(parts))
    scr = summary.get("screening")
    if scr:
        typer.echo(f"screening by {scr['metric']}: judged {', '.join(scr['selected']) or '(none)'}")
    for metric, desc in (summary.get("judges") or {}).items():
        if desc.get("baseline") and metric == "claims":
            typer.echo(f"{metric}: {desc.get('method')}; not an LLM judge")
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
    min_chars: int = typer.Option(120, "--min-chars", min=0, help="Skip chunks shorter than this."),
    max_tokens: int = typer.Option(
        256, "--max-tokens", min=16, help="Reply budget per triplet (a cut-off reply is counted unparsed)."
    ),
    prompt: Path | None = typer.Option(
        None, "--prompt", exists=True, dir_okay=False, help="Prompt file with {passage} (and {source})."
    ),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", envvar="OPENAI_BASE_URL", help="Base URL of an OpenAI-compatible server."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Bypass the LLM response cache."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per LLM request attempt."),
    max_retries: int = typer.Option(5, "--max-retries", help="Retries of a failed LLM request."),
    max_failed: float | None = typer.Option(None, "--max-failed", help=MAX_FAILED_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the funnel as JSON."),
) -> None:
    """Generate synthetic (question, reference answer, context) triplets from chunks."""
    from ragrade.qa.files import write_qa, write_qrels
    from ragrade.qa.generate import OFFLINE, QAGenConfig, generate_qa

    check_out_file(out)
    chunks = _load_chunks(source)
    cfg = QAGenConfig(
        n=n, seed=seed, min_chunk_chars=min_chars, prompt_file=str(prompt) if prompt else None, max_tokens=max_tokens
    )
    model = None
    if llm != OFFLINE and llm.startswith("offline/"):
        raise ConfigError(f"--llm {llm} answers questions and writes none; use --llm {OFFLINE} (the offline "
                          "extractive generator) or a real model")
    if llm != OFFLINE:
        from ragrade.llm import create_llm

        model = create_llm(
            llm,
            base_url=llm_base_url,
            cache=not no_cache,
            timeout=timeout,
            max_retries=max_retries,
            dry_run=dry_run_requested(),
        )
    with command_progress("qa generate") as shown:
        items, funnel = generate_qa(chunks, model, cfg, progress=shown.update)
    tally = FailureTally()
    tally.add_backend(model)
    for i in range(funnel.sampled):
        tally.add("qa generation", None, (funnel.first_error or "failed") if i < funnel.failed else None)
    if not items and funnel.failed:
        tally.check(_RESUME, 0.0)
    gen = "offline-extractive (baseline)" if model is None else llm
    if not items:
        counts = ", ".join(f"{k}={v}" for k, v in funnel.to_dict().items() if k != "rejected")
        raise DataError(
            f"{gen} wrote no usable triplet from {len(chunks)} chunks ({counts}); nothing written to {out}"
        )
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
    tally.check(_RESUME, max_failed, what="generation")


_RESUME = "rerun the same command: received answers come from the response cache, only failed requests are sent"


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
    timeout: TimeoutOption = None,
    max_retries: MaxRetriesOption = None,
    max_failed: MaxFailedOption = None,
    as_json: JsonOption = False,
) -> None:
    """Let every pipeline of the grid answer the QA questions in free text; resumable; writes a run directory.

    A failed LLM request is missing (never wrong); rerunning the command asks only the failed ones again.
    """
    from ragrade.qa.run import run_qa_answers

    generation, grid = generation_settings(max_tokens, temperature)  # options first, then files
    if not qa.is_file():
        raise ConfigError(f"{qa}: QA file not found")
    cfg = grid_config(ctx.params)  # the grid flags above, over the --config file
    if grid:
        cfg = cfg.model_copy(update={"grid": cfg.grid.model_copy(update=grid)})
    with command_progress("qa answer", aggregate=True, status=LOADING) as shown:
        result = run_qa_answers(qa, cfg, out, generation=generation, progress=shown.advance)
    if as_json:
        echo_json({"run_dir": str(result.run_dir), "new_rows": result.n_new_rows, "summary": result.summary})
        check_grid_failures(result.rows, max_failed)
        return
    for row in result.summary:
        em = "n/a" if row.get("exact") is None else f"{row['exact']:.3f}"
        f1 = "n/a" if row.get("token_f1") is None else f"{row['token_f1']:.3f}"
        hit = "n/a" if row.get("hit_rate") is None else f"{row['hit_rate']:.3f}"
        typer.echo(
            f"{row['pipeline']}: exact={em} token_f1={f1} hit={hit} failed={row['n_errors']} (missing) "
            f"refusals={row['n_refusals']} (n={row['n']}, answered {row['n_answered']})"
        )
    typer.echo(
        f"wrote {result.run_dir}/answers.jsonl ({result.n_new_rows} new); judge it with "
        f"`ragrade judge {result.run_dir} --metrics ...`"
    )
    check_grid_failures(result.rows, max_failed)


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
    """Add ``qa`` (generate, answer) to ``app`` (``judge`` is registered by :mod:`ragrade.cli.calibration`)."""
    app.add_typer(qa_app, name="qa")
