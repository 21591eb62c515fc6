"""CLI verbs of the robust stage: ``ragrade robust build|run|table``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ragrade.cli.llm_flags import (
    ConcurrencyOption,
    LlmBaseUrlOption,
    MaxRetriesOption,
    NoCacheOption,
    TimeoutOption,
    llm_flag_layer,
)
from ragrade.llm.failures import MAX_FAILED_HELP

if TYPE_CHECKING:
    from ragrade.robust.run import ModelRun

robust_app = typer.Typer(help="Robustness testbeds (noise, negative rejection, integration, counterfactual).",
                         no_args_is_help=True)


def _phrases(value: str | None, option: str) -> list[str] | None:
    """A phrase list from ``a|b|c`` or ``@FILE`` (one phrase per line)."""
    from ragrade.errors import ConfigError

    if value is None:
        return None
    if value.startswith("@"):
        path = Path(value[1:])
        if not path.exists():
            raise ConfigError(f"{option}: file {path} not found")
        items = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        items = [p.strip() for p in value.split("|") if p.strip()]
    if not items:
        raise ConfigError(f"{option} needs at least one phrase")
    return items


def _ratios(value: str | None) -> list[float] | None:
    from ragrade.cli.common import split_list
    from ragrade.errors import ConfigError

    items = split_list(value, "--noise-ratios")
    if items is None:
        return None
    try:
        return [float(x) for x in items]
    except ValueError as exc:
        raise ConfigError(f"--noise-ratios must be numbers, got '{value}'") from exc


@robust_app.command("run")
def run_cmd(
    data: Path = typer.Argument(..., help="RGB-shaped JSONL (original data or `ragrade robust build` output)."),
    testbed: str = typer.Option(..., "--testbed",
                                 help="noise | negative | integration | counterfactual (or any registered testbed)"),
    llm: str | None = typer.Option(
        None, "--llm", help="Required (here or in the config's \\[robust] table): the PROVIDER/MODEL answering, "
        "e.g. offline/extractive or openai/llama3.1; comma-separate several for one table."),
    out: Path | None = typer.Option(None, "--out", help="Output directory."),
    llm_base_url: LlmBaseUrlOption = None,
    noise_ratios: str | None = typer.Option(None, "--noise-ratios", help="e.g. 0,0.2,0.4,0.6,0.8"),
    docs: int | None = typer.Option(None, "--docs", help="Documents per question (default 5)."),
    lang: str | None = typer.Option(None, "--lang", help="en | zh | auto (default: from the questions)."),
    scoring: str | None = typer.Option(None, "--scoring", help="default | rgb (the original scorer's rules)."),
    construction: str | None = typer.Option(None, "--construction",
                                            help="ragrade | rgb (the original document selection)."),
    shortfall: str | None = typer.Option(None, "--shortfall", help="pad | skip, when a document pool is short."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of document order (default 0)."),
    correct_ratio: float | None = typer.Option(None, "--correct-ratio", min=0.0, max=1.0,
                                               help="Counterfactual: share of uncorrupted positives."),
    min_positives: int | None = typer.Option(
        None, "--min-positives", min=0, help="Leave out (as skipped) questions with fewer supporting passages "
        "than this, so every ratio really has its noise share (default 0: keep all)."),
    closed_book: bool | None = typer.Option(None, "--closed-book/--no-closed-book",
                                            help="Counterfactual: also ask without documents (Acc)."),
    judge: str | None = typer.Option(None, "--judge", help="PROVIDER/MODEL of the Rej*/ED* judge."),
    judge_base_url: str | None = typer.Option(None, "--judge-base-url", help="Judge server URL."),
    prompts: Path | None = typer.Option(None, "--prompts",
                                            help="TOML/JSON overriding the prompts."),
    rejection_phrases: str | None = typer.Option(None, "--rejection-phrases",
                                                 help="'a|b|c' or @FILE: refusal phrases (replace the defaults)."),
    error_phrases: str | None = typer.Option(None, "--error-phrases",
                                             help="'a|b|c' or @FILE: error-report phrases (replace the defaults)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="Answer length limit (default 256)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N questions."),
    no_cache: NoCacheOption = False,
    concurrency: ConcurrencyOption = None,
    timeout: TimeoutOption = None,
    max_retries: MaxRetriesOption = None,
    max_failed: float | None = typer.Option(None, "--max-failed", help=MAX_FAILED_HELP),
    config: Path | None = typer.Option(None, "--config", help="TOML with a \\[robust] table of these options."),
    as_json: bool = typer.Option(False, "--json", help="Print metrics as JSON instead of the table."),
) -> None:
    """Run a testbed and write results.jsonl, metrics.json and table.csv (resumes an interrupted run)."""
    from ragrade import api
    from ragrade.cli.common import LOADING, command_progress, output_path, split_list
    from ragrade.config import build_config, load_toml
    from ragrade.errors import ConfigError
    from ragrade.robust.run import RobustRunConfig

    file_layer: dict[str, Any] = {}
    if config is not None:
        from ragrade.config_paths import resolve_section

        table = load_toml(config).get("robust", {})
        file_layer = dict(resolve_section(table, config, paths=("data", "out", "prompts"), llms=("llm", "judge")))
    flags: dict[str, Any] = {
        "data": data, "testbed": testbed, "llm": split_list(llm, "--llm"), "out": output_path(out),
        "noise_ratios": _ratios(noise_ratios), "docs": docs, "lang": lang, "scoring": scoring,
        "construction": construction, "shortfall": shortfall, "seed": seed, "correct_ratio": correct_ratio,
        "min_positives": min_positives, "closed_book": closed_book, "judge": judge, "judge_base_url": judge_base_url,
        "prompts": prompts,
        "rejection_phrases": _phrases(rejection_phrases, "--rejection-phrases"),
        "error_phrases": _phrases(error_phrases, "--error-phrases"), "max_tokens": max_tokens, "limit": limit,
        "llm_options": llm_flag_layer({"llm_base_url": llm_base_url, "concurrency": concurrency, "timeout": timeout,
                                       "max_retries": max_retries, "no_cache": no_cache}),
    }
    if not flags["llm"] and not file_layer.get("llm"):
        raise ConfigError("robust run needs --llm PROVIDER/MODEL (e.g. --llm offline/extractive or openai/MODEL)")
    cfg = build_config(RobustRunConfig, file_layer, flags, source="robust run options")
    with command_progress(f"robust {cfg.testbed}", status=LOADING) as shown:
        api.run_testbed(cfg.data, cfg.testbed, cfg.llm, cfg.out, config=cfg, max_failed=max_failed,
                        progress=shown.update, warn=lambda msg: typer.echo(f"ragrade: warning: {msg}", err=True),
                        show=lambda runs: _print_runs(runs, as_json))  # printed before failed requests raise


def _print_runs(runs: list[ModelRun], as_json: bool) -> None:
    from ragrade.cli.common import echo_json
    from ragrade.robust.metrics import FLAGGED_MEANING
    from ragrade.robust.table import build_table, render_table

    if as_json:
        echo_json([r.metrics for r in runs])
        return
    typer.echo(render_table(build_table([r.metrics for r in runs])))
    for r in runs:
        m = r.metrics
        typer.echo(f"{r.model}: n={m['n']} failed={m['failed']} (missing) skipped={m['skipped']} "
                   f"flagged={m['flagged']} generated={r.generated} resumed={r.resumed} -> {r.out_dir}")
        if m.get("untestable"):
            typer.echo(f"  untestable={m['untestable']}: fake answer equals the answer, left out of the metrics")
    if any(r.metrics.get("flagged") for r in runs):
        typer.echo(FLAGGED_MEANING)


@robust_app.command("build")
def build_cmd(
    out: Path = typer.Option(..., "--out", help="Output directory for base/integration/counterfactual JSONL."),
    index: Path = typer.Option(..., "--index", help="Index directory (ragrade retrieval index)."),
    exam: Path | None = typer.Option(None, "--exam", help="Exam JSONL (correct choice = answer)."),
    qa: Path | None = typer.Option(None, "--qa", help="Question/answer JSONL (question, answer, distractors)."),
    retriever: str = typer.Option("bm25", "--retriever", help="Retriever spec of the index for hard negatives."),
    k: int = typer.Option(30, "--k", min=1, help="Chunks retrieved per question."),
    max_positive: int = typer.Option(5, "--max-positive", min=0, help="Positive documents kept per question."),
    max_negative: int = typer.Option(10, "--max-negative", min=0, help="Noise documents kept per question."),
    max_questions: int | None = typer.Option(None, "--max-questions", min=1, help="Use only the first N questions."),
    min_positives: int = typer.Option(1, "--min-positives", min=1,
                                      help="Keep only questions with at least this many supporting passages "
                                      "(e.g. 5 for a noise testbed whose ratio 0 has no noise at 5 documents)."),
    lang: str = typer.Option("auto", "--lang", help="en | zh | auto (joins integration questions)."),
    seed: int = typer.Option(0, "--seed", help="Seed of integration pairing."),
) -> None:
    """Build robustness testbeds from your exam (or QA file) and index."""
    from ragrade import api
    from ragrade.cli.common import echo_json, output_path
    from ragrade.errors import ConfigError
    from ragrade.io import read_json_object

    if (exam is None) == (qa is None):
        raise ConfigError("give exactly one of --exam or --qa")
    paths = api.build_testbeds(output_path(out), index, exam=exam, qa=qa, retriever=retriever, k=k,
                               max_positive=max_positive, max_negative=max_negative, seed=seed, lang=lang,
                               max_questions=max_questions, min_positives=min_positives)
    rep = read_json_object(paths["report"], "a testbed build report")  # what the build wrote
    dropped = rep.get("dropped")
    echo_json({"questions": rep["questions"], "base": rep["base"], "integration": rep["integration"],
               "counterfactual": rep["counterfactual"], "dropped": len(dropped) if isinstance(dropped, list) else 0,
               "files": paths})


@robust_app.command("table")
def table_cmd(
    runs: list[Path] = typer.Argument(..., help="Run directories or metrics.json files (one testbed)."),
    out: Path | None = typer.Option(None, "--out", help="Write the table as CSV here."),
) -> None:
    """Combine runs into one paper-shaped table (one row per model, one column per noise ratio)."""
    from ragrade.cli.common import output_path
    from ragrade.robust.table import build_table, load_run_metrics, render_table, write_table

    metrics = [m for r in runs for m in load_run_metrics(r)]
    table = build_table(metrics)
    out = output_path(out)  # `ragrade --dry-run`: the run's temporary folder
    if out is not None:
        write_table(table, out)
    typer.echo(render_table(table))


def register(app: typer.Typer) -> None:
    """Add the ``robust`` group to ``app``."""
    app.add_typer(robust_app, name="robust")
