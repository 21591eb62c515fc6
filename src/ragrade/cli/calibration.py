"""CLI verbs for judging: the ``ragrade judge`` group (``score``, ``calibrate``) and ``ragrade label``.

``judge`` is a plain group of plain commands: ``ragrade judge score ANSWERS ...`` scores answers,
``ragrade judge calibrate SCORES --human LABELS`` corrects the scores with human labels. Scoring is the
group's default command (:class:`DefaultCommandGroup`), so ``ragrade judge ANSWERS ...`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup

from ragrade.cli.common import echo_json, output_path
from ragrade.cli.flags import with_flags
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    from typer._click import Command, Context

CALIBRATE_HELP = (
    "Correct judge scores with human labels: per metric and configuration, the PPI++ estimate of the mean a "
    "human would give (with its interval) beside the human-only interval and the uncorrected judge mean; "
    "the judge's bias and its agreement with the humans. Writes DIR/calibration.json. "
    "Example: `ragrade judge calibrate judge/ --human labels.jsonl`."
)
LABEL_HELP = (
    "Write one self-contained HTML page for grading a random sample of judged answers by keyboard (progress "
    "kept in the browser); its button downloads labels.jsonl for `ragrade judge calibrate`."
)


JUDGE_HELP = (
    "Score free-text answers with LLM judges, BERTScore and exact match (`ragrade judge ANSWERS ...` is "
    "short for `ragrade judge score ANSWERS ...`), then correct the scores with human labels "
    "(`ragrade judge calibrate`)."
)


class DefaultCommandGroup(TyperGroup):
    """A group whose arguments go to its :attr:`default_command` when they do not start with a command name.

    ``ragrade judge ANSWERS --metrics m`` runs ``judge score ANSWERS --metrics m``; ``judge calibrate ...``
    and ``judge --help`` are the group's own. Only the group's parse step changes: every command is a
    plain, registered command with its own usage line and help.
    """

    default_command = "score"

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        """Route arguments that name no subcommand (and are not a help option) to the default command."""
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def command_for(self, ctx: Context, token: str) -> Command | None:
        """The command ``token`` (a first argument) runs: a subcommand by name, else the default one."""
        return self.get_command(ctx, token) or self.get_command(ctx, self.default_command)


@dataclass(frozen=True, kw_only=True)
class CalibrateFlags:
    """The options of ``ragrade judge calibrate`` (``None``: not given, never overrides the \\[calibration] table)."""

    human: Annotated[Path | None, typer.Option("--human", help='Labels JSONL: {"id", "metric", "label"} per line.')] = (
        None
    )
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output directory (default SCORES_DIR/calibration).")
    ] = None
    level: Annotated[
        float | None, typer.Option("--level", help="Confidence level of the intervals (default 0.95).")
    ] = None
    min_labels: Annotated[
        int | None, typer.Option("--min-labels", help="Labels needed per configuration (default 10).")
    ] = None
    config: Annotated[Path | None, typer.Option("--config", help="TOML file (a \\[calibration] table).")] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print calibration.json.")] = False


@with_flags(CalibrateFlags)
def calibrate_cmd(
    scores: Path = typer.Argument(..., help="Judge output directory or its scores.jsonl (or an exam file)."),
    *,
    flags: CalibrateFlags,
) -> None:
    """Calibrate judge scores against human labels."""
    from ragrade import api
    from ragrade.config import build_config, load_toml
    from ragrade.judge.calibrate import CalibrationConfig

    layer: dict[str, object] = {}
    config = flags.config
    if config is not None:
        data = load_toml(config)
        table = data.get("calibration", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{config}: [calibration] must be a table")
        layer = dict(table)
        from ragrade.config_paths import resolve_keys

        resolve_keys(layer, ("human",), config.resolve().parent)  # relative to the config file, like every config
    given = {"human": str(flags.human) if flags.human else None, "level": flags.level, "min_labels": flags.min_labels}
    cfg = build_config(CalibrationConfig, layer, given, source="calibrate options")
    result = api.calibrate_judge(scores, out=output_path(flags.out), config=cfg)  # `--dry-run`: a temporary folder
    if flags.as_json:
        echo_json(result)
        return
    for metric, m in result["metrics"].items():
        for config_name, row in m["configs"].items():
            if "ppi_ci" not in row:
                typer.echo(f"{metric} {config_name}: {row.get('note', 'not calibrated')}")
                continue
            lo, hi = row["ppi_ci"]
            hlo, hhi = row["human_only_ci"]
            typer.echo(
                f"{metric} {config_name}: judge {row['judge_mean']:.3f} -> corrected {row['ppi_estimate']:.3f} "
                f"[{lo:.3f}, {hi:.3f}] (human only [{hlo:.3f}, {hhi:.3f}], n_labels={row['n_labels']}, "
                f"bias {row['bias']:+.3f})"
            )
    typer.echo(f"wrote {result.out / 'calibration.json'}")


@dataclass(frozen=True, kw_only=True)
class LabelFlags:
    """The options of ``ragrade label``."""

    n: Annotated[int, typer.Option("--n", min=1, help="Answers to sample (spread evenly over configurations).")] = 100
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML page to write.")]
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            "-m",
            help=(
                "Comma list of metrics to grade (default: every judged one but exact and "
                "bertscore, formulas to compute, not judgements)."
            ),
        ),
    ] = None
    answers: Annotated[
        Path | None, typer.Option("--answers", help="Answers file (default: the one the judge read).")
    ] = None
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sample.")] = 0


@with_flags(LabelFlags)
def label_cmd(
    scores: Path = typer.Argument(..., help="Judge output directory or its scores.jsonl (or an exam file)."),
    *,
    flags: LabelFlags,
) -> None:
    """Write the labelling page."""
    from ragrade import api
    from ragrade.cli.common import split_list

    out = output_path(flags.out)  # `ragrade --dry-run`: the run's temporary folder
    metrics = split_list(flags.metrics, "--metrics")
    page = api.write_label_page(scores, out, n=flags.n, metrics=metrics, answers=flags.answers, seed=flags.seed)
    typer.echo(
        f"wrote {out}: {page.n_items} answers, {page.n_tasks} grades to give "
        f"({', '.join(page.metrics)}); open it in a browser, then `ragrade judge calibrate {scores} "
        f"--human labels.jsonl`"
    )


def register(app: typer.Typer) -> None:
    """Add the ``judge`` group (``score``, the default, and ``calibrate``) and ``label`` to ``app``."""
    from ragrade.cli.qa import judge

    judge_app = typer.Typer(cls=DefaultCommandGroup, help=JUDGE_HELP, no_args_is_help=True)
    judge_app.command("score")(judge)
    judge_app.command("calibrate", help=CALIBRATE_HELP)(calibrate_cmd)
    app.add_typer(judge_app, name="judge")
    app.command("label", help=LABEL_HELP)(label_cmd)
