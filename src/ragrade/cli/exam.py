"""CLI verbs of the exam stage: ``ragrade exam generate|stats`` (``take`` is added by cli/sweep.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragrade.cli.common import LOADING, check_out_file, command_progress, echo_json, output_path
from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import LLMFlags
from ragrade.llm.failures import MAX_FAILED_HELP

if TYPE_CHECKING:
    from ragrade.api.types import GeneratedExam
    from ragrade.exam.config import ExamConfig
    from ragrade.llm.options import LLMOptions

exam_app = typer.Typer(help="Generate, inspect and take multiple-choice exams.", no_args_is_help=True)


def _file_layer(config: Path | None) -> dict[str, Any]:
    if config is None:
        return {}
    from ragrade.config import load_toml
    from ragrade.config_paths import resolve_section

    data = load_toml(config)
    section = data.get("exam", data)
    paths = ("prompt_file", "system_prompt_file")
    return dict(resolve_section(section, config, paths=paths)) if isinstance(section, dict) else {}


def _filter_layer(share: float | None, intra: float | None, extra: float | None, dup: float | None) -> dict[str, Any]:
    layer: dict[str, Any] = {}
    if share is not None:
        for name in ("intra_candidate", "extra_candidate"):
            layer[name] = {"mode": "quantile", "share": share}
    if intra is not None:
        layer["intra_candidate"] = {"mode": "fixed", "cosine": intra}
    if extra is not None:
        layer["extra_candidate"] = {"mode": "fixed", "cosine": extra}
    if dup is not None:
        layer["near_duplicate"] = {"mode": "fixed", "cosine": dup}
    return layer


@dataclass(frozen=True, kw_only=True)
class GenerateFlags(LLMFlags):
    """The options of ``ragrade exam generate`` (``None``: not given, never overrides the config's \\[exam] table)."""

    n: Annotated[int | None, typer.Option("--n", "-n", min=1, help="Questions wanted (default 100).")] = None
    llm: Annotated[
        str,
        typer.Option(
            "--llm",
            help="PROVIDER/MODEL that writes the questions, or 'offline' "
            "(offline/cloze: fact-based cloze questions, no LLM).",
        ),
    ] = "offline"
    out: Annotated[Path, typer.Option("--out", "-o", help="The exam file to write (JSONL).")]
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of sampling and shuffling (default 0).")] = None
    topic_field: Annotated[
        str | None,
        typer.Option(
            "--topic-field",
            help="Stratify sampling by this chunk metadata field "
            "(e.g. topic, source, doc_id); also the field of the topic tag.",
        ),
    ] = None
    prompt: Annotated[
        Path | None,
        typer.Option(
            "--prompt",
            exists=True,
            dir_okay=False,
            help="A file with the user prompt template ({document}, {domain}, {title}).",
        ),
    ] = None
    system_prompt: Annotated[
        Path | None,
        typer.Option("--system-prompt", exists=True, dir_okay=False, help="A file with the system prompt template."),
    ] = None
    domain: Annotated[str | None, typer.Option("--domain", help="A few words naming the corpus, for the prompt.")] = (
        None
    )
    max_failed: Annotated[float | None, typer.Option("--max-failed", help=MAX_FAILED_HELP)] = None
    temperature: Annotated[
        float | None, typer.Option("--temperature", min=0.0, help="Sampling temperature (default 0.7).")
    ] = None
    no_json: Annotated[bool, typer.Option("--no-json", help="Do not ask for structured JSON output.")] = False
    oversample: Annotated[
        float | None,
        typer.Option(
            "--oversample",
            min=1.0,
            help="Chunks asked per wanted question in the first round (default 1.3); later rounds are sized by "
            "the share kept. An LLM asks at most n x this x max_rounds (or [exam] max_requests).",
        ),
    ] = None
    filter_share: Annotated[
        float | None,
        typer.Option(
            "--filter-share",
            min=0.0,
            max=0.5,
            help="Share removed by each similarity filter (quantile thresholds; default 0.05).",
        ),
    ] = None
    intra_cosine: Annotated[
        float | None,
        typer.Option(
            "--intra-cosine",
            min=-1.0,
            max=1.0,
            help="Fixed cosine threshold of the intra-candidate filter (instead of a quantile).",
        ),
    ] = None
    extra_cosine: Annotated[
        float | None,
        typer.Option(
            "--extra-cosine",
            min=-2.0,
            max=2.0,
            help="Fixed threshold of the extra-candidate filter on cosine(chunk, distractor) - cosine(chunk, answer).",
        ),
    ] = None
    dup_cosine: Annotated[
        float | None,
        typer.Option("--dup-cosine", min=-1.0, max=1.0, help="Near-duplicate cosine threshold (default 0.95)."),
    ] = None
    shuffle: Annotated[
        str | None, typer.Option("--shuffle", help="balanced (each letter equally often) or random.")
    ] = None
    absurd: Annotated[bool, typer.Option("--absurd", help="Write a sanity exam whose distractors are unrelated.")] = (
        False
    )
    embedder: Annotated[
        str | None, typer.Option("--embedder", help="Embedder spec for the filters (default minilm).")
    ] = None
    config: Annotated[Path | None, typer.Option("--config", help="A TOML file; its \\[exam] table sets defaults.")] = (
        None
    )
    json_out: Annotated[bool, typer.Option("--json", help="Print the funnel and analytics as JSON.")] = False

    def layer(self) -> dict[str, Any]:
        """The :class:`~ragrade.exam.config.ExamConfig` layer of these flags (over the config file's)."""
        return {
            "n": self.n,
            "seed": self.seed,
            "topic_field": self.topic_field,
            "prompt_file": str(self.prompt) if self.prompt else None,
            "system_prompt_file": str(self.system_prompt) if self.system_prompt else None,
            "domain": self.domain,
            "temperature": self.temperature,
            "json_output": False if self.no_json else None,
            "oversample": self.oversample,
            "shuffle": self.shuffle,
            "absurd": True if self.absurd else None,
            **_filter_layer(self.filter_share, self.intra_cosine, self.extra_cosine, self.dup_cosine),
        }


@exam_app.command("generate")
@with_flags(GenerateFlags)
def generate_cmd(
    chunks: Annotated[Path, typer.Argument(help="A chunks JSONL file or an index folder.")],
    flags: GenerateFlags,
) -> None:
    """Write a multiple-choice exam from CHUNKS: sample, generate, filter, shuffle; record the funnel."""
    from ragrade.config import build_config
    from ragrade.exam.config import ExamConfig
    from ragrade.llm.options import LLMOptions

    out = check_out_file(output_path(flags.out))  # `ragrade --dry-run`: the run's temporary folder
    file_layer = _file_layer(flags.config)
    file_options = file_layer.pop("llm_options", None)  # [exam.llm_options]: how the generator LLM is reached
    cfg = build_config(ExamConfig, file_layer, flags.layer(), source="exam options")
    options = build_config(LLMOptions, file_options, flags.llm_layer(), source="exam llm_options")
    exam = _generate_with_progress(chunks, out, flags.llm, cfg, options, flags.embedder)
    _print_generated_exam(out, exam, flags.json_out)
    print_notes(exam.notes)
    exam.check(flags.max_failed)  # after the written exam is shown


def print_notes(notes: Sequence[str], warnings: Sequence[str] = ()) -> None:
    """Print the notes and warnings a result carries (on stderr, so --json output stays clean)."""
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    for warning in warnings:
        typer.echo(f"ragrade: warning: {warning}", err=True)


def _print_generated_exam(out: Path, result: GeneratedExam, json_out: bool) -> None:
    """Print the analytics of the exam written to ``out``."""
    from ragrade.exam.analytics import exam_analytics, format_analytics
    from ragrade.exam.funnel import shortfall_line

    stats = exam_analytics(result)
    if json_out:
        echo_json({"exam": str(out), "funnel": result.funnel, "analytics": stats})
    else:
        typer.echo(f"wrote {len(result)} questions to {out}")
        typer.echo(format_analytics(stats, result.funnel))  # its funnel ends with the shortfall line, if any
    why = shortfall_line(result.funnel)
    if why is not None:  # on the terminal whatever stdout is (a --json pipe, a file)
        typer.echo(f"ragrade: warning: exam generate: {why}", err=True)


def _generate_with_progress(
    chunks: Path,
    out: Path,
    llm: str,
    cfg: ExamConfig,
    options: LLMOptions,
    embedder: str | None,
) -> GeneratedExam:
    from ragrade import api, interrupt

    interrupt.progress(0, math.ceil(cfg.n * cfg.oversample), "question candidates written")
    with command_progress("exam generate", status=LOADING) as shown:

        def track(done: int, target: int, valid: int) -> None:
            interrupt.progress(done, target, "question candidates written")  # what an interruption reports
            shown.update("candidates", done, target)

        return api.generate_exam(
            chunks, out, llm=llm, config=cfg, embedder=embedder, llm_options=options, check=False, progress=track
        )


@dataclass(frozen=True, kw_only=True)
class StatsFlags:
    """The options of ``ragrade exam stats``."""

    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False


@exam_app.command("stats")
@with_flags(StatsFlags)
def stats_cmd(exam: Path = typer.Argument(..., help="An exam JSONL file."), *, flags: StatsFlags) -> None:
    """Print an exam's analytics (letter balance, guessing baselines, taxonomy) and its generation funnel."""
    from ragrade import api
    from ragrade.exam.analytics import format_analytics

    stats = api.exam_stats(exam)
    if flags.json_out:
        echo_json({"exam": str(exam), "analytics": stats.analytics, "funnel": stats.funnel})
    else:
        typer.echo(format_analytics(stats.analytics, stats.funnel))


def register(app: typer.Typer) -> None:
    """Add the ``exam`` group to ``app``."""
    app.add_typer(exam_app, name="exam")
