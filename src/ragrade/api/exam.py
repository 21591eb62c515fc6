"""Exams and grids: generate an exam, describe it, let a grid take it (adaptively too) or answer a QA file
(``ragrade exam generate|stats|take``, ``qa answer``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike, settings_layer
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.adaptive.runner import RoundFn
    from ragrade.api.exam_run import AdaptiveExamRun, ExamRun
    from ragrade.api.types import AdaptivePlan, GeneratedExam
    from ragrade.corpus.types import Chunk
    from ragrade.exam.config import ExamConfig
    from ragrade.llm.options import LLMOptions
    from ragrade.progress import ProgressFn
    from ragrade.qa.run import QAAnswerResult
    from ragrade.retrieval.index import Index
    from ragrade.run.spec import SweepConfig


def generate_exam(
    chunks: Sequence[Chunk] | Index | PathLike,
    out: PathLike,
    *,
    n: int | None = None,
    llm: str = "offline",
    config: ExamConfig | None = None,
    embedder: str | None = None,
    llm_options: LLMOptions | Mapping[str, Any] | None = None,
    max_failed: float | None = None,
    check: bool = True,
    progress: Callable[[int, int, int], None] | None = None,
    **settings: Any,
) -> GeneratedExam:
    """Write a multiple-choice exam from chunks (``ragrade exam generate``); returns its questions (a list).

    ``chunks``: chunk objects, an opened index, or a chunks JSONL file / index folder. ``llm``: ``offline``
    (cloze questions, no LLM) or PROVIDER/MODEL, built with ``llm_options`` (``base_url``, ``concurrency``,
    ``timeout``, ...). ``settings`` are :class:`~ragrade.exam.config.ExamConfig` fields (``seed``,
    ``topic_field``, ``oversample``, ...). Writes the exam JSONL ``out`` and its sidecars
    ``<stem>.funnel.json`` and ``<stem>.rejected.jsonl``. DataError when no question survived.
    ``llm_options``: an :class:`~ragrade.llm.options.LLMOptions` or its fields. ``progress(done, target,
    valid)`` follows the candidates written. The result has the exam's ``funnel``, its ``generator`` and
    the generation requests (``failures``). Raises (exit-code errors) when more requests failed than
    ``max_failed`` allows, after the exam is written (``check=False``: returns it anyway; ``result.check()``
    raises then).
    """
    from ragrade.api.types import EXAM_RESUME, GeneratedExam
    from ragrade.config import build_config
    from ragrade.exam.config import ExamConfig
    from ragrade.exam.generate import generate_exam_full, write_exam_checked
    from ragrade.exam.inputs import load_chunks, resolve_generator_llm
    from ragrade.llm.failures import exam_request_tally

    layer = {**settings, "n": n}
    cfg = build_config(ExamConfig, settings_layer(config), layer, source="exam settings")
    data: list[Chunk]
    source: str | None
    if isinstance(chunks, (str, Path)):
        data, source = load_chunks(chunks), str(chunks)
    elif hasattr(chunks, "chunks") and hasattr(chunks, "path"):  # an opened index
        data, source = list(chunks.chunks), str(chunks.path)
    else:
        data, source = list(chunks), None
    from ragrade.llm.options import LLMOptions

    if not isinstance(llm_options, LLMOptions):  # its fields, from a Python caller
        llm_options = build_config(LLMOptions, dict(llm_options or {}), source="llm_options")
    model = resolve_generator_llm(llm, llm_options)
    emb = None
    if embedder is not None:
        from ragrade.embedding.embed import create_embedder

        emb = create_embedder(embedder)
    result = generate_exam_full(data, model, cfg, embedder=emb, progress=progress)
    tally = exam_request_tally(result, model)
    if not result.questions and tally.n_failed:  # every survivor lost to failed requests: say so
        tally.check(EXAM_RESUME, 0.0)
    write_exam_checked(out, result, cfg, input_path=source)
    gen = result.generator
    exam = GeneratedExam(
        list(result.questions), out=Path(out), funnel=result.funnel, generator=gen, failures=tally,
        notes=generator_notes({"generator": gen}),
    )  # fmt: skip
    if check:
        exam.check(max_failed)
    return exam


def generator_notes(meta: dict[str, Any] | None) -> list[str]:
    """The notes on an exam written by the generator ``meta`` names (an exam header's meta, or
    ``{"generator": ...}``): the offline-exam note for the offline cloze generator's (its questions favour
    lexical retrieval, see :data:`ragrade.exam.offline.OFFLINE_EXAM_NOTE`), else none."""
    from ragrade.exam.offline import OFFLINE_EXAM_NOTE, is_offline_exam

    return [OFFLINE_EXAM_NOTE] if meta is not None and is_offline_exam(meta) else []


def exam_notes(exam: str | Path) -> list[str]:
    """The notes on ``exam`` a reader of any run on it should see: the offline-exam note when its header says
    the offline cloze generator wrote it (see :data:`ragrade.exam.offline.OFFLINE_EXAM_NOTE`)."""
    from ragrade.exam.files import read_exam

    header, _ = read_exam(exam)
    return generator_notes(header.meta if header else None)


EASY_EXAM_ACCURACY = 0.95  # a retrieval pipeline at least this accurate (and not below the oracle): too easy


def easy_exam_warning(summary: pd.DataFrame, offline: bool) -> str | None:
    """One line when a retrieval pipeline (not the oracle, not closed book) scores at least
    :data:`EASY_EXAM_ACCURACY` and at least the oracle's accuracy (the best oracle's; the threshold alone
    when the grid has no oracle): such an exam cannot rank retrievers. None otherwise."""
    from ragrade.retrieval.base import retriever_caps

    if summary.empty or not {"pipeline", "retriever", "accuracy"} <= set(summary.columns):
        return None
    rows = [r for r in summary.to_dict(orient="records") if r["accuracy"] == r["accuracy"]]  # NaN: none answered
    caps = {str(r["retriever"]): retriever_caps(str(r["retriever"])) for r in rows}
    oracle = [float(r["accuracy"]) for r in rows if caps[str(r["retriever"])].needs_gold]
    bar = max([EASY_EXAM_ACCURACY, *oracle])
    easy = [
        r
        for r in rows
        if caps[str(r["retriever"])].retrieves and not caps[str(r["retriever"])].needs_gold and r["accuracy"] >= bar
    ]
    if not easy:
        return None
    best = max(easy, key=lambda r: float(r["accuracy"]))
    than = f" (the oracle {max(oracle):.1%})" if oracle else ""
    why = (
        "its offline cloze questions copy their source sentence, so matching words finds the answer; write the "
        "exam with an LLM (`ragrade exam generate INDEX --llm openai/MODEL`) or quote less of the source "
        '(`stem_window = 6`, `stem_subject = "topic"` in the [exam] table)'
        if offline
        else "its questions restate their source passages closely; ask questions that paraphrase them"
    )
    return (
        f"the exam is too easy to rank retrievers: {best['pipeline']} answers {float(best['accuracy']):.1%}"
        f"{than}; {why}"
    )


@dataclass(frozen=True)
class ExamStats:
    """What :func:`exam_stats` read: the exam's analytics, its generation funnel (None when not recorded) and
    the header's metadata (how it was generated)."""

    analytics: dict[str, Any]
    funnel: dict[str, Any] | None
    meta: dict[str, Any] | None


def exam_stats(exam: PathLike) -> ExamStats:
    """An exam's analytics (letter balance, guessing baselines, lengths, taxonomy) and its generation funnel
    (``ragrade exam stats``)."""
    from ragrade.exam.analytics import exam_analytics
    from ragrade.exam.files import read_exam
    from ragrade.exam.funnel import read_funnel

    header, questions = read_exam(exam)
    meta = dict(header.meta) if header else None
    return ExamStats(exam_analytics(questions), read_funnel(exam, header.meta if header else None), meta)


def take_exam(
    exam: PathLike,
    out: PathLike,
    *,
    indexes: Mapping[str, Index | PathLike] | Index | PathLike | None = None,
    config: SweepConfig | None = None,
    overwrite: bool = False,
    max_failed: float | None = None,
    check: bool = True,
    progress: ProgressFn | None = None,
    config_files: Sequence[PathLike] = (),
    **settings: object,
) -> ExamRun:
    """Let every pipeline of a grid take the exam (``ragrade exam take``); resumable.

    ``indexes``: ``{label: index}`` (an opened index or its folder), or one index. ``settings``: the grid
    axes (``llms``, ``retrievers``, ``k``, ``icl``, ``chunkers``, ``prompts``, ``methods``, ``query``,
    ``post``: a value or a list; the grid is every combination) and the other
    :class:`~ragrade.run.spec.SweepConfig` fields (``seed``, ``limit``, ``llm_options``, ``transform_llm``,
    ...), over ``config`` when given (the settings object ``ragrade exam take`` builds from its flags and
    ``--config`` file, recorded in the manifest with ``config_files``). Writes the run directory ``out``
    (``responses.parquet``, ``summary.csv``, ``summary_by_tag.csv``, ``manifest.json``, ``samples.jsonl``).
    Returns a result whose ``responses`` and ``summary`` are DataFrames, with ``notes`` on the exam (an offline
    exam's) and ``warnings`` on the results (an exam too easy to rank retrievers). Raises (exit-code errors) when
    more requests failed than ``max_failed`` allows (``check=False``: returns the result anyway); a rerun
    asks only the failed ones again. ``progress(pipeline, rows_done, rows_of_pipeline)`` follows the run.
    """
    from ragrade.api.exam_run import exam_run
    from ragrade.llm.failures import check_grid_failures
    from ragrade.run.sweep import run_sweep

    if not Path(exam).is_file():
        raise ConfigError(f"{exam}: exam file not found")
    cfg = _sweep_config(config, indexes, settings)
    files = [str(f) for f in config_files]
    ran = run_sweep(exam, cfg, out, overwrite=overwrite, progress=progress, config_files=files)
    notes = exam_notes(exam)
    warning = easy_exam_warning(ran.summary, offline=bool(notes))
    if ran.extended:  # a grid that only added pipelines or questions: what was derived from the old grid is stale
        notes = [
            *notes,
            f"{ran.extended}; comparisons and IRT fits computed before are out of date until "
            f"`ragrade compare {out} --all` / `ragrade irt fit {out}` (the report marks them so)",
        ]
    result = exam_run(ran, notes, [*input_corpus_warnings(ran.run_dir), *([warning] if warning else [])])
    if check:
        check_grid_failures(result.responses, max_failed)
    return result


def take_exam_adaptive(
    exam: PathLike,
    out: PathLike,
    *,
    config: SweepConfig,
    overwrite: bool = False,
    on_round: RoundFn | None = None,
    config_files: Sequence[PathLike] = (),
) -> AdaptiveExamRun:
    """Let the grid of ``config`` take the exam adaptively (``ragrade exam take --adaptive``): ask only
    informative questions, stop a pipeline once its ability is known to ``config.adaptive``'s precision.

    ``config.adaptive`` (budget, target SE, calibration, ...) is used as given, switched on. Writes the run
    directory ``out``; the result has the estimates (``summary``), the cost, the round log, warnings,
    diagnostics and ``notes`` on the exam (an offline exam's). ``on_round(record)`` is called after each round.
    """
    from ragrade.adaptive import run_adaptive
    from ragrade.api.exam_run import adaptive_exam_run

    acfg = config.adaptive.model_copy(update={"enabled": True}).check()
    files = [str(f) for f in config_files]
    result = run_adaptive(exam, config, acfg, out, overwrite=overwrite, on_round=on_round, config_files=files)
    result.warnings[:0] = input_corpus_warnings(result.run_dir)
    return adaptive_exam_run(result, exam_notes(exam))


def plan_adaptive(exam: PathLike, config: SweepConfig) -> AdaptivePlan:
    """What :func:`take_exam_adaptive` would ask, without asking (``ragrade --dry-run exam take --adaptive``):
    pipelines, questions, the full grid's requests, an upper bound and an expected number of requests, and
    ``notes`` on the exam (an offline exam's)."""
    from ragrade.adaptive import adaptive_plan
    from ragrade.api.types import AdaptivePlan

    acfg = config.adaptive.model_copy(update={"enabled": True}).check()
    plan = adaptive_plan(exam, config, acfg)
    return AdaptivePlan(
        pipelines=int(plan["pipelines"]),
        questions=int(plan["questions"]),
        full_grid_requests=int(plan["full_grid_requests"]),
        upper_bound_requests=int(plan["upper_bound_requests"]),
        expected_requests=int(plan["expected_requests"]),
        expected_rounds=int(plan["expected_rounds"]),
        calibration=str(plan["calibration"]),
        reference_pipelines=tuple(str(p) for p in plan["reference_pipelines"]),
        notes=tuple(exam_notes(exam)),
    )


def answer_qa(
    qa: PathLike,
    out: PathLike,
    *,
    indexes: Mapping[str, Index | PathLike] | Index | PathLike | None = None,
    config: SweepConfig | None = None,
    max_tokens: int | Sequence[int] = 256,
    temperature: float | Sequence[float] = 0.0,
    max_failed: float | None = None,
    check: bool = True,
    progress: ProgressFn | None = None,
    overwrite: bool = False,
    **settings: object,
) -> QAAnswerResult:
    """Let every pipeline of a grid answer a QA file in free text (``ragrade qa answer``); resumable.

    The grid is given as for :func:`take_exam`; several ``max_tokens`` or ``temperature`` values make
    them factors of the grid. Writes the run directory ``out`` (``answers.jsonl``, ``summary.csv``,
    ``manifest.json``), ready for :func:`judge_answers`; the result's ``summary`` has a dict per pipeline.
    A rerun into ``out`` resumes, extends (more pipelines or questions) or is refused naming each difference;
    ``overwrite`` discards what ``out`` holds first.
    """
    from ragrade.llm.failures import check_grid_failures
    from ragrade.qa.run import run_qa_answers

    if not Path(qa).is_file():
        raise ConfigError(f"{qa}: QA file not found")
    generation: dict[str, float] = {}
    axes: dict[str, list[float]] = {}
    for name, value in (("max_tokens", max_tokens), ("temperature", temperature)):
        values: list[float] = list(dict.fromkeys(value)) if isinstance(value, Sequence) else [value]
        if len(values) == 1:
            generation[name] = values[0]
        else:
            axes[name] = values
    cfg = _sweep_config(config, indexes, settings)
    if axes:  # several values: factors of the grid
        cfg = cfg.model_copy(update={"grid": cfg.grid.model_validate({**cfg.grid.model_dump(), **axes})})
    result = run_qa_answers(qa, cfg, out, generation=generation, progress=progress, overwrite=overwrite)
    result.warnings[:0] = input_corpus_warnings(result.run_dir)
    if check:
        check_grid_failures(result.rows, max_failed)
    return result


def input_corpus_warnings(run_dir: PathLike) -> list[str]:
    """The line a grid run recorded when its index lacks source passages of its exam or QA file
    (:mod:`ragrade.run.input_corpus`); none when it holds them all."""
    from ragrade.errors import DataError
    from ragrade.run.input_corpus import recorded_warnings
    from ragrade.run.manifest import read_manifest

    try:
        return recorded_warnings(read_manifest(run_dir))
    except DataError:
        return []


def _sweep_config(
    config: SweepConfig | None,
    indexes: Mapping[str, Index | PathLike] | Index | PathLike | None,
    settings: Mapping[str, object],
) -> SweepConfig:
    """The grid command's SweepConfig: grid axes (a value or a list) and other fields over ``config``."""
    from ragrade.run.spec import DEPRECATED_AXES, GridConfig, build_sweep_config, upgrade_grid_keys

    if config is not None and not settings and indexes is None:
        return config  # the settings object as built (e.g. by the command line)
    axes = {*GridConfig.model_fields, *DEPRECATED_AXES}
    grid = {k: list(v) if isinstance(v, list | tuple) else [v] for k, v in settings.items() if k in axes}
    upgrade_grid_keys(grid, "keyword settings")
    rest = {k: v for k, v in settings.items() if k not in axes}
    return build_sweep_config(settings_layer(config), {**rest, "grid": grid, "indexes": _index_paths(indexes)})


def _index_paths(indexes: Mapping[str, Index | PathLike] | Index | PathLike | None) -> dict[str, str] | None:
    """``{label: folder}`` from index objects or folders (one alone is labelled by its folder's name)."""
    if indexes is None:
        return None
    if not isinstance(indexes, Mapping):
        folder = str(getattr(indexes, "path", indexes))
        return {Path(folder).name or folder: folder}
    return {label: str(getattr(ix, "path", ix)) for label, ix in indexes.items()}
