"""CLI verbs of the evaluation sweep: ``ragrade exam take`` and ``ragrade compare``."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragrade.api.exam import easy_exam_warning as easy_exam_warning  # the warning's home: the API
from ragrade.cli.common import LOADING, command_progress, echo_json, output_path, split_list
from ragrade.cli.exam import print_notes
from ragrade.cli.pipelines import (
    GridFlags,
    RunDirOption,
    check_grid_failures,
    with_flags,
)
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.run.compare import Verdicts
    from ragrade.run.spec import SweepConfig


@dataclass(frozen=True)
class TakeFlags(GridFlags):
    """The options of ``exam take``: the grid's (:class:`GridFlags`), how answers are scored, Ray, adaptive."""

    method: Annotated[str | None, typer.Option("--method", help="auto, loglikelihood or generate (comma list).")] = None
    score: Annotated[
        str | None, typer.Option("--score", help="Log-likelihood normalisation: auto, per_char, per_token, sum.")
    ] = None
    target: Annotated[str | None, typer.Option("--target", help="Score the candidate 'text' or its 'letter'.")] = None
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Address of an existing Ray cluster.")] = None
    ray_workers: Annotated[int | None, typer.Option("--ray-workers", min=1, help="Ray actors (default: the CPUs).")] = (
        None
    )
    no_samples: Annotated[
        bool, typer.Option("--no-samples", help="Do not write samples.jsonl (every request sent and its raw reply).")
    ] = False
    adaptive: Annotated[
        bool,
        typer.Option("--adaptive", help="Adaptive, IRT-driven run: ask only informative questions, stop when known."),
    ] = False
    budget: Annotated[int | None, typer.Option("--budget", help="Adaptive: at most N LLM requests in all.")] = None
    target_se: Annotated[
        float | None,
        typer.Option("--target-se", help="Adaptive: stop a pipeline at this ability standard error (default 0.2)."),
    ] = None
    calibration: Annotated[
        Path | None,
        typer.Option("--calibration", help="Adaptive: irt.json of an earlier run on the same exam (item parameters)."),
    ] = None
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Discard a previous run in --out instead of resuming.")
    ] = False

    def layer(self) -> dict[str, object]:
        """The grid's layer plus the answer, Ray, samples and ``[adaptive]`` settings given as flags."""
        from ragrade.config import deep_merge

        adaptive = {
            "enabled": True if self.adaptive else None,
            "budget": self.budget,
            "target_se": self.target_se,
            "calibration": str(self.calibration) if self.calibration else None,
        }
        own = {
            "grid": {"methods": split_list(self.method, "--method")},
            "answer": {"score": self.score, "target": self.target},
            "ray_address": self.ray_address,
            "ray_workers": self.ray_workers,
            "samples": False if self.no_samples else None,
            "adaptive": adaptive,
        }
        return deep_merge(super().layer(), own)

    def sweep_config(self) -> SweepConfig:
        """The settings of the run; the adaptive flags need an adaptive run (``--adaptive`` or the file's)."""
        cfg = super().sweep_config()
        if not cfg.adaptive.enabled and (self.budget, self.target_se, self.calibration) != (None, None, None):
            raise ConfigError("--budget, --target-se and --calibration apply to adaptive runs; add --adaptive")
        return cfg


@with_flags(TakeFlags)
def take(
    exam: Annotated[Path, typer.Argument(help="Exam file (JSONL) from `ragrade exam generate`.")],
    out: RunDirOption,
    flags: TakeFlags,
) -> None:
    """Let every pipeline of the grid take the exam; resumable; writes a run directory.

    A failed LLM request is missing (never wrong); rerunning the command asks only the failed ones again.
    """
    from ragrade.api import take_exam

    out = output_path(out)  # `ragrade --dry-run`: the run's temporary folder
    if not exam.is_file():
        raise ConfigError(f"{exam}: exam file not found")
    cfg = flags.sweep_config()  # the flags over the --config file
    files = [str(flags.config)] if flags.config else []
    if cfg.adaptive.enabled:
        from ragrade.cli.adaptive import take_adaptive

        take_adaptive(exam, cfg, out, overwrite=flags.overwrite, as_json=flags.as_json, config=flags.config)
        return
    with command_progress("exam take", aggregate=True, status=LOADING) as shown:
        result = take_exam(
            exam, out, config=cfg, overwrite=flags.overwrite, progress=shown.advance, config_files=files, check=False
        )
    _print_summary(result.summary, flags.as_json, result.run_dir, result.n_new_rows)
    print_notes(result.notes, result.warnings)
    check_grid_failures(result.responses, flags.max_failed)


def _offline_exam_note(exam: Path, summary: pd.DataFrame | None = None) -> None:
    """Print the notes on ``exam`` (an offline exam's) and, given the ``summary`` of a run on it, the too-easy
    warning (:func:`~ragrade.api.exam.easy_exam_warning`): what ``exam take`` prints from its result. The verb
    prints its result's ``notes`` and ``warnings``; this is kept for tests/exam/test_exam_offline_docs.py."""
    from ragrade.api.exam import exam_notes

    notes = exam_notes(exam)
    warning = None if summary is None else easy_exam_warning(summary, offline=bool(notes))
    print_notes(notes, [warning] if warning else [])


def _print_summary(summary: pd.DataFrame, as_json: bool, run_dir: Path, added: int) -> None:
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


def scored_by(row: Mapping[Hashable, object]) -> str:
    """How a pipeline was scored, e.g. ``loglikelihood/forced-token`` or ``generate`` (``/mixed`` when it changed)."""
    method = str(row.get("method") or "none")
    source = row.get("ll_source")
    if not isinstance(source, str) or not source:
        return method
    return f"{method}/{'mixed' if source.startswith('mixed') else source}"


def decision_line(summary: pd.DataFrame) -> str:
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


def warn_mixed_scoring(summary: pd.DataFrame) -> None:
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


@dataclass(frozen=True)
class CompareFlags:
    """The options of ``ragrade compare``."""

    all_pairs: Annotated[
        bool,
        typer.Option("--all", help="Compare the top distinct pipelines pairwise (identical twins are skipped, named)."),
    ] = False
    top: Annotated[int, typer.Option("--top", min=2, help="How many top pipelines --all compares.")] = 5
    correction: Annotated[str, typer.Option("--correction", help="holm, bonferroni, bh or none (with --all).")] = "holm"
    alpha: Annotated[float, typer.Option("--alpha", help="Significance level of the verdicts.")] = 0.05
    n_boot: Annotated[int, typer.Option("--n-boot", min=1, help="Bootstrap resamples.")] = 2000
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="JSON file of the comparisons (default: RUN_DIR/comparisons.json, read by the report)."
        ),
    ] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False


@with_flags(CompareFlags)
def compare(
    run_dir: Annotated[Path, typer.Argument(help="Run directory of `ragrade exam take`.")],
    a: Annotated[str | None, typer.Argument(help="Pipeline id or a unique part of it.")] = None,
    b: Annotated[str | None, typer.Argument(help="Pipeline id or a unique part of it.")] = None,
    *,
    flags: CompareFlags,
) -> None:
    """Paired comparison of pipelines: accuracy difference, bootstrap CI, McNemar exact p-value."""
    from ragrade import api

    if flags.all_pairs and (a or b):
        raise ConfigError("give either two pipelines or --all, not both")
    if not flags.all_pairs and not (a and b):
        raise ConfigError("name two pipelines (ids or unique parts of ids), or use --all")
    found = api.compare_pipelines(
        run_dir, a, b, top=flags.top, correction=flags.correction, alpha=flags.alpha, n_boot=flags.n_boot,
        seed=flags.seed, out=output_path(flags.out),  # `ragrade --dry-run`: the run's temporary folder
    )  # fmt: skip
    if flags.as_json:
        echo_json(found.verdicts)
        return
    _print_comparisons(found.verdicts, found.out)


def _print_comparisons(result: Verdicts, out: Path | None) -> None:
    """The comparisons as text: each pair's accuracies, difference, interval, McNemar p and verdict."""
    from ragrade.run.compare import interval_text

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
