"""CLI verbs of the main job: ``ragrade run CONFIG``, ``ragrade demo`` and ``ragrade report RUN_DIR``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragrade.cli.common import echo_json, output_path, quiet_requested
from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import LLMFlags
from ragrade.cli.pipelines import TransformLlmOption

if TYPE_CHECKING:
    from ragrade.api.job import JobPlan
    from ragrade.api.job_run import JobRun

RUN_HELP = (
    "Run every stage of a job config (TOML) into one run directory: corpus, chunkers, indexes, exam, sweep, "
    "IRT, robustness testbeds, judges, report.\n\n"
    "Rerunning reuses every stage whose configuration is unchanged (stages.json) and resumes an interrupted "
    "sweep, robustness run or judging where it stopped. timings.json records the wall time per stage."
)
DEMO_HELP = (
    "Run the whole method offline on the Python standard library's docstrings (no LLM, no network) and write "
    "an HTML report. Takes a few minutes on 2 cores; a rerun reuses the finished stages."
)
CHECK_HELP = "Validate the config (every component name and model spec), print the plan, run nothing."
QUERY_HELP = "Comma list of query transforms for the sweep (none, hyde, multi-query, rm3)."
POST_HELP = "Comma list of post-processing chains for the sweep, e.g. none,mmr,rerank+compress."
REPORT_HELP = "Render the self-contained HTML report of a run directory (from its files only; works offline)."


def _finish(result: JobRun, as_json: bool) -> None:
    if as_json:
        echo_json(
            {
                "run_dir": str(result.run_dir),
                "report": str(result.report) if result.report else None,
                "stages": result.stages,
                "timings": result.timings,
            }
        )
        return
    total = result.timings.get("total_seconds")
    typer.echo(
        f"run directory: {result.run_dir} ({total:.0f}s)" if total is not None else f"run directory: {result.run_dir}"
    )
    if result.report is not None:
        typer.echo(f"report: {result.report}")
    for note in result.notes:
        typer.echo(f"note: {note}")


@dataclass(frozen=True, kw_only=True)
class JobFlags(LLMFlags):
    """The options of ``ragrade run`` (the LLM flags go over the config's \\[llm_options] table)."""

    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default: the config's `out`).")] = None
    force: Annotated[bool, typer.Option("--force", help="Rerun every stage even when its config is unchanged.")] = False
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report.")] = False
    check: Annotated[bool, typer.Option("--check", help=CHECK_HELP)] = False
    query: Annotated[str | None, typer.Option("--query", help=QUERY_HELP)] = None
    post: Annotated[str | None, typer.Option("--post", help=POST_HELP)] = None
    transform_llm: TransformLlmOption = None
    as_json: Annotated[bool, typer.Option("--json", help="Print the stage summaries and timings as JSON.")] = False

    def overrides(self) -> dict[str, Any]:
        """The layer of these flags over the job config (only what was given)."""
        from ragrade.cli.common import split_list

        overrides: dict[str, Any] = {"report": {"enabled": False}} if self.no_report else {}
        sweep = {
            "query": split_list(self.query, "--query"),
            "post": split_list(self.post, "--post"),
            "transform_llm": self.transform_llm,
        }
        if any(v is not None for v in sweep.values()):
            overrides["sweep"] = {k: v for k, v in sweep.items() if v is not None}
        llm = self.llm_layer()
        if llm:  # over the config's [llm_options] table (and `ragrade --dry-run run`)
            overrides["llm_options"] = llm
        return overrides


@with_flags(JobFlags)
def run_cmd(
    config: Annotated[
        Path, typer.Argument(help="Job config (TOML) with \\[corpus], \\[\\[chunkers]], \\[exam], \\[sweep], ...")
    ],
    flags: JobFlags,
) -> None:
    """Run a job config end to end."""
    from ragrade import api
    from ragrade.cli.common import warning_line
    from ragrade.job.progress import make_display

    overrides = flags.overrides()
    target = output_path(flags.out)  # `ragrade --dry-run`: the run's temporary folder (None: the config's `out`)
    if flags.check:
        _print_plan(api.plan_job(config, target, overrides=overrides), flags.as_json)
        return
    display = make_display(quiet_requested())
    result = api.run_job(config, target, overrides=overrides, force=flags.force, display=display, warn=warning_line)
    _finish(result, flags.as_json)


def _print_plan(plan: JobPlan, as_json: bool) -> None:
    out = plan.run_dir
    if as_json:
        echo_json({"run_dir": str(out), "valid": True, "paths": plan.paths, "stages": plan.stages})
        return
    typer.echo("paths (a config's relative paths are read from its folder; flags from the current one):")
    for key, value in plan.paths.items():
        for item in value if isinstance(value, list) else [value]:
            typer.echo(f"  {key:<20} {item}")
    typer.echo(f"config is valid; plan for {out}:")
    for s in plan.stages:
        typer.echo(f"  {s['action']:<5}  {s['stage']}")
    typer.echo(
        f"{sum(s['action'] == 'run' for s in plan.stages)} stage(s) to run, "
        f"{sum(s['action'] == 'reuse' for s in plan.stages)} reused"
    )


@dataclass(frozen=True, kw_only=True)
class DemoFlags:
    """The options of ``ragrade demo``."""

    out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default runs/demo).")] = None
    small: Annotated[bool, typer.Option("--small", help="A reduced demo (fewer documents and questions).")] = False
    force: Annotated[bool, typer.Option("--force", help="Rerun every stage.")] = False
    as_json: Annotated[bool, typer.Option("--json", help="Print the stage summaries and timings as JSON.")] = False


@with_flags(DemoFlags)
def demo_cmd(flags: DemoFlags) -> None:
    """Run the built-in offline demo and print where its report is."""
    from ragrade import api
    from ragrade.job.demo import default_out
    from ragrade.job.progress import make_display

    target = output_path(flags.out) or default_out()  # `ragrade --dry-run`: the run's temporary folder
    result = api.demo(target, small=flags.small, force=flags.force, display=make_display(quiet_requested()))
    _finish(result, flags.as_json)
    if not flags.as_json and result.report is not None:
        typer.echo(f"open it in a browser: file://{Path(result.report).resolve()}")


@dataclass(frozen=True, kw_only=True)
class ReportFlags:
    """The options of ``ragrade report``."""

    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="HTML file to write (default RUN_DIR/report.html).")
    ] = None
    top: Annotated[int, typer.Option("--top", min=2, help="Pipelines whose paired verdicts are shown.")] = 5
    title: Annotated[str | None, typer.Option("--title", help="Title of the report.")] = None
    adaptive: Annotated[
        Path | None,
        typer.Option(
            "--adaptive", help="An adaptive `exam take --adaptive` run kept outside RUN_DIR (its 'What it cost')."
        ),
    ] = None
    add: Annotated[
        list[Path],
        typer.Option(
            "--add",
            help=(
                "Another run folder kept outside RUN_DIR (an `exam take` run or a `ragrade run` "
                "directory: runs of the same exam merge into one leaderboard, other exams are "
                "refused; an IRT fit's folder, a `robust run` output, `judge` scores); repeat for "
                "several."
            ),
        ),
    ] = field(default_factory=list)


@with_flags(ReportFlags)
def report_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory of `ragrade run` / `ragrade demo` (or its parts)."),
    *,
    flags: ReportFlags,
) -> None:
    """Render the HTML report of a run directory."""
    from ragrade import api

    out = output_path(flags.out)
    path = api.render_report(run_dir, out, top=flags.top, title=flags.title, extra=flags.add, adaptive=flags.adaptive)
    typer.echo(f"report: {path}")


def register(app: typer.Typer) -> None:
    """Add ``run``, ``demo`` and ``report`` to ``app``."""
    app.command("run", help=RUN_HELP)(run_cmd)
    app.command("demo", help=DEMO_HELP)(demo_cmd)
    app.command("report", help=REPORT_HELP)(report_cmd)
