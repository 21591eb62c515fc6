"""CLI verbs of the irt stage: ``ragrade irt fit`` and ``ragrade irt improve``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragrade.cli.common import command_progress, echo_json, output_path, split_list
from ragrade.cli.flags import with_flags

if TYPE_CHECKING:
    from ragrade.irt.problem import FitConfig

irt_app = typer.Typer(
    help="Item response theory: abilities, item parameters, information, exam improvement.", no_args_is_help=True
)

NOT_APPLICABLE_HELP = (
    "FACTOR=V1|V2: values meaning the factor does not apply to a pipeline, which then gets no effect "
    "from it (e.g. chunker=none for closed book); case-insensitive; repeatable; FACTOR '*' sets every "
    "factor not named; a list replaces the default 'none|' (an empty item, as in 'chunker=n/a|', means "
    "empty cells); 'FACTOR=' makes the factor strict. Closed-book and oracle pipelines are not applicable "
    "to k, chunker, query and post by default (closed book is k=0, the oracle k=1); naming such a "
    "factor's values replaces that default."
)
SE_HELP = (
    "observed, sandwich (robust SEs of factor effects), bootstrap (over items), parametric (refits of "
    "responses simulated from the fit: includes the uncertainty of the logit unit), jackknife (refits "
    "leaving out --groups groups of pipelines in turn: factor effects bias-corrected, on the unit where "
    "discriminations have geometric mean 1; needs --factors) or none."
)
SOLVER_HELP = "newton (block Fisher scoring with exact Schur solves, the default) or lbfgs."
EXAM_HELP = "Exam file for tags and improvement (default: the run manifest's)."

InputArgument = Annotated[
    Path, typer.Argument(help="A run directory (responses.parquet + manifest.json) or a Parquet/CSV file.")
]


@dataclass(frozen=True, kw_only=True)
class ModelFlags:
    """The options of the IRT model both verbs fit (``irt fit`` and ``irt improve``, which refits it)."""

    model: Annotated[str, typer.Option("--model", help="1pl, 2pl or 3pl.")] = "3pl"
    factors: Annotated[
        str | None, typer.Option("--factors", help="Comma-separated factor columns for the hierarchical model.")
    ] = None
    prior: Annotated[
        str, typer.Option("--prior", help="weak (MAP, the default) or none (joint maximum likelihood).")
    ] = "weak"
    bounds: Annotated[
        str | None, typer.Option("--bounds", help="e.g. 'theta=-6:6,b=-6:6,d=0.05:5,g=0:0.5' (any subset).")
    ] = None
    backend: Annotated[str, typer.Option("--backend", help="auto, numpy or numba (fused kernel).")] = "auto"
    solver: Annotated[str, typer.Option("--solver", help=SOLVER_HELP)] = "newton"
    max_iter: Annotated[int, typer.Option("--max-iter", min=1, help="Iteration cap of the solver.")] = 3000
    not_applicable: Annotated[list[str] | None, typer.Option("--not-applicable", help=NOT_APPLICABLE_HELP)] = None
    exam: Annotated[Path | None, typer.Option("--exam", help=EXAM_HELP)] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON summary instead of text.")] = False

    def fit_config(self, *, se: str = "observed", n_boot: int = 50, groups: int = 20) -> FitConfig:
        """The fit settings of these flags, with the standard errors asked for."""
        from ragrade.irt.fit import FitConfig
        from ragrade.irt.model import Bounds, Priors

        return FitConfig(
            not_applicable=parse_not_applicable(self.not_applicable),
            model=self.model,
            factors=tuple(split_list(self.factors, "--factors") or ()),
            bounds=Bounds.parse(self.bounds),
            priors=Priors.named(self.prior),
            se=se,
            backend=self.backend,
            max_iter=self.max_iter,
            n_boot=n_boot,
            solver=self.solver,
            jackknife_groups=groups,
        )


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
    for f, level in res.fit.get("one_level_factors", {}).items():
        lines.append(f"factor {f}: one level ({level}) in these responses, no effect to estimate: left out")
    if res.fit.get("one_level_factors") and not res.effects:
        lines.append("no factor has two levels: one ability per pipeline, without the hierarchical model")
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


@dataclass(frozen=True, kw_only=True)
class FitFlags(ModelFlags):
    """The options of ``ragrade irt fit``: the model's and how its standard errors are found."""

    out: Annotated[Path | None, typer.Option("--out", help="irt.json to write (default: next to the input).")] = None
    se: Annotated[str, typer.Option("--se", help=SE_HELP)] = "observed"
    n_boot: Annotated[int, typer.Option("--n-boot", min=1, help="Replicates for --se bootstrap or parametric.")] = 50
    groups: Annotated[
        int,
        typer.Option("--groups", min=2, help="Groups of pipelines for --se jackknife (at most one per pipeline)."),
    ] = 20


@irt_app.command("fit")
@with_flags(FitFlags)
def fit_cmd(source: InputArgument, flags: FitFlags) -> None:
    """Fit abilities and item parameters; write irt.json and per-item/pipeline/effect CSV tables."""
    from ragrade import api

    cfg = flags.fit_config(se=flags.se, n_boot=flags.n_boot, groups=flags.groups)
    out = output_path(flags.out, "irt.json") or (source if source.is_dir() else source.parent) / "irt.json"
    with command_progress("irt fit", status=f"fitting the {flags.model} model ({flags.se} standard errors) ..."):
        res = api.fit_irt(source, config=cfg, out=out, exam=flags.exam)
    if flags.as_json:
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


@dataclass(frozen=True, kw_only=True)
class ImproveFlags(ModelFlags):
    """The options of ``ragrade irt improve``: the model's and the drop-and-refit rounds."""

    steps: Annotated[int, typer.Option("--steps", min=0, help="Drop-and-refit rounds after the first fit.")] = 4
    drop: Annotated[float, typer.Option("--drop", help="Fraction of items dropped per round (0.1 = 10%).")] = 0.1
    out: Annotated[Path | None, typer.Option("--out", help="Output directory (default: <run>/irt_improve).")] = None


@irt_app.command("improve")
@with_flags(ImproveFlags)
def improve_cmd(source: InputArgument, flags: ImproveFlags) -> None:
    """Iteratively drop the least discriminative items; write the improved exam and the evolution."""
    from ragrade import api

    out = output_path(flags.out, "irt_improve")  # `ragrade --dry-run`: the run's temporary folder
    done = api.improve_exam(
        source, steps=flags.steps, drop=flags.drop, out=out, exam=flags.exam, config=flags.fit_config()
    )
    imp, summary, exam_path, out = done.improvement, done.summary, done.exam, done.out
    if flags.as_json:
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
