"""CLI verbs of the irt stage: ``ragrade irt fit`` and ``ragrade irt improve``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ragrade.cli.common import command_progress, echo_json, output_path, split_list

if TYPE_CHECKING:
    from ragrade.irt.problem import FitConfig

irt_app = typer.Typer(
    help="Item response theory: abilities, item parameters, information, exam improvement.", no_args_is_help=True
)

_INPUT = typer.Argument(..., help="A run directory (responses.parquet + manifest.json) or a Parquet/CSV file.")
_MODEL = typer.Option("3pl", "--model", help="1pl, 2pl or 3pl.")
_FACTORS = typer.Option(None, "--factors", help="Comma-separated factor columns for the hierarchical model.")
_PRIOR = typer.Option("weak", "--prior", help="weak (MAP, the default) or none (joint maximum likelihood).")
_BOUNDS = typer.Option(None, "--bounds", help="e.g. 'theta=-6:6,b=-6:6,d=0.05:5,g=0:0.5' (any subset).")
_SE = typer.Option(
    "observed",
    "--se",
    help="observed, sandwich (robust SEs of factor effects), bootstrap (over items), parametric (refits of responses "
    "simulated from the fit: includes the uncertainty of the logit unit), jackknife (refits leaving out --groups "
    "groups of pipelines in turn: factor effects bias-corrected, on the unit where discriminations have geometric "
    "mean 1; needs --factors) or none.",
)
_BACKEND = typer.Option("auto", "--backend", help="auto, numpy or numba (fused kernel).")
_MAX_ITER = typer.Option(3000, "--max-iter", min=1, help="Iteration cap of the solver.")
_SOLVER = typer.Option(
    "newton", "--solver", help="newton (block Fisher scoring with exact Schur solves, the default) or lbfgs."
)
_NOT_APPLICABLE = typer.Option(
    None,
    "--not-applicable",
    help="FACTOR=V1|V2: values meaning the factor does not apply to a pipeline, which then gets no effect "
    "from it (e.g. chunker=none for closed book); case-insensitive; repeatable; FACTOR '*' sets every factor "
    "not named; a list replaces the default 'none|' (an empty item, as in 'chunker=n/a|', means empty "
    "cells); 'FACTOR=' makes the factor strict. Closed-book and oracle pipelines are not applicable to "
    "k, chunker, query and post by default (closed book is k=0, the oracle k=1); naming such a factor's "
    "values replaces that default.",
)
_EXAM = typer.Option(None, "--exam", help="Exam file for tags and improvement (default: the run manifest's).")
_JSON = typer.Option(False, "--json", help="Print a JSON summary instead of text.")


def parse_not_applicable(specs: list[str] | None) -> dict[str, tuple[str, ...]] | None:
    """``["chunker=none|n/a", "*=none|"]`` -> {factor: values}; an empty item is the empty cell, 'F=' is strict."""
    if not specs:
        return None
    from ragrade.errors import ConfigError

    out: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"--not-applicable expects FACTOR=VALUE|VALUE (or '*=...'), got '{spec}'")
        if name in out:
            raise ConfigError(f"--not-applicable names factor '{name}' twice")
        out[name] = tuple(v.strip() for v in values.split("|")) if values.strip() else ()
    return out


def _config(
    model: str,
    factors: str | None,
    prior: str,
    bounds: str | None,
    se: str,
    backend: str,
    max_iter: int,
    n_boot: int,
    solver: str = "newton",
    not_applicable: list[str] | None = None,
    groups: int = 20,
) -> FitConfig:
    from ragrade.irt.fit import FitConfig
    from ragrade.irt.model import Bounds, Priors

    return FitConfig(
        not_applicable=parse_not_applicable(not_applicable),
        model=model,
        factors=tuple(split_list(factors, "--factors") or ()),
        bounds=Bounds.parse(bounds),
        priors=Priors.named(prior),
        se=se,
        backend=backend,
        max_iter=max_iter,
        n_boot=n_boot,
        solver=solver,
        jackknife_groups=groups,
    )


def _pp(rec: dict[str, Any]) -> str:
    """`` (+3.7 pp accuracy, 95% [+1.8, +5.6])`` from an effect's detail ('predicted' when partly so),
    or '' without an interval."""
    if "accuracy_pp_ci95_low" not in rec:
        return ""
    lo, hi = rec["accuracy_pp_ci95_low"], rec["accuracy_pp_ci95_high"]
    source = rec.get("accuracy_pp_source", "observed")
    note = "" if source == "observed" else f", {source}"
    return f" ({rec['accuracy_pp']:+.1f} pp accuracy, 95% [{lo:+.1f}, {hi:+.1f}]{note})"


def _summary_lines(res: Any) -> list[str]:
    fit = res.fit
    lines = [
        f"{res.model} on {len(res.pipelines)} pipelines x {len(res.items)} items "
        f"({fit['n_observed']} responses, {res.counts.get('n_missing_correct', 0)} missing answers)",
        f"converged: {fit['converged']} after {fit['iterations']} iterations "
        f"({fit['time_s']} s, {fit.get('solver', 'lbfgs')}, {fit['backend']})",
        f"log-likelihood {fit['log_likelihood']:.2f}  AIC {fit['aic']:.1f}  BIC {fit['bic']:.1f}  "
        f"RMSE {fit['rmse']:.4f} (mean baseline {fit['rmse_baseline']:.4f})",
    ]
    if res.effects:
        hint = "" if "jackknife" in res.se_method else " (logit effects not bias-corrected: see --se jackknife)"
        lines.append(f"effect SEs: {res.se_method}{hint}")
    for f, levels in res.effects.items():
        detail = res.effects_detail.get(f, {})
        parts = ", ".join(f"{lvl} {e:+.3f}±{s:.3f}{_pp(detail.get(lvl, {}))}" for lvl, (e, s) in levels.items())
        na = res.not_applicable.get(f, {})
        if na.get("n_pipelines"):
            seen = "/".join(v or "<empty>" for v in na["seen"])
            parts += f" (not applicable to {na['n_pipelines']} pipelines: {seen}; no effect, i.e. the average level)"
        lines.append(f"effect {f}: {parts}")
    if any(
        str(d.get("accuracy_pp_source", "")).startswith("partly")
        for lv in res.effects_detail.values()
        for d in lv.values()
    ):
        lines.append(
            "  (partly predicted (a of b cells; c of d over the factor): a cell is one combination of the level "
            "with the other components; a of this level's b combinations, c of the factor's d, were not run and "
            "their accuracy is the model's prediction)"
        )
    order = sorted(range(len(res.pipelines)), key=lambda m: -res.theta[m])
    acc = res.pipeline_stats["accuracy"].tolist() if "accuracy" in res.pipeline_stats else []
    answered = res.pipeline_stats["n_answered"].tolist() if "n_answered" in res.pipeline_stats else []
    if order:
        lines.append(f"  {'pipeline (top 10 by ability)':<40} ability (theta ± SE)   observed accuracy")
    for m in order[:10]:
        seen = f"{acc[m]:.1%} of {int(answered[m])}" if m < len(acc) and acc[m] == acc[m] else "n/a"
        lines.append(f"  {res.pipelines[m]:<40} theta {res.theta[m]:+.3f} ± {res.theta_se[m]:.3f}   {seen}")
    return lines


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to ``app``."""
    app.add_typer(irt_app, name="irt")


@irt_app.command("fit")
def fit_cmd(
    source: Path = _INPUT,
    model: str = _MODEL,
    factors: str | None = _FACTORS,
    out: Path | None = typer.Option(None, "--out", help="irt.json to write (default: next to the input)."),
    prior: str = _PRIOR,
    bounds: str | None = _BOUNDS,
    se: str = _SE,
    n_boot: int = typer.Option(50, "--n-boot", min=1, help="Replicates for --se bootstrap or parametric."),
    groups: int = typer.Option(
        20, "--groups", min=2, help="Groups of pipelines for --se jackknife (at most one per pipeline)."
    ),
    backend: str = _BACKEND,
    solver: str = _SOLVER,
    max_iter: int = _MAX_ITER,
    not_applicable: list[str] | None = _NOT_APPLICABLE,
    exam: Path | None = _EXAM,
    as_json: bool = _JSON,
) -> None:
    """Fit abilities and item parameters; write irt.json and per-item/pipeline/effect CSV tables."""
    from ragrade import api

    cfg = _config(model, factors, prior, bounds, se, backend, max_iter, n_boot, solver, not_applicable, groups)
    out = output_path(out, "irt.json") or (source if source.is_dir() else source.parent) / "irt.json"
    with command_progress("irt fit", status=f"fitting the {model} model ({se} standard errors) ..."):
        res = api.fit_irt(source, config=cfg, out=out, exam=exam)
    if as_json:
        echo_json(
            {
                "out": str(out),
                "fit": res.fit,
                "counts": res.counts,
                "se_method": res.se_method,
                "timings_s": {k: round(v, 3) for k, v in res.timings.items()},
                "not_applicable": {
                    f: {k: v for k, v in na.items() if k != "pipelines"} for f, na in res.not_applicable.items()
                },
            }
        )
        return
    for line in _summary_lines(res):
        typer.echo(line)
    typer.echo("time (s): " + ", ".join(f"{k} {v:.2f}" for k, v in res.timings.items()))
    typer.echo(f"wrote {out}")


@irt_app.command("improve")
def improve_cmd(
    source: Path = _INPUT,
    steps: int = typer.Option(4, "--steps", min=0, help="Drop-and-refit rounds after the first fit."),
    drop: float = typer.Option(0.1, "--drop", help="Fraction of items dropped per round (0.1 = 10%)."),
    out: Path | None = typer.Option(None, "--out", help="Output directory (default: <run>/irt_improve)."),
    model: str = _MODEL,
    factors: str | None = _FACTORS,
    prior: str = _PRIOR,
    bounds: str | None = _BOUNDS,
    backend: str = _BACKEND,
    solver: str = _SOLVER,
    max_iter: int = _MAX_ITER,
    not_applicable: list[str] | None = _NOT_APPLICABLE,
    exam: Path | None = _EXAM,
    as_json: bool = _JSON,
) -> None:
    """Iteratively drop the least discriminative items; write the improved exam and the evolution."""
    from ragrade import api

    cfg = _config(model, factors, prior, bounds, "observed", backend, max_iter, 50, solver, not_applicable)
    done = api.improve_exam(
        source, steps=steps, drop=drop, out=output_path(out, "irt_improve"), exam=exam, config=cfg
    )  # `ragrade --dry-run`: the run's temporary folder
    imp, summary, exam_path, out = done.improvement, done.summary, done.exam, done.out
    if as_json:
        echo_json(summary)
        return
    base = imp.steps[0]["linked"]["mean_information_at_abilities"]
    for rec in imp.steps:
        linked = rec["linked"]
        at = linked["mean_information_at_abilities"]
        typer.echo(
            f"step {rec['step']}: {rec['n_items']} items, mean discrimination "
            f"{rec['discrimination']['mean']:.3f}, mean information at the pipelines' abilities {at:.4f} "
            f"({100 * (at / base - 1):+.1f}% vs step 0), peak mean information {max(linked['information_mean']):.4f} "
            f"(on step 0's scale), converged {rec['fit']['converged']}"
        )
    if not exam_path:
        typer.echo("no exam file known (no manifest exam path, no --exam): wrote the evolution only")
    typer.echo(f"wrote {out}")
