"""CLI verbs of the evaluation sweep: ``ragrade exam take`` and ``ragrade compare``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ragrade.cli.common import LOADING, command_progress, echo_json
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
)
from ragrade.errors import ConfigError


def take(
    ctx: typer.Context,
    exam: Annotated[Path, typer.Argument(help="Exam file (JSONL) from `ragrade exam generate`.")],
    out: RunDirOption,
    config: ConfigOption = None,
    index: IndexOption = None,
    retrievers: RetrieversOption = None,
    llm: str | None = typer.Option(None, "--llm", help="Comma list of PROVIDER/MODEL (e.g. offline/student)."),
    icl: IclOption = None,
    k: KOption = None,
    chunkers: ChunkersOption = None,
    prompt: list[str] | None = typer.Option(None, "--prompt", help="[NAME=]FILE prompt template, repeatable."),
    method: str | None = typer.Option(None, "--method", help="auto, loglikelihood or generate (comma list)."),
    score: str | None = typer.Option(
        None, "--score", help="Log-likelihood normalisation: auto, per_char, per_token, sum."
    ),
    target: str | None = typer.Option(None, "--target", help="Score the candidate 'text' or its 'letter'."),
    query: QueryOption = None,
    post: PostOption = None,
    transform_llm: TransformLlmOption = None,
    external: ExternalOption = None,
    seed: SeedOption = None,
    icl_pool: IclPoolOption = None,
    limit: LimitOption = None,
    shard_size: ShardSizeOption = None,
    executor: ExecutorOption = None,
    ray_address: str | None = typer.Option(None, "--ray-address", help="Address of an existing Ray cluster."),
    ray_workers: int | None = typer.Option(None, "--ray-workers", min=1, help="Ray actors (default: the CPUs)."),
    llm_base_url: LlmBaseUrlOption = None,
    concurrency: ConcurrencyOption = None,
    no_cache: NoCacheOption = False,
    timeout: TimeoutOption = None,
    max_retries: MaxRetriesOption = None,
    max_failed: MaxFailedOption = None,
    overwrite: bool = typer.Option(False, "--overwrite", help="Discard a previous run in --out instead of resuming."),
    no_samples: bool = typer.Option(
        False, "--no-samples", help="Do not write samples.jsonl (every request sent and its raw reply)."
    ),
    adaptive: bool = typer.Option(
        False, "--adaptive", help="Adaptive, IRT-driven run: ask only informative questions, stop when known."
    ),
    budget: int | None = typer.Option(None, "--budget", help="Adaptive: at most N LLM requests in all."),
    target_se: float | None = typer.Option(
        None, "--target-se", help="Adaptive: stop a pipeline at this ability standard error (default 0.2)."
    ),
    calibration: Path | None = typer.Option(
        None, "--calibration", help="Adaptive: irt.json of an earlier run on the same exam (item parameters)."
    ),
    as_json: JsonOption = False,
) -> None:
    """Let every pipeline of the grid take the exam; resumable; writes a run directory.

    A failed LLM request is missing (never wrong); rerunning the command asks only the failed ones again.
    """
    from ragrade.run.sweep import run_sweep

    if not exam.is_file():
        raise ConfigError(f"{exam}: exam file not found")
    cfg = grid_config(ctx.params)  # the grid flags above, over the --config file
    if adaptive or cfg.adaptive.enabled:
        from ragrade.cli.adaptive import take_adaptive

        flags = {"budget": budget, "target_se": target_se, "calibration": str(calibration) if calibration else None}
        take_adaptive(exam, cfg, flags, out, overwrite=overwrite, as_json=as_json, config=config)
        _offline_exam_note(exam)
        return
    if budget is not None or target_se is not None or calibration is not None:
        raise ConfigError("--budget, --target-se and --calibration apply to adaptive runs; add --adaptive")
    with command_progress("exam take", aggregate=True, status=LOADING) as shown:
        result = run_sweep(
            exam, cfg, out, overwrite=overwrite, progress=shown.advance, config_files=[str(config)] if config else []
        )
    _print_summary(result.summary, as_json, result.run_dir, result.n_new_rows)
    _offline_exam_note(exam)
    check_grid_failures(result.responses, max_failed)


def _offline_exam_note(exam: Path) -> None:
    """The offline-exam note (stderr) when the exam's header says the offline cloze generator wrote it."""
    from ragrade.cli.exam import offline_exam_note
    from ragrade.exam.files import read_exam

    header, _ = read_exam(exam)
    offline_exam_note(header.meta if header else None)


def _print_summary(summary: Any, as_json: bool, run_dir: Path, added: int) -> None:
    cols = ["pipeline", "n", "accuracy", "ci_low", "ci_high", "n_errors", "n_parse_failures"]
    cols += [c for c in ("decision_rule", "acc_sum", "acc_per_char", "method", "ll_source") if c in summary]
    if as_json:
        records = summary[cols].astype(object).where(summary[cols].notna(), None).to_dict(orient="records")
        echo_json({"run_dir": str(run_dir), "new_rows": added, "pipelines": records})
        return
    width = max(len(str(p)) for p in summary["pipeline"])
    typer.echo(f"{'pipeline':<{width}}  {'n':>5}  {'acc':>6}  95% CI           failed  parse-fail  scored by")
    for r in summary.to_dict(orient="records"):
        acc = (
            f"{r['accuracy']:6.1%}  [{r['ci_low']:5.1%}, {r['ci_high']:5.1%}]"
            if r["n"]
            else f"{'-':>6}  {'(no answer)':<15}"
        )
        typer.echo(
            f"{r['pipeline']:<{width}}  {r['n']:>5}  {acc}  {r['n_errors']:>6}  {r['n_parse_failures']:>10}  "
            + scored_by(r)
        )
    typer.echo(decision_line(summary))
    failed = int(summary["n_errors"].sum())
    typer.echo(f"run directory: {run_dir} ({added} new rows" + (f"; {failed} failed in all)" if failed else ")"))
    if int(summary["n_errors"].sum()):
        typer.echo("(n counts answered questions; failed requests are missing, not wrong: rerun to ask them again)")
    warn_mixed_scoring(summary)


def scored_by(row: Any) -> str:
    """How a pipeline was scored, e.g. ``loglikelihood/forced-token`` or ``generate`` (``/mixed`` when it changed)."""
    method = str(row.get("method") or "none")
    source = row.get("ll_source")
    if not isinstance(source, str) or not source:
        return method
    return f"{method}/{'mixed' if source.startswith('mixed') else source}"


def decision_line(summary: Any) -> str:
    """The line naming the rule that decided the headline accuracy (and where the other rule's accuracy is)."""
    from ragrade.run.summary import RULE_NAMES

    named = (r for v in summary.get("decision_rule", []) for r in str(v).split("+"))
    rules = list(dict.fromkeys(r for r in named if r not in ("none", "nan")))
    if not rules:
        return "accuracy: no question was answered"
    text = "accuracy decided by " + "; ".join(RULE_NAMES.get(r, r) for r in rules)
    if any(r in ("per_char", "sum", "per_token") for r in rules):
        text += " (summary.csv has both: acc_per_char = acc_norm, acc_sum = acc)"
    return text


def warn_mixed_scoring(summary: Any) -> None:
    """A warning line on stderr per pipeline whose log-likelihoods were obtained in different ways."""
    for r in summary.to_dict(orient="records"):
        source = r.get("ll_source")
        if isinstance(source, str) and source.startswith("mixed"):
            counts = source.removeprefix("mixed: ")
            typer.echo(
                f"ragrade: warning: {r['pipeline']}: the scoring method changed part-way ({counts} rows); "
                "its accuracy mixes them",
                err=True,
            )


def compare(
    run_dir: Path = typer.Argument(..., help="Run directory of `ragrade exam take`."),
    a: str | None = typer.Argument(None, help="Pipeline id or a unique part of it."),
    b: str | None = typer.Argument(None, help="Pipeline id or a unique part of it."),
    all_pairs: bool = typer.Option(
        False, "--all", help="Compare the top distinct pipelines pairwise (identical twins are skipped, named)."
    ),
    top: int = typer.Option(5, "--top", min=2, help="How many top pipelines --all compares."),
    correction: str = typer.Option("holm", "--correction", help="holm, bonferroni, bh or none (with --all)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the verdicts."),
    n_boot: int = typer.Option(2000, "--n-boot", min=1, help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    out: Path | None = typer.Option(
        None, "--out", help="JSON file of the comparisons (default: RUN_DIR/comparisons.json, read by the report)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Paired comparison of pipelines: accuracy difference, bootstrap CI, McNemar exact p-value."""
    from ragrade.io import now_iso
    from ragrade.run.compare import (
        COMPARISONS_VERSION,
        compare_pair,
        interval_text,
        resolve_pipeline,
        verdicts,
        write_comparisons,
    )
    from ragrade.run.summary import read_responses
    from ragrade.stats import adjust_pvalues

    if correction not in ("holm", "bonferroni", "bh", "none"):
        raise ConfigError(f"unknown correction '{correction}'; valid: holm, bonferroni, bh, none")
    if not 0 < alpha < 1 or n_boot < 1 or top < 2:
        raise ConfigError("need 0 < --alpha < 1, --n-boot >= 1 and --top >= 2")
    if all_pairs:
        if a or b:
            raise ConfigError("give either two pipelines or --all, not both")
        result = verdicts(run_dir, top=top, correction=correction, alpha=alpha, n_boot=n_boot, seed=seed)
    else:
        if not (a and b):
            raise ConfigError("name two pipelines (ids or unique parts of ids), or use --all")
        df = read_responses(run_dir)
        ids = list(dict.fromkeys(str(p) for p in df["pipeline"]))
        pa_, pb_ = resolve_pipeline(a, ids), resolve_pipeline(b, ids)
        if pa_ == pb_:
            raise ConfigError(f"'{a}' and '{b}' name the same pipeline")
        comp = compare_pair(df, pa_, pb_, n_boot=n_boot, seed=seed, alpha=alpha)
        comp.correction = "none"
        comp.p_adjusted = adjust_pvalues([comp.p_value], "none")[0]
        result = {
            "version": COMPARISONS_VERSION,
            "created": now_iso(),
            "pipelines": [pa_, pb_],
            "correction": "none",
            "alpha": alpha,
            "n_boot": n_boot,
            "seed": seed,
            "comparisons": [comp.to_dict()],
        }
    if out is None and run_dir.is_dir():
        from ragrade.run.compare import COMPARISONS_FILE

        out = run_dir / COMPARISONS_FILE
    if out is not None:
        write_comparisons(out, result)
    if as_json:
        echo_json(result)
        return
    for c in result["comparisons"]:
        typer.echo(f"A: {c['a']}  ({c['accuracy_a']:.1%})")
        typer.echo(f"B: {c['b']}  ({c['accuracy_b']:.1%})")
        adj = f", adjusted ({c['correction']}) {c['p_adjusted']:.4g}" if c["correction"] != "none" else ""
        typer.echo(
            f"   difference A-B {c['difference']:+.1%}  {interval_text(c)}  "
            f"n={c['n']}  discordant {c['a_only']}/{c['b_only']}  McNemar p={c['p_value']:.4g}{adj}  "
            f"-> {c['verdict']}" + (" (by the adjusted p)" if c["correction"] != "none" else "")
        )
    for twin, same in (result.get("identical") or {}).items():
        typer.echo(f"(skipped {twin}: it answered every question exactly like {same})")
    if not result["comparisons"]:
        typer.echo("fewer than two pipelines: nothing to compare")
    if out is not None:
        typer.echo(f"comparisons written to {out}")


def register(app: typer.Typer) -> None:
    """Add ``compare`` to ``app`` and ``take`` to the exam group."""
    from ragrade.cli.exam import exam_app

    exam_app.command("take")(take)
    app.command("compare")(compare)
