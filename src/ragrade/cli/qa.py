"""CLI verbs for free-text answers: ``ragrade qa generate``, ``ragrade qa answer`` and ``ragrade judge``.

Heavy imports (torch, models, the LLM layer) happen inside the commands so
that ``ragrade --help`` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragrade.cli.common import (
    LOADING,
    check_out_file,
    command_progress,
    echo_json,
    output_path,
    split_list,
    split_numbers,
)
from ragrade.cli.llm_flags import LLMFlags
from ragrade.cli.pipelines import (
    GridFlags,
    RunDirOption,
    check_grid_failures,
    parse_pairs,
    with_flags,
)
from ragrade.errors import ConfigError
from ragrade.llm.failures import MAX_FAILED_HELP

if TYPE_CHECKING:
    from ragrade.qa.generate import QAGenConfig

qa_app = typer.Typer(
    name="qa", help="Synthetic question/answer datasets and free-text answers from pipelines.", no_args_is_help=True
)


def _config_layer(path: Path | None, table: str) -> dict[str, object]:
    if path is None:
        return {}
    from ragrade.config import load_toml
    from ragrade.config_paths import resolve_section

    data = load_toml(path)
    layer = data.get(table, data)
    if not isinstance(layer, dict):
        raise ConfigError(f"{path}: [{table}] must be a table")
    return dict(resolve_section(layer, path, llms=("llm",), maps=("prompts",)))


@dataclass(frozen=True)
class JudgeFlags(LLMFlags):
    """The options of ``ragrade judge score`` (``None``: not given, never overrides the config's \\[judge] table)."""

    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics", "-m", help="Comma list of: correctness, faithfulness, relevancy, claims, bertscore, exact."
        ),
    ] = None
    llm: Annotated[
        str | None,
        typer.Option("--llm", help="Judge model, PROVIDER/MODEL (offline/judge: the offline claims baseline)."),
    ] = None
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output directory (default RUN_DIR/judge).")] = None
    field: Annotated[
        list[str] | None,
        typer.Option(
            "--field",
            help="Map a field: TARGET=SOURCE (repeatable), targets id, query, answer, contexts, reference, config, "
            "error.",
        ),
    ] = None
    samples: Annotated[
        int | None, typer.Option("--samples", min=1, help="Judge samples per answer (self-consistency).")
    ] = None
    temperature: Annotated[
        float | None, typer.Option("--temperature", min=0.0, help="Judge temperature (default 0).")
    ] = None
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of judge sampling and bootstrap.")] = None
    screen_top: Annotated[
        int | None, typer.Option("--screen-top", help="Rank configurations by BERTScore, LLM-judge only the top K.")
    ] = None
    prompt: Annotated[list[str] | None, typer.Option("--prompt", help="Prompt file for a judge: METRIC=PATH.")] = None
    bertscore_model: Annotated[
        str | None, typer.Option("--bertscore-model", help="Local encoder folder or 'minilm'.")
    ] = None
    bertscore_layer: Annotated[
        int | None, typer.Option("--bertscore-layer", min=0, help="Encoder layer (default: last).")
    ] = None
    bertscore_idf: Annotated[bool | None, typer.Option("--bertscore-idf/--no-bertscore-idf", help="Idf weighting.")] = (
        None
    )
    pass_threshold: Annotated[float | None, typer.Option("--pass-threshold", help="Correctness counted as a pass.")] = (
        None
    )
    batch_size: Annotated[int | None, typer.Option("--batch-size", min=1, help="Answers per saved batch.")] = None
    max_failed: Annotated[float | None, typer.Option("--max-failed", help=MAX_FAILED_HELP)] = None
    config: Annotated[Path | None, typer.Option("--config", help="TOML file (a \\[judge] table).")] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print the full summary as JSON.")] = False

    def layer(self) -> dict[str, object]:
        """The :class:`~ragrade.judge.run.JudgeRunConfig` layer of these flags (over the config file's)."""
        from ragrade.judge.inputs import parse_field_map

        return {
            "metrics": split_list(self.metrics, "--metrics"),
            "llm": self.llm,
            "fields": parse_field_map(self.field) or None,
            "samples": self.samples,
            "temperature": self.temperature,
            "seed": self.seed,
            "screen_top": self.screen_top,
            "prompts": parse_pairs(self.prompt, "--prompt"),
            "bertscore_model": self.bertscore_model,
            "bertscore_layer": self.bertscore_layer,
            "bertscore_idf": self.bertscore_idf,
            "pass_threshold": self.pass_threshold,
            "batch_size": self.batch_size,
            "llm_options": self.llm_layer(),
        }


@with_flags(JudgeFlags)
def judge(
    answers: Annotated[Path, typer.Argument(help="Answers JSONL (or a `qa answer` run directory).")],
    flags: JudgeFlags,
) -> None:
    """Score free-text answers (ours or any system's) with LLM judges, BERTScore and exact match.

    Human labels (`ragrade label`) correct the judges' means: `ragrade judge calibrate SCORES --human LABELS`.
    """
    from ragrade import api
    from ragrade.config import build_config
    from ragrade.judge.run import JudgeRunConfig

    cfg = build_config(JudgeRunConfig, _config_layer(flags.config, "judge"), flags.layer(), source="judge options")
    out = output_path(flags.out)  # `ragrade --dry-run`: the run's temporary folder
    if out is None:
        if not answers.is_dir():
            raise ConfigError("--out is required when ANSWERS is a file")
        out = answers / "judge"
    with command_progress("judge", status=LOADING) as shown:
        summary = api.judge_answers(answers, out, config=cfg, check=False, progress=shown.update)
    if flags.as_json:
        echo_json(summary)
    else:
        _print_summary(summary, summary.out)
    summary.check(flags.max_failed)  # after the summary is shown


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


@dataclass(frozen=True, kw_only=True)
class QAGenerateFlags(LLMFlags):
    """The options of ``ragrade qa generate``."""

    n: Annotated[int, typer.Option("--n", help="Number of triplets.")] = 50
    llm: Annotated[str, typer.Option("--llm", help="PROVIDER/MODEL, or 'offline' for the extractive baseline.")]
    out: Annotated[Path, typer.Option("--out", "-o", help="QA file to write (JSONL).")]
    qrels: Annotated[
        Path | None, typer.Option("--qrels", help="Also write the qrels view (query -> relevant ids).")
    ] = None
    seed: Annotated[int, typer.Option("--seed", help="Seed of chunk sampling (and the LLM).")] = 0
    min_chars: Annotated[int, typer.Option("--min-chars", min=0, help="Skip chunks shorter than this.")] = 120
    oversample: Annotated[
        float,
        typer.Option(
            "--oversample", min=1.0, help="LLM requests at most per wanted triplet (n x this + 5; offline: no limit)."
        ),
    ] = 5.0
    max_tokens: Annotated[
        int,
        typer.Option("--max-tokens", min=16, help="Reply budget per triplet (a cut-off reply is counted unparsed)."),
    ] = 256
    prompt: Annotated[
        Path | None,
        typer.Option("--prompt", exists=True, dir_okay=False, help="Prompt file with {passage} (and {source})."),
    ] = None
    max_failed: Annotated[float | None, typer.Option("--max-failed", help=MAX_FAILED_HELP)] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print the funnel as JSON.")] = False

    def config(self) -> QAGenConfig:
        """The generation settings of these flags."""
        from ragrade.qa.generate import QAGenConfig

        prompt_file = str(self.prompt) if self.prompt else None
        return QAGenConfig(
            n=self.n, seed=self.seed, min_chunk_chars=self.min_chars, prompt_file=prompt_file,
            max_tokens=self.max_tokens, oversample=self.oversample,
        )  # fmt: skip


@qa_app.command("generate")
@with_flags(QAGenerateFlags)
def qa_generate(
    source: Annotated[Path, typer.Argument(help="Chunks JSONL or an index directory.")],
    flags: QAGenerateFlags,
) -> None:
    """Generate synthetic (question, reference answer, context) triplets from chunks."""
    from ragrade import api

    out, qrels = output_path(check_out_file(flags.out)), output_path(flags.qrels)  # `--dry-run`: a temporary folder
    with command_progress("qa generate") as shown:
        items = api.generate_qa(
            source, out, llm=flags.llm, config=flags.config(), qrels=qrels, llm_options=flags.llm_options(),
            check=False, progress=shown.update,
        )  # fmt: skip
    n = flags.n
    if flags.as_json:
        echo_json({"written": len(items), "requested": n, "out": str(out), "generator": items.generator,
                   "funnel": items.funnel})  # fmt: skip
    else:
        counts = ", ".join(f"{k}={v}" for k, v in items.funnel.items() if k != "rejected")
        typer.echo(f"wrote {len(items)} of {n} requested triplets to {out} ({items.generator}); funnel: {counts}")
        if items.shortfall is not None:
            typer.echo(f"ragrade: warning: {items.shortfall}", err=True)
    items.check(flags.max_failed)  # after the triplets are shown


@dataclass(frozen=True)
class AnswerFlags(GridFlags):
    """The options of ``qa answer``: the grid's (:class:`GridFlags`) and the answers' length and temperature."""

    prompt: Annotated[
        list[str] | None, typer.Option("--prompt", help="[NAME=]FILE answer template with {question}.")
    ] = None
    max_tokens: Annotated[
        str, typer.Option("--max-tokens", help="Answer length budget; a comma list makes it a factor of the grid.")
    ] = "256"
    temperature: Annotated[
        str, typer.Option("--temperature", help="Sampling temperature; a comma list makes it a factor of the grid.")
    ] = "0"
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Discard a previous run in --out instead of resuming.")
    ] = False

    def generation(self) -> tuple[list[int], list[float]]:
        """The ``--max-tokens`` and ``--temperature`` values (one: a setting of the run; several: grid factors)."""
        tokens = split_numbers(self.max_tokens, "--max-tokens", int) or [256]
        temps = split_numbers(self.temperature, "--temperature", float) or [0.0]
        if any(t <= 0 for t in tokens) or any(not 0 <= t <= 2 for t in temps):
            raise ConfigError("--max-tokens must be positive and --temperature between 0 and 2")
        return tokens, temps


@qa_app.command("answer")
@with_flags(AnswerFlags)
def qa_answer(
    qa: Annotated[Path, typer.Argument(help="QA file from `ragrade qa generate`.")],
    out: RunDirOption,
    flags: AnswerFlags,
) -> None:
    """Let every pipeline of the grid answer the QA questions in free text; resumable; writes a run directory.

    A failed LLM request is missing (never wrong); rerunning the command asks only the failed ones again.
    """
    from ragrade.api import answer_qa

    out = output_path(out)  # `ragrade --dry-run`: the run's temporary folder
    tokens, temps = flags.generation()  # options first, then files
    if not qa.is_file():
        raise ConfigError(f"{qa}: QA file not found")
    cfg = flags.sweep_config()  # the flags over the --config file
    with command_progress("qa answer", aggregate=True, status=LOADING) as shown:
        result = answer_qa(
            qa,
            out,
            config=cfg,
            max_tokens=tokens,
            temperature=temps,
            progress=shown.advance,
            check=False,
            overwrite=flags.overwrite,
        )
    from ragrade.cli.exam import print_notes

    print_notes((), result.warnings)  # on stderr: an index that lacks the QA file's source passages
    if flags.as_json:
        echo_json({"run_dir": str(result.run_dir), "new_rows": result.n_new_rows, "summary": result.summary})
        check_grid_failures(result.rows, flags.max_failed)
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
    check_grid_failures(result.rows, flags.max_failed)


def register(app: typer.Typer) -> None:
    """Add ``qa`` (generate, answer) to ``app`` (``judge`` is registered by :mod:`ragrade.cli.calibration`)."""
    app.add_typer(qa_app, name="qa")
