"""CLI verbs of the evaluation sweep: ``ragrade exam take`` and ``ragrade compare``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ragrade.cli.common import echo_json, is_tty, split_list
from ragrade.errors import ConfigError


def _pairs(values: list[str] | None, option: str, *, default_label: bool) -> dict[str, str] | None:
    """Parse repeated ``NAME=VALUE`` options (``VALUE`` alone gets its folder/file stem as name)."""
    if not values:
        return None
    out: dict[str, str] = {}
    for raw in values:
        name, sep, value = raw.partition("=")
        if not sep:
            if not default_label:
                raise ConfigError(f"{option} expects NAME=VALUE, got '{raw}'")
            value = raw
            name = Path(raw.rstrip("/")).stem or raw
        name, value = name.strip(), value.strip()
        if not name or not value:
            raise ConfigError(f"{option} expects NAME=VALUE, got '{raw}'")
        if name in out:
            raise ConfigError(f"{option}: the name '{name}' is given twice")
        out[name] = value
    return out


def _ints(value: str | None, option: str) -> list[int] | None:
    items = split_list(value, option)
    if items is None:
        return None
    try:
        return [int(v) for v in items]
    except ValueError as exc:
        raise ConfigError(f"{option} expects integers, got '{value}'") from exc


def _prune(value: Any) -> Any:
    """Drop None values (not given) recursively, and tables left empty."""
    if isinstance(value, dict):
        out = {k: _prune(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in out.items() if v != {}}
    return value


def _flag_layer(**kw: Any) -> dict[str, Any]:
    """The config layer of the command-line flags (None = not given)."""
    grid = {
        "llm": split_list(kw["llm"], "--llm"),
        "retriever": split_list(kw["retrievers"], "--retrievers"),
        "k": _ints(kw["k"], "--k"),
        "icl": _ints(kw["icl"], "--icl"),
        "chunker": split_list(kw["chunkers"], "--chunkers"),
        "method": split_list(kw["method"], "--method"),
    }
    prompts = _pairs(kw["prompt"], "--prompt", default_label=True)
    if prompts:
        grid["prompt"] = list(prompts)
    llm_options = {
        "base_url": kw["llm_base_url"],
        "concurrency": kw["concurrency"],
        "cache": False if kw["no_cache"] else None,
    }
    return _prune(
        {
            "grid": grid,
            "indexes": _pairs(kw["index"], "--index", default_label=True),
            "external": _pairs(kw["external"], "--external", default_label=False),
            "prompts": {k: str(Path(v).resolve()) for k, v in prompts.items()} if prompts else None,
            "answer": {"score": kw["score"], "target": kw["target"]},
            "llm_options": llm_options,
            "seed": kw["seed"],
            "icl_pool": kw["icl_pool"],
            "limit": kw["limit"],
            "shard_size": kw["shard_size"],
            "executor": kw["executor"],
            "ray_address": kw["ray_address"],
            "ray_workers": kw["ray_workers"],
        }
    )


def _external_pipelines(layer: dict[str, Any], file_layer: dict[str, Any]) -> None:
    """Add an ``external:NAME`` retriever to the grid for every external system given by flag or file."""
    names = list((file_layer.get("external") or {}).keys()) + list((layer.get("external") or {}).keys())
    if not names:
        return
    grid = layer.setdefault("grid", {})
    base = grid.get("retriever") or (file_layer.get("grid") or {}).get("retriever")
    if base is None:
        base = [f"external:{n}" for n in names]
    grid["retriever"] = list(dict.fromkeys([*base, *(f"external:{n}" for n in names)]))


def take(
    exam: Path = typer.Argument(..., help="Exam file (JSONL) from `ragrade exam generate`."),
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (created; rerun the same command to resume)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="sweep.toml (grid, indexes, prompts, ...)."),
    index: list[str] | None = typer.Option(None, "--index", help="[LABEL=]INDEX_DIR, repeatable (one per chunking)."),
    retrievers: str | None = typer.Option(None, help="Comma list: closed,bm25,dense,hybrid,rerank(hybrid),oracle."),
    llm: str | None = typer.Option(None, "--llm", help="Comma list of PROVIDER/MODEL (e.g. offline/student)."),
    icl: str | None = typer.Option(None, "--icl", help="Comma list of few-shot counts, e.g. 0,1,2."),
    k: str | None = typer.Option(None, "--k", help="Comma list of top-k values."),
    chunkers: str | None = typer.Option(None, "--chunkers", help="Comma list of index labels (default: all)."),
    prompt: list[str] | None = typer.Option(None, "--prompt", help="[NAME=]FILE prompt template, repeatable."),
    method: str | None = typer.Option(None, "--method", help="auto, loglikelihood or generate (comma list)."),
    score: str | None = typer.Option(
        None, "--score", help="Log-likelihood normalisation: auto, per_char, per_token, sum."
    ),
    target: str | None = typer.Option(None, "--target", help="Score the candidate 'text' or its 'letter'."),
    external: list[str] | None = typer.Option(None, "--external", help="NAME=module:function or NAME=http://..."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the ICL hold-out and example choice."),
    icl_pool: int | None = typer.Option(None, "--icl-pool", help="Questions held out as few-shot examples."),
    limit: int | None = typer.Option(None, "--limit", help="Take only the first N evaluated questions."),
    shard_size: int | None = typer.Option(None, "--shard-size", help="Questions per work unit."),
    executor: str | None = typer.Option(None, "--executor", help="local (default) or ray."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Address of an existing Ray cluster."),
    ray_workers: int | None = typer.Option(None, "--ray-workers", help="Ray actors (default: the CPUs)."),
    llm_base_url: str | None = typer.Option(None, "--llm-base-url", help="Base URL of an OpenAI-compatible server."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="LLM requests in flight."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not use the LLM response cache."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Discard a previous run in --out instead of resuming."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Let every pipeline of the grid take the exam; resumable; writes a run directory."""
    from ragrade.run.spec import build_sweep_config, load_sweep_file
    from ragrade.run.sweep import run_sweep

    if not exam.is_file():
        raise ConfigError(f"{exam}: exam file not found")
    file_layer = load_sweep_file(config) if config else {}
    flags = _flag_layer(
        index=index,
        retrievers=retrievers,
        llm=llm,
        icl=icl,
        k=k,
        chunkers=chunkers,
        prompt=prompt,
        method=method,
        score=score,
        target=target,
        external=external,
        seed=seed,
        icl_pool=icl_pool,
        limit=limit,
        shard_size=shard_size,
        executor=executor,
        ray_address=ray_address,
        ray_workers=ray_workers,
        llm_base_url=llm_base_url,
        concurrency=concurrency,
        no_cache=no_cache,
    )
    _external_pipelines(flags, file_layer)
    cfg = build_sweep_config(file_layer, flags)
    with _Progress(enabled=is_tty()) as bar:
        result = run_sweep(
            exam, cfg, out, overwrite=overwrite, progress=bar.update, config_files=[str(config)] if config else []
        )
    _print_summary(result.summary, as_json, result.run_dir, result.n_new_rows)


class _Progress:
    """Rich progress bars (overall + one per pipeline) on a TTY; silent otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}
        self._overall: Any = None
        self._total = 0

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                transient=False,
            )
            self._bar.start()
            self._overall = self._bar.add_task("all pipelines", total=0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, pipeline: str, n: int, total: int) -> None:
        """Advance ``pipeline`` by ``n`` rows (the first call per pipeline sets its total)."""
        if self._bar is None:
            return
        if pipeline not in self._tasks:
            self._tasks[pipeline] = self._bar.add_task(pipeline[:70], total=total)
            self._total += total
            self._bar.update(self._overall, total=self._total)
        self._bar.advance(self._tasks[pipeline], n)
        self._bar.advance(self._overall, n)


def _print_summary(summary: Any, as_json: bool, run_dir: Path, added: int) -> None:
    cols = ["pipeline", "n", "accuracy", "ci_low", "ci_high", "n_errors", "n_parse_failures"]
    if as_json:
        echo_json({"run_dir": str(run_dir), "new_rows": added, "pipelines": summary[cols].to_dict(orient="records")})
        return
    width = max(len(str(p)) for p in summary["pipeline"])
    typer.echo(f"{'pipeline':<{width}}  {'n':>5}  {'acc':>6}  95% CI           errors  parse-fail")
    for r in summary[cols].itertuples(index=False):
        typer.echo(
            f"{r.pipeline:<{width}}  {r.n:>5}  {r.accuracy:6.1%}  [{r.ci_low:5.1%}, {r.ci_high:5.1%}]  "
            f"{r.n_errors:>6}  {r.n_parse_failures:>10}"
        )
    typer.echo(f"run directory: {run_dir} ({added} new answers)")


def compare(
    run_dir: Path = typer.Argument(..., help="Run directory of `ragrade exam take`."),
    a: str | None = typer.Argument(None, help="Pipeline id or a unique part of it."),
    b: str | None = typer.Argument(None, help="Pipeline id or a unique part of it."),
    all_pairs: bool = typer.Option(False, "--all", help="Compare the top pipelines pairwise."),
    top: int = typer.Option(5, "--top", help="How many top pipelines --all compares."),
    correction: str = typer.Option("holm", "--correction", help="holm, bonferroni, bh or none (with --all)."),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level of the verdicts."),
    n_boot: int = typer.Option(2000, "--n-boot", help="Bootstrap resamples."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    out: Path | None = typer.Option(None, "--out", help="Also write the comparisons as JSON (e.g. comparisons.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Paired comparison of pipelines: accuracy difference, bootstrap CI, McNemar exact p-value."""
    from ragrade.io import now_iso
    from ragrade.run.compare import (
        COMPARISONS_VERSION,
        compare_pair,
        resolve_pipeline,
        verdicts,
        write_comparisons,
    )
    from ragrade.run.stats import adjust_pvalues
    from ragrade.run.summary import read_responses

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
            f"   difference A-B {c['difference']:+.1%}  95% CI [{c['ci_low']:+.1%}, {c['ci_high']:+.1%}]  "
            f"n={c['n']}  discordant {c['a_only']}/{c['b_only']}  McNemar p={c['p_value']:.4g}{adj}  "
            f"-> {c['verdict']}"
        )
    if not result["comparisons"]:
        typer.echo("fewer than two pipelines: nothing to compare")


def register(app: typer.Typer) -> None:
    """Add ``compare`` to ``app`` and ``take`` to the exam group."""
    from ragrade.cli.exam import exam_app

    exam_app.command("take")(take)
    app.command("compare")(compare)
