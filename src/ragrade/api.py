"""The Python API: the CLI's verbs as functions, for notebooks and scripts.

Each function calls the same stage functions and settings objects as its
verb (``ragrade corpus``, ``chunk``, ``index``, ``exam generate``, ``exam take``,
``qa answer``, ``irt fit``, ``robust build``/``robust run``, ``judge``, ``report``, ``run``), so a
run made here reads exactly like one made on the command line: same files,
same defaults, same errors (:class:`~ragrade.errors.RagradeError` subclasses).
Settings are keyword arguments named as the fields of the verb's settings object
(a list where the flag takes a comma list), over that object when given as ``config=``.

``import ragrade`` stays light: this module is loaded on first use of one of
its names, and it imports each stage (torch, pandas, ...) only when called::

    import ragrade as rg

    docs = rg.load_corpus(demo=True, demo_limit=40)
    chunks = rg.chunk(docs, size=200)
    index = rg.build_index(chunks, "work/index", dense=False)
    rg.generate_exam(chunks, "work/exam.jsonl", n=20)
    result = rg.take_exam("work/exam.jsonl", "work/run", indexes={"rec": index}, retrievers=["closed", "bm25"])
    result.summary                        # a pandas DataFrame
    rg.fit_irt("work/run", model="2pl")
    rg.render_report("work/run")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.errors import ConfigError, DataError
from ragrade.results import RunData, open_run

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.corpus.load import CorpusConfig
    from ragrade.corpus.types import Chunk, Document
    from ragrade.exam.config import ExamConfig
    from ragrade.exam.files import Question
    from ragrade.exam.generate import ExamResult
    from ragrade.irt.problem import FitConfig
    from ragrade.irt.result import IRTResult
    from ragrade.job.config import JobConfig
    from ragrade.job.progress import Display
    from ragrade.job.runner import JobResult
    from ragrade.judge.calibrate import CalibrationConfig
    from ragrade.judge.run import JudgeRunConfig
    from ragrade.llm.options import LLMOptions
    from ragrade.progress import ProgressFn
    from ragrade.qa.run import QAAnswerResult
    from ragrade.retrieval.ask import Assistant
    from ragrade.retrieval.evaluate import RetrievalEvaluation
    from ragrade.retrieval.index import Index, IndexConfig, IndexStats
    from ragrade.robust.run import ModelRun, RobustRunConfig
    from ragrade.run.spec import SweepConfig
    from ragrade.run.sweep import SweepResult

PathLike = str | Path


def _layer(config: Any) -> dict[str, Any]:
    """The fields a settings object was given (the keyword settings go over them)."""
    if config is None:
        return {}
    layer: dict[str, Any] = config.model_dump(exclude_unset=True)
    return layer


# ---------------------------------------------------------------------------------------------------- corpus


def load_corpus(
    paths: Sequence[PathLike] | PathLike = (),
    *,
    demo: bool = False,
    demo_limit: int | None = None,
    demo_topics: Sequence[str] | None = None,
    config: CorpusConfig | None = None,
    out: PathLike | None = None,
    warn: Callable[[str], None] | None = None,
    show: Callable[[dict[str, Any]], None] | None = None,
    **settings: Any,
) -> list[Document]:
    """Load documents from files and folders, or the demo corpus (``ragrade corpus``).

    ``settings`` are :class:`~ragrade.corpus.load.CorpusConfig` fields (``text_field``, ``drop_patterns``,
    ``min_chars``, ...) over ``config`` when given. Skipped files are counted in one warning
    (:mod:`warnings`), or given one by one to ``warn``. Writes the documents JSONL file ``out`` when given
    (as ``ragrade corpus --out``). DataError when no document is usable. ``show`` is given the load summary
    (documents, characters, formats, skipped files by reason, ...; the CLI prints it).
    """
    from ragrade.config import build_config
    from ragrade.corpus.load import CorpusConfig
    from ragrade.corpus.load import load_corpus as _load

    sources = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    if demo == bool(sources):
        raise ConfigError("give paths or demo=True, not both (and not neither)")
    cfg = build_config(CorpusConfig, _layer(config), settings, source="corpus settings")
    header: dict[str, Any] = {"config": cfg.model_dump()}
    if demo:
        from ragrade.corpus.demo import demo_load_report

        report, header["demo"] = demo_load_report(demo_limit, list(demo_topics) if demo_topics else None)
    else:
        report = _load(sources, cfg)
    if warn is None:
        _warn_skipped(report.skipped, report.warnings)
    else:
        for where, why in report.skipped:
            warn(f"skipped {where}: {why}")
        for where, note in report.warnings:
            warn(f"{where}: {note}")
    summary = report.checked_summary(", ".join(sources) or "the demo corpus")
    if out is not None:
        from ragrade.corpus.files import write_documents

        write_documents(out, report.documents, meta={**header, "summary": summary})
    if show is not None:
        show(summary)
    return list(report.documents)


def _warn_skipped(skipped: Sequence[tuple[str, str]], notes: Sequence[tuple[str, str]]) -> None:
    import warnings

    if skipped:
        first = "; ".join(f"{where}: {why}" for where, why in skipped[:3])
        warnings.warn(
            f"ragrade: skipped {len(skipped)} file(s) ({first}{', ...' if len(skipped) > 3 else ''})", stacklevel=3
        )
    for where, note in notes:
        warnings.warn(f"ragrade: {where}: {note}", stacklevel=3)


def chunk(
    docs: Sequence[Document] | PathLike,
    *,
    strategy: str = "recursive",
    size: int = 200,
    overlap: int = 20,
    min_size: int = 10,
    tokenizer: str = "minilm",
    out: PathLike | None = None,
    progress: Callable[[int], None] | None = None,
    show: Callable[[dict[str, Any]], None] | None = None,
    **options: Any,
) -> list[Chunk]:
    """Split documents (objects or a documents JSONL file) into chunks (``ragrade chunk``).

    Sizes are in tokens; ``options`` are strategy options (semantic: ``threshold``, ``buffer``, ``embedder``).
    Writes the chunks JSONL file ``out`` when given. ``progress(n)`` is called with the documents done per
    batch; ``show`` is given the summary written in the file's header (strategy, params, token and
    character statistics, oversize chunks; the CLI prints it).
    """
    from ragrade.corpus.chunk import chunk_documents, create_chunker, summarize_chunks
    from ragrade.corpus.files import read_documents, write_chunks

    chunker = create_chunker(strategy, size=size, overlap=overlap, tokenizer=tokenizer, min_size=min_size, **options)
    documents = read_documents(docs) if isinstance(docs, (str, Path)) else list(docs)
    if not documents:
        raise DataError(f"{docs}: no documents to chunk" if isinstance(docs, (str, Path)) else "no documents to chunk")
    chunks = chunk_documents(documents, chunker, progress=progress)
    summary: dict[str, Any] = {
        "strategy": chunker.strategy,
        "params": chunker.describe(),
        **summarize_chunks(chunks, len(documents)),
    }
    if out is not None:
        source = str(docs) if isinstance(docs, (str, Path)) else None
        write_chunks(out, chunks, chunker=chunker, meta={"documents": source, "summary": summary})
    if show is not None:
        show(summary)
    return chunks


# ---------------------------------------------------------------------------------------------------- retrieval


def build_index(
    source: Sequence[Chunk] | Sequence[Document] | PathLike,
    out: PathLike,
    *,
    config: IndexConfig | None = None,
    progress: ProgressFn | None = None,
    show: Callable[[IndexStats], None] | None = None,
    **settings: Any,
) -> Index:
    """Build (or rebuild) the retrieval index folder ``out`` (``ragrade index``) and return it opened.

    ``source``: chunks, documents (chunked with ``strategy``/``size``/``overlap``), or a JSONL file of
    either. ``settings`` are :class:`~ragrade.retrieval.index.IndexConfig` fields: ``embedder`` (default
    minilm), ``dense`` (False: BM25 only), ``store``, ``bm25={"stemmer": ...}``, ... Writes the chunks,
    the BM25 index, the dense vectors and a manifest under ``out``; embeddings are cached.
    ``progress(what, done, total)`` follows the build; ``show`` is given its statistics (the CLI prints them).
    """
    from ragrade.config import build_config
    from ragrade.retrieval.index import IndexConfig, load_index
    from ragrade.retrieval.index import build_index as _build

    cfg = build_config(IndexConfig, _layer(config), settings, source="index settings")
    if cfg.dense and cfg.store:
        from ragrade.registry import lookup

        lookup("vector_store", cfg.store)  # a bad store fails now, not after the embedding
    stats = _build(source, out, cfg, progress=progress)
    if show is not None:
        show(stats)
    return load_index(out)


def evaluate_retrieval(
    index: Index | PathLike,
    qrels: PathLike,
    retrievers: Sequence[str] = ("bm25", "dense", "hybrid"),
    *,
    k: int = 10,
    level: str = "chunk",
    embedder: str | None = None,
    reranker: str | None = None,
    n_boot: int = 2000,
    seed: int = 0,
    empty_queries: str = "skip",
    out: PathLike | None = None,
) -> RetrievalEvaluation:
    """Hit rate@k, recall@k, MRR and nDCG@k with bootstrap 95% intervals per retriever (``ragrade retrieval-eval``).

    ``qrels``: a qrels JSONL (query + relevant ids) or an exam file; ``level``: ``chunk`` or ``doc`` ids.
    Queries with no relevant id are skipped (``empty_queries="skip"``, as trec_eval) or scored 0 (``"zero"``,
    as ranx). Writes the results with per-query rows as JSON to ``out`` when given.
    """
    from ragrade.retrieval.evaluate import evaluate_retrieval as _evaluate

    return _evaluate(
        index, qrels, retrievers, k=k, level=level, embedder=embedder, reranker=reranker, n_boot=n_boot, seed=seed,
        empty_queries=empty_queries, out=out,
    )  # fmt: skip


def open_assistant(
    index: Index | PathLike,
    *,
    retriever: str = "hybrid",
    k: int = 5,
    llm: str | None = None,
    llm_options: LLMOptions | None = None,
    prompt_file: PathLike | None = None,
    embedder: str | None = None,
    reranker: str | None = None,
    query: str | None = None,
    post: str | None = None,
    transform_llm: str | None = None,
    headings: bool = False,
    report: Callable[[str], None] | None = None,
) -> Assistant:
    """An assistant answering from an index (``ragrade ask``): ``.ask(question)`` retrieves ``k`` passages with
    ``retriever`` and answers from them, citing them (an :class:`~ragrade.retrieval.ask.Answer`).

    ``llm``: PROVIDER/MODEL (default: the offline extractive reader), built with ``llm_options``; ``query`` and
    ``post``: one query transform and one post-processing chain (their LLM: ``transform_llm``, else ``llm``);
    ``prompt_file``: a template with ``{question}`` and ``{passages}``. With ``report``, the models load now
    (one line each, with how long it took) rather than at the first question.
    """
    from ragrade.llm import create_llm
    from ragrade.retrieval.ask import Assistant, load_prompt, warm_up
    from ragrade.retrieval.index import load_index
    from ragrade.retrieval.setup import retrieval_pipeline, retriever_options, single_value

    prompt = load_prompt(prompt_file)
    single_value(query, "--query")
    single_value(post, "--post")
    idx = load_index(index) if isinstance(index, (str, Path)) else index
    ret = idx.retriever(retriever, **retriever_options(retriever, embedder=embedder, reranker=reranker))
    model = create_llm(llm or "offline/extractive", options=llm_options)
    tx_spec = transform_llm or llm  # the answering LLM rewrites too, unless told otherwise
    tx_llm = create_llm(tx_spec, options=llm_options) if tx_spec else None
    pipeline = retrieval_pipeline(idx, ret, query, post, tx_llm, reranker, "--transform-llm or --llm")
    assistant = Assistant(pipeline, model, k=k, prompt=prompt, chunks=idx.chunk, headings=headings)
    if report is not None:
        warm_up(idx, retriever, model, report)
    return assistant


# ---------------------------------------------------------------------------------------------------- exam


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
    progress: Callable[[int, int, int], None] | None = None,
    show: Callable[[ExamResult], None] | None = None,
    **settings: Any,
) -> list[Question]:
    """Write a multiple-choice exam from chunks (``ragrade exam generate``); returns its questions.

    ``chunks``: chunk objects, an opened index, or a chunks JSONL file / index folder. ``llm``: ``offline``
    (cloze questions, no LLM) or PROVIDER/MODEL, built with ``llm_options`` (``base_url``, ``concurrency``,
    ``timeout``, ...). ``settings`` are :class:`~ragrade.exam.config.ExamConfig` fields (``seed``,
    ``topic_field``, ``oversample``, ...). Writes the exam JSONL ``out`` and its sidecars
    ``<stem>.funnel.json`` and ``<stem>.rejected.jsonl``. DataError when no question survived.
    ``llm_options``: an :class:`~ragrade.llm.options.LLMOptions` or its fields. ``progress(done, target,
    valid)`` follows the candidates written; ``show`` is given the result (questions, funnel, generator)
    once the exam is written, before failed requests are checked (the CLI prints it there).
    """
    from ragrade.config import build_config
    from ragrade.exam.config import ExamConfig
    from ragrade.exam.generate import generate_exam_full, write_exam_checked
    from ragrade.exam.inputs import load_chunks, resolve_generator_llm
    from ragrade.llm.failures import exam_request_tally

    layer = {**settings, "n": n}
    cfg = build_config(ExamConfig, _layer(config), layer, source="exam settings")
    data: list[Chunk]
    source: str | None
    if isinstance(chunks, (str, Path)):
        data, source = load_chunks(chunks), str(chunks)
    elif hasattr(chunks, "chunks") and hasattr(chunks, "path"):  # an opened index
        data, source = list(chunks.chunks), str(chunks.path)
    else:
        data, source = list(chunks), None
    from ragrade.llm.options import LLMOptions

    if isinstance(llm_options, LLMOptions):
        model = resolve_generator_llm(llm, options=llm_options)
    else:
        model = resolve_generator_llm(llm, **dict(llm_options or {}))
    emb = None
    if embedder is not None:
        from ragrade.embedding.embed import create_embedder

        emb = create_embedder(embedder)
    result = generate_exam_full(data, model, cfg, embedder=emb, progress=progress)
    tally = exam_request_tally(result, model)
    hint = "rerun the same command: received questions come from the response cache, only failed requests are sent"
    if not result.questions and tally.n_failed:  # every survivor lost to failed requests: say so
        tally.check(hint, 0.0)
    write_exam_checked(out, result, cfg, input_path=source)
    if show is not None:
        show(result)
    tally.check(hint, max_failed, what="generation")
    return list(result.questions)


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
) -> SweepResult:
    """Let every pipeline of a grid take the exam (``ragrade exam take``); resumable.

    ``indexes``: ``{label: index}`` (an opened index or its folder), or one index. ``settings``: the grid
    axes (``llms``, ``retrievers``, ``k``, ``icl``, ``chunkers``, ``prompts``, ``methods``, ``query``,
    ``post``: a value or a list; the grid is every combination) and the other
    :class:`~ragrade.run.spec.SweepConfig` fields (``seed``, ``limit``, ``llm_options``, ``transform_llm``,
    ...), over ``config`` when given (the settings object ``ragrade exam take`` builds from its flags and
    ``--config`` file, recorded in the manifest with ``config_files``). Writes the run directory ``out``
    (``responses.parquet``, ``summary.csv``, ``summary_by_tag.csv``, ``manifest.json``, ``samples.jsonl``).
    Returns a result whose ``responses`` and ``summary`` are DataFrames. Raises (exit-code errors) when
    more requests failed than ``max_failed`` allows (``check=False``: returns the result anyway); a rerun
    asks only the failed ones again. ``progress(pipeline, rows_done, rows_of_pipeline)`` follows the run.
    """
    from ragrade.llm.failures import check_grid_failures
    from ragrade.run.sweep import run_sweep

    if not Path(exam).is_file():
        raise ConfigError(f"{exam}: exam file not found")
    cfg = _sweep_config(config, indexes, settings)
    files = [str(f) for f in config_files]
    result = run_sweep(exam, cfg, out, overwrite=overwrite, progress=progress, config_files=files)
    if check:
        check_grid_failures(result.responses, max_failed)
    return result


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
    **settings: object,
) -> QAAnswerResult:
    """Let every pipeline of a grid answer a QA file in free text (``ragrade qa answer``); resumable.

    The grid is given as for :func:`take_exam`; several ``max_tokens`` or ``temperature`` values make
    them factors of the grid. Writes the run directory ``out`` (``answers.jsonl``, ``summary.csv``,
    ``manifest.json``), ready for :func:`judge_answers`; the result's ``summary`` has a dict per pipeline.
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
    result = run_qa_answers(qa, cfg, out, generation=generation, progress=progress)
    if check:
        check_grid_failures(result.rows, max_failed)
    return result


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
    return build_sweep_config(_layer(config), {**rest, "grid": grid, "indexes": _index_paths(indexes)})


def _index_paths(indexes: Mapping[str, Index | PathLike] | Index | PathLike | None) -> dict[str, str] | None:
    """``{label: folder}`` from index objects or folders (one alone is labelled by its folder's name)."""
    if indexes is None:
        return None
    if not isinstance(indexes, Mapping):
        folder = str(getattr(indexes, "path", indexes))
        return {Path(folder).name or folder: folder}
    return {label: str(getattr(ix, "path", ix)) for label, ix in indexes.items()}


# ---------------------------------------------------------------------------------------------------- analysis


def fit_irt(
    source: PathLike | pd.DataFrame,
    *,
    model: str = "3pl",
    factors: Sequence[str] = (),
    out: PathLike | None = None,
    exam: PathLike | None = None,
    config: FitConfig | None = None,
    **settings: Any,
) -> IRTResult:
    """Fit abilities and item parameters on a run's responses (``ragrade irt fit``).

    ``source``: a run directory, a Parquet/CSV file or a responses DataFrame. ``factors`` switch on the
    hierarchical model; ``settings`` are :class:`~ragrade.irt.problem.FitConfig` fields (``se``,
    ``solver``, ``max_iter``, ``not_applicable``, ...). Writes ``out`` (default ``<run>/irt.json`` for a
    folder or file; nothing for a DataFrame) and ``<stem>_items.parquet``, ``<stem>_pipelines.csv``,
    ``<stem>_effects.csv``, ``<stem>_information.csv`` next to it.
    """
    import dataclasses

    from ragrade.irt.fit import fit_irt as _fit
    from ragrade.irt.problem import FitConfig

    if config is None:
        cfg = FitConfig(model=model, factors=tuple(factors), **settings)
    else:
        cfg = dataclasses.replace(config, **settings)
    if out is None and isinstance(source, (str, Path)):
        out = (Path(source) if Path(source).is_dir() else Path(source).parent) / "irt.json"
    return _fit(source, config=cfg, out=out, exam=exam)


def build_testbeds(
    out: PathLike,
    index: Index | PathLike,
    *,
    exam: PathLike | None = None,
    qa: PathLike | None = None,
    retriever: str = "bm25",
    **options: Any,
) -> dict[str, Any]:
    """Build robustness testbeds from an exam (or QA file) and an index (``ragrade robust build``).

    ``options`` are :class:`~ragrade.robust.corpus.CorpusBuildOptions` fields (``k``, ``max_positive``,
    ``min_positives``, ``max_questions``, ...). Writes ``base.jsonl``, ``integration.jsonl``,
    ``counterfactual.jsonl`` and ``build_report.json`` under ``out``; returns ``{name: path}``.
    """
    from ragrade.robust.corpus import CorpusBuildOptions, build_testbeds_from

    if (exam is None) == (qa is None):
        raise ConfigError("give exactly one of exam= or qa=")
    _, paths = build_testbeds_from(out, index, retriever, CorpusBuildOptions(**options), exam=exam, qa=qa)
    return dict(paths)


def run_testbed(
    data: PathLike,
    testbed: str,
    llm: str | Sequence[str],
    out: PathLike,
    *,
    config: RobustRunConfig | None = None,
    max_failed: float | None = None,
    progress: ProgressFn | None = None,
    warn: Callable[[str], None] | None = None,
    show: Callable[[list[ModelRun]], None] | None = None,
    **settings: Any,
) -> list[ModelRun]:
    """Answer a robustness testbed with one or more LLMs (``ragrade robust run``); resumable.

    ``testbed``: noise, negative, integration or counterfactual; ``data``: RGB-shaped JSONL (e.g. from
    :func:`build_testbeds`). ``settings`` are :class:`~ragrade.robust.run.RobustRunConfig` fields
    (``noise_ratios``, ``docs``, ``judge``, ``limit``, ...). Writes ``results.jsonl``, ``metrics.json``
    and ``table.csv`` under ``out`` (one folder per model when several). Each run's ``metrics`` is a dict.
    ``progress(what, done, total)`` follows the requests; ``warn`` receives each warning (default: a Python
    warning); ``show`` is given the runs before failed requests are checked (the CLI prints them there).
    """
    from ragrade.config import build_config
    from ragrade.llm.failures import resume_hint, robust_request_tally
    from ragrade.robust.run import RobustRunConfig, run_robust

    llms = [llm] if isinstance(llm, str) else list(llm)
    flags = {**settings, "data": data, "testbed": testbed, "llm": llms, "out": out}
    cfg = build_config(RobustRunConfig, _layer(config), flags, source="robust run settings")
    runs, _ = run_robust(cfg, progress=progress, warn=warn or _warn)
    if show is not None:
        show(runs)
    robust_request_tally(runs).check(resume_hint(), max_failed, what="testbed")
    return runs


def _warn(message: str) -> None:
    import warnings

    warnings.warn(f"ragrade: {message}", stacklevel=3)


def judge_answers(
    answers: PathLike,
    out: PathLike | None = None,
    *,
    metrics: Sequence[str] | None = None,
    llm: str | None = None,
    config: JudgeRunConfig | None = None,
    max_failed: float | None = None,
    progress: ProgressFn | None = None,
    show: Callable[[dict[str, Any]], None] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Score free-text answers with judges, BERTScore and exact match (``ragrade judge``); resumable.

    ``answers``: an answers JSONL (any system's; map its fields with ``fields={"query": "question", ...}``)
    or a ``qa answer`` run directory. ``settings`` are :class:`~ragrade.judge.run.JudgeRunConfig` fields.
    Writes ``scores.jsonl``, ``summary.json``, ``summary.csv`` and ``agreement.json`` under ``out``
    (default ``<answers dir>/judge``); returns the summary. ``progress(metric, done, total)`` follows the
    scoring; ``show`` is given the summary before failed requests are checked (the CLI prints it there).
    """
    from ragrade.config import build_config
    from ragrade.judge.run import JudgeRunConfig, check_judge_failures, run_judging

    flags = {**settings, "metrics": list(metrics) if metrics is not None else None, "llm": llm}
    cfg = build_config(JudgeRunConfig, _layer(config), flags, source="judge settings")
    if out is None:
        if not Path(answers).is_dir():
            raise ConfigError("out= is required when answers is a file")
        out = Path(answers) / "judge"
    summary = run_judging(answers, out, cfg, progress=progress)
    if show is not None:
        show(summary)
    check_judge_failures(summary, max_failed)
    return summary


def calibrate_judge(
    scores: PathLike,
    human: PathLike | None = None,
    out: PathLike | None = None,
    *,
    config: CalibrationConfig | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Correct judge scores with human labels (``ragrade judge calibrate``); returns ``calibration.json``'s content.

    ``scores``: a judge output folder (or its ``scores.jsonl``, or an exam file); ``human``: the labels JSONL
    (``{"id", "metric", "label"}`` per line, e.g. from ``ragrade label``). ``settings`` are
    :class:`~ragrade.judge.calibrate.CalibrationConfig` fields (``level``, ``min_labels``) over ``config``.
    Per metric and configuration: the PPI++ estimate of the mean a human would give, with its interval, beside
    the human-only interval and the judge's bias. Writes ``out/calibration.json`` (default
    ``<scores folder>/calibration``).
    """
    from ragrade.config import build_config
    from ragrade.judge.calibrate import CalibrationConfig, resolve_scores_path, run_calibration

    flags = {**settings, "human": str(human) if human is not None else None}
    cfg = build_config(CalibrationConfig, _layer(config), flags, source="calibrate settings")
    if cfg.human is None:
        raise ConfigError("calibrate needs the human labels: --human LABELS.jsonl (or human = ... in [calibration])")
    path = resolve_scores_path(scores)
    return run_calibration(path, cfg.human, out if out is not None else path.parent / "calibration", cfg)


# ---------------------------------------------------------------------------------------------------- jobs, results


def run_job(
    config: PathLike | Mapping[str, Any] | JobConfig,
    out: PathLike | None = None,
    *,
    force: bool = False,
    display: Display | None = None,
) -> JobResult:
    """Run every stage of a job config (a TOML file, its tables as a dict, or a loaded
    :class:`~ragrade.job.config.JobConfig`) into a run directory (``ragrade run``).

    Reuses the stages whose configuration is unchanged; ``out`` defaults to the config's ``out``.
    Writes the job layout (``corpus/``, ``chunks/``, ``index/``, ``exam/``, ``sweep/``, ``irt/``,
    ``robust/``, ``judge/``, ``report.html``, ``stages.json``, ``timings.json``). ``display``: the stage
    progress display (:func:`ragrade.job.progress.make_display`; default: plain lines).
    """
    from ragrade.job.config import JobConfig, load_job_config
    from ragrade.job.runner import run_job as _run

    if isinstance(config, JobConfig):
        cfg = config
    elif isinstance(config, (str, Path)):
        cfg = load_job_config(config, None)
    else:
        cfg = load_job_config(None, dict(config))
    return _run(cfg, out if out is not None else Path(cfg.out), force=force, display=display)


def demo(out: PathLike, *, small: bool = True, force: bool = False, display: Display | None = None) -> JobResult:
    """The offline demo job (``ragrade demo``, ``small``: ``--small``) into ``out``; see :func:`run_job`."""
    from ragrade.job.demo import demo_config
    from ragrade.job.runner import run_job as _run

    return _run(demo_config(small=small), out, force=force, display=display)


def render_report(
    run_dir: PathLike,
    out: PathLike | None = None,
    *,
    top: int = 5,
    title: str | None = None,
    extra: Sequence[PathLike] = (),
    adaptive: PathLike | None = None,
) -> Path:
    """Write the self-contained HTML report of a run directory (``ragrade report``); returns its path.

    ``out`` defaults to ``<run_dir>/report.html``; ``extra``: run folders kept elsewhere (``--add``).
    """
    from ragrade.report.render import write_report

    target = Path(out) if out is not None else Path(run_dir) / "report.html"
    return write_report(
        run_dir,
        target,
        top=top,
        title=title,
        extra=[Path(p) for p in extra],
        adaptive=Path(adaptive) if adaptive is not None else None,
    )


__all__ = [
    "RunData",
    "answer_qa",
    "build_index",
    "build_testbeds",
    "calibrate_judge",
    "chunk",
    "demo",
    "evaluate_retrieval",
    "fit_irt",
    "generate_exam",
    "judge_answers",
    "load_corpus",
    "open_assistant",
    "open_run",
    "render_report",
    "run_job",
    "run_testbed",
    "take_exam",
]
