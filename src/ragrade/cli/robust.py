"""CLI verbs of the robust stage: ``ragrade robust build|run|table``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import LLMFlags
from ragrade.llm.failures import MAX_FAILED_HELP

if TYPE_CHECKING:
    from ragrade.robust.run import ModelRun

robust_app = typer.Typer(
    help="Robustness testbeds (noise, negative rejection, integration, counterfactual).", no_args_is_help=True
)


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


@dataclass(frozen=True)
class RunFlags(LLMFlags):
    """The options of ``ragrade robust run`` (``None``: not given, never overrides the config's \\[robust] table)."""

    testbed: Annotated[
        str,
        typer.Option("--testbed", help="noise | negative | integration | counterfactual (or any registered testbed)"),
    ]
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            help="Required (here or in the config's \\[robust] table): the PROVIDER/MODEL answering, "
            "e.g. offline/extractive or openai/llama3.1; comma-separate several for one table.",
        ),
    ] = None
    out: Annotated[Path | None, typer.Option("--out", help="Output directory.")] = None
    noise_ratios: Annotated[str | None, typer.Option("--noise-ratios", help="e.g. 0,0.2,0.4,0.6,0.8")] = None
    docs: Annotated[int | None, typer.Option("--docs", help="Documents per question (default 5).")] = None
    lang: Annotated[str | None, typer.Option("--lang", help="en | zh | auto (default: from the questions).")] = None
    scoring: Annotated[str | None, typer.Option("--scoring", help="default | rgb (the original scorer's rules).")] = (
        None
    )
    construction: Annotated[
        str | None, typer.Option("--construction", help="ragrade | rgb (the original document selection).")
    ] = None
    shortfall: Annotated[
        str | None,
        typer.Option(
            "--shortfall",
            help="pad | skip | fewer, when a document pool is short (fewer: fewer documents at the requested ratio; "
            "default: fewer for `robust build` testbeds, pad for other data).",
        ),
    ] = None
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of document order (default 0).")] = None
    correct_ratio: Annotated[
        float | None,
        typer.Option("--correct-ratio", min=0.0, max=1.0, help="Counterfactual: share of uncorrupted positives."),
    ] = None
    min_positives: Annotated[
        int | None,
        typer.Option(
            "--min-positives",
            min=0,
            help="Leave out (as skipped) questions with fewer supporting passages "
            "than this, so every ratio really has its noise share (default 0: keep all).",
        ),
    ] = None
    closed_book: Annotated[
        bool | None,
        typer.Option("--closed-book/--no-closed-book", help="Counterfactual: also ask without documents (Acc)."),
    ] = None
    judge: Annotated[str | None, typer.Option("--judge", help="PROVIDER/MODEL of the Rej*/ED* judge.")] = None
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="Judge server URL.")] = None
    prompts: Annotated[Path | None, typer.Option("--prompts", help="TOML/JSON overriding the prompts.")] = None
    rejection_phrases: Annotated[
        str | None,
        typer.Option("--rejection-phrases", help="'a|b|c' or @FILE: refusal phrases (replace the defaults)."),
    ] = None
    error_phrases: Annotated[
        str | None,
        typer.Option("--error-phrases", help="'a|b|c' or @FILE: error-report phrases (replace the defaults)."),
    ] = None
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Answer length limit (default 256).")
    ] = None
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N questions.")] = None
    max_failed: Annotated[float | None, typer.Option("--max-failed", help=MAX_FAILED_HELP)] = None
    config: Annotated[Path | None, typer.Option("--config", help="TOML with a \\[robust] table of these options.")] = (
        None
    )
    as_json: Annotated[bool, typer.Option("--json", help="Print metrics as JSON instead of the table.")] = False

    def layer(self, data: Path) -> dict[str, object]:
        """The config layer of these flags for a run on ``data`` (over the config file's \\[robust] table)."""
        from ragrade.cli.common import output_path, split_list, split_numbers

        return {
            "data": data, "testbed": self.testbed, "llm": split_list(self.llm, "--llm"),
            "out": output_path(self.out), "docs": self.docs,
            "noise_ratios": split_numbers(self.noise_ratios, "--noise-ratios", float),
            "lang": self.lang, "scoring": self.scoring, "construction": self.construction,
            "shortfall": self.shortfall, "seed": self.seed, "correct_ratio": self.correct_ratio,
            "min_positives": self.min_positives, "closed_book": self.closed_book, "judge": self.judge,
            "judge_base_url": self.judge_base_url, "prompts": self.prompts,
            "rejection_phrases": _phrases(self.rejection_phrases, "--rejection-phrases"),
            "error_phrases": _phrases(self.error_phrases, "--error-phrases"), "max_tokens": self.max_tokens,
            "limit": self.limit, "llm_options": self.llm_layer(),
        }  # fmt: skip


def _robust_file_layer(config: Path | None) -> dict[str, Any]:
    """The config file's \\[robust] table, its paths resolved against the file (none without ``--config``)."""
    if config is None:
        return {}
    from ragrade.config import load_toml
    from ragrade.config_paths import resolve_section

    table = load_toml(config).get("robust", {})
    return dict(resolve_section(table, config, paths=("data", "out", "prompts"), llms=("llm", "judge")))


@robust_app.command("run")
@with_flags(RunFlags)
def run_cmd(
    data: Annotated[Path, typer.Argument(help="RGB-shaped JSONL (original data or `ragrade robust build` output).")],
    flags: RunFlags,
) -> None:
    """Run a testbed and write results.jsonl, metrics.json and table.csv (resumes an interrupted run)."""
    from ragrade import api
    from ragrade.cli.common import LOADING, command_progress
    from ragrade.config import build_config
    from ragrade.errors import ConfigError
    from ragrade.robust.run import RobustRunConfig

    file_layer = _robust_file_layer(flags.config)
    layer = flags.layer(data)
    if not layer["llm"] and not file_layer.get("llm"):
        raise ConfigError("robust run needs --llm PROVIDER/MODEL (e.g. --llm offline/extractive or openai/MODEL)")
    cfg = build_config(RobustRunConfig, file_layer, layer, source="robust run options")
    with command_progress(f"robust {cfg.testbed}", status=LOADING) as shown:
        runs = api.run_testbed(
            cfg.data,
            cfg.testbed,
            cfg.llm,
            cfg.out,
            config=cfg,
            check=False,
            progress=shown.update,
            warn=lambda msg: typer.echo(f"ragrade: warning: {msg}", err=True),
        )
    _print_runs(runs, flags.as_json)
    runs.check(flags.max_failed)  # after the runs are shown


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
        typer.echo(
            f"{r.model}: n={m['n']} failed={m['failed']} (missing) skipped={m['skipped']} "
            f"flagged={m['flagged']} generated={r.generated} resumed={r.resumed} -> {r.out_dir}"
        )
        if m.get("untestable"):
            typer.echo(f"  untestable={m['untestable']}: fake answer equals the answer, left out of the metrics")
    if any(r.metrics.get("flagged") for r in runs):
        typer.echo(FLAGGED_MEANING)


@dataclass(frozen=True, kw_only=True)
class BuildFlags:
    """The options of ``ragrade robust build``."""

    out: Annotated[Path, typer.Option("--out", help="Output directory for base/integration/counterfactual JSONL.")]
    index: Annotated[Path, typer.Option("--index", help="Index directory (built by ragrade index).")]
    exam: Annotated[Path | None, typer.Option("--exam", help="Exam JSONL (correct choice = answer).")] = None
    qa: Annotated[Path | None, typer.Option("--qa", help="Question/answer JSONL (question, answer, distractors).")] = (
        None
    )
    retriever: Annotated[str, typer.Option("--retriever", help="Retriever spec of the index for hard negatives.")] = (
        "bm25"
    )
    k: Annotated[int, typer.Option("--k", min=1, help="Chunks retrieved per question.")] = 30
    max_positive: Annotated[
        int, typer.Option("--max-positive", min=0, help="Positive documents kept per question.")
    ] = 5
    max_negative: Annotated[int, typer.Option("--max-negative", min=0, help="Noise documents kept per question.")] = 10
    max_questions: Annotated[
        int | None, typer.Option("--max-questions", min=1, help="Use only the first N questions.")
    ] = None
    min_positives: Annotated[
        int,
        typer.Option(
            "--min-positives",
            min=1,
            help="Keep only questions with at least this many supporting passages "
            "(e.g. 5 for a noise testbed whose ratio 0 has no noise at 5 documents).",
        ),
    ] = 1
    lang: Annotated[str, typer.Option("--lang", help="en | zh | auto (joins integration questions).")] = "auto"
    seed: Annotated[int, typer.Option("--seed", help="Seed of integration pairing.")] = 0


@robust_app.command("build")
@with_flags(BuildFlags)
def build_cmd(flags: BuildFlags) -> None:
    """Build robustness testbeds from your exam (or QA file) and index."""
    from ragrade import api
    from ragrade.cli.common import echo_json, output_path

    paths = api.build_testbeds(
        output_path(flags.out), flags.index, exam=flags.exam, qa=flags.qa, retriever=flags.retriever, k=flags.k,
        max_positive=flags.max_positive, max_negative=flags.max_negative, seed=flags.seed, lang=flags.lang,
        max_questions=flags.max_questions, min_positives=flags.min_positives,
    )  # fmt: skip
    rep = paths.report
    dropped = rep.get("dropped")
    echo_json({"questions": rep["questions"], "base": rep["base"], "integration": rep["integration"],
               "counterfactual": rep["counterfactual"], "dropped": len(dropped) if isinstance(dropped, list) else 0,
               "files": dict(paths)})  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TableFlags:
    """The options of ``ragrade robust table``."""

    out: Annotated[Path | None, typer.Option("--out", help="Write the table as CSV here.")] = None


@robust_app.command("table")
@with_flags(TableFlags)
def table_cmd(
    runs: list[Path] = typer.Argument(..., help="Run directories or metrics.json files (one testbed)."),
    *,
    flags: TableFlags,
) -> None:
    """Combine runs into one paper-shaped table (one row per model, one column per noise ratio)."""
    from ragrade import api
    from ragrade.cli.common import output_path

    table = api.robust_table(runs, output_path(flags.out))  # `ragrade --dry-run`: the run's temporary folder
    typer.echo(table.render())


def register(app: typer.Typer) -> None:
    """Add the ``robust`` group to ``app``."""
    app.add_typer(robust_app, name="robust")
