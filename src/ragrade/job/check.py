"""Validate a whole job config before the first stage runs, and describe the plan (``ragrade run --check``).

A bad ``[irt] model``, ``[robust] testbeds``, ``[judge] metrics``, ``[sweep] retrievers`` or model spec
used to surface only when its stage started, hours into a run. :func:`check_job` checks every component
name and every model spec up front (without loading models or reading the corpus), the sweep's grid
(query transforms, post chains, ``transform_options``), ``[adaptive]`` and ``[calibration] human`` with
the validators their stages use, and raises the first problem as a one-line :class:`~ragrade.errors.ConfigError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ragrade.errors import ConfigError, RagradeError, did_you_mean
from ragrade.job.config import JobConfig

if TYPE_CHECKING:
    from ragrade.llm.options import LLMOptions
    from ragrade.run.spec import PipelineSpec

_RETRIEVER = re.compile(r"^\s*([a-z_0-9]+)\s*(?:\((.*)\))?\s*$")
_OFFLINE_EXAM = ("offline", "offline/cloze", "cloze")


def _names(kind: str) -> list[str]:
    from ragrade.registry import names

    return list(names(kind))


def _known(kind: str, name: str, where: str) -> None:
    from ragrade.registry import did_you_mean

    valid = _names(kind)
    if name not in valid:
        raise ConfigError(f"{where}: unknown {kind} '{name}'; valid: {', '.join(valid)}.{did_you_mean(name, valid)}")


def check_llm_spec(spec: str, where: str, options: LLMOptions) -> None:
    """Check a model spec: its provider, its model (a file, a name), an OpenAI-compatible model's key/URL."""
    from ragrade.llm import check_llm, create_llm, parse_spec

    provider, _model = parse_spec(spec)
    _known("llm", provider, where)
    mine = options.for_llm(spec)  # the job's [llm_options] are shared by all its LLMs
    try:
        check_llm(spec, mine)
        if provider in ("offline", "openai"):  # cheap to build: builds check names, keys and limits
            llm = create_llm(spec, mine.model_copy(update={"cache": False, "dry_run": False}))
            close = getattr(llm, "close", None)
            if callable(close):
                close()
    except RagradeError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _check_retriever(spec: str) -> None:
    m = _RETRIEVER.match(spec)
    if not m:
        raise ConfigError(f"[sweep] retrievers: invalid retriever spec '{spec}'; expected e.g. bm25 or rerank(dense)")
    name, arg = m.group(1), m.group(2)
    _known("retriever", name, "[sweep] retrievers")
    if arg is not None:
        if name != "rerank":
            raise ConfigError(f"[sweep] retrievers: '{name}' takes no argument in parentheses")
        _check_retriever(arg.strip() or "hybrid")


def _sweep_specs(cfg: JobConfig) -> list[PipelineSpec]:
    """The sweep's pipelines, expanded and validated as the sweep stage does: query and post names, the transform
    LLM they need, ``transform_options`` (names and options)."""
    from ragrade.job.layout import RunLayout
    from ragrade.job.stages import sweep_config
    from ragrade.run.spec import expand_pipelines

    try:
        specs = expand_pipelines(sweep_config(cfg, RunLayout(Path(cfg.out))))
    except ConfigError as exc:
        raise ConfigError(f"[sweep] {exc}") from exc
    return specs


def _check_irt(cfg: JobConfig, specs: list[PipelineSpec]) -> None:
    """``[irt]`` against what the sweep will produce: the IRT stage's own plan (:func:`ragrade.job.analysis.plan_irt`)
    and fit settings run on one row per pipeline of the grid, as the sweep writes it, so that a factor the
    responses will not have fails here rather than after the sweep."""
    import pandas as pd

    from ragrade.exam.files import Question
    from ragrade.job.analysis import NOT_APPLICABLE, plan_irt
    from ragrade.run.answer import base_row
    from ragrade.run.contexts import Contexts

    question = Question(id="-", question="-", choices=["-", "-"], answer=0, doc_id="-", chunk_id="-")
    rows = pd.DataFrame([base_row(question, spec, Contexts()) for spec in specs])
    named = list(dict.fromkeys(k for spec in specs for k in spec.factors()))  # the grid's axes, in order
    for factor in cfg.irt.factors:
        if factor not in rows.columns:
            raise ConfigError(
                f"[irt] factors: '{factor}' is not a column of the sweep's responses; the grid's factors are "
                f"{', '.join(named)}.{did_you_mean(factor, named)}"
            )
    try:
        plan = plan_irt(rows, cfg.irt.factors, NOT_APPLICABLE)
        for fit in plan["fits"]:
            cfg.irt.fit_config(fit["factors"], NOT_APPLICABLE)
    except RagradeError as exc:
        raise ConfigError(f"[irt] {exc}") from exc


def _check_robust_data(cfg: JobConfig) -> None:
    """``[robust] testbeds`` against the ``[robust] data`` file, through the stage's own settings and reader: each
    testbed takes the file's kind of records, its noise ratios, and keeps a question at ``min_positives``."""
    from ragrade.job.analysis import testbed_config
    from ragrade.job.layout import RunLayout
    from ragrade.robust.run import _load_data, resolve_ratios  # the stage's checks before its first request
    from ragrade.robust.testbeds import get_testbed

    data = Path(str(cfg.robust.data))
    for name in cfg.robust.testbeds:
        try:
            settings = testbed_config(cfg, name, data, RunLayout(Path(cfg.out)).robust / name)
            tb = get_testbed(name)
            _load_data(settings, tb)
            resolve_ratios(tb, settings.noise_ratios)
        except RagradeError as exc:
            raise ConfigError(f"[robust] testbeds: {name}: {exc}") from exc


def _check_adaptive(cfg: JobConfig) -> None:
    """``[adaptive]`` as its stage validates it before the first request, less what needs the exam: the settings,
    the calibration mode, the calibration file, the reference pipelines."""
    from ragrade.adaptive.calibration import calibration_mode, load_calibration, resolve_references
    from ragrade.job.adaptive_stage import adaptive_configs
    from ragrade.job.layout import RunLayout
    from ragrade.run.spec import expand_pipelines

    try:
        scfg, acfg = adaptive_configs(cfg, RunLayout(Path(cfg.out)))
        acfg.check()
        specs = expand_pipelines(scfg)
        mode = calibration_mode(acfg, len(specs))
        if mode == "file":
            load_calibration(str(acfg.calibration), [])  # readable irt.json with usable item parameters
        elif mode == "reference":
            resolve_references(acfg, specs, scfg.seed)
    except RagradeError as exc:
        raise ConfigError(f"[adaptive] {exc}") from exc


def _check_human_labels(cfg: JobConfig) -> None:
    """``[calibration] human`` read by the calibration stage's own reader before anything is judged: every line
    a label of a ``[judge]`` metric on its scale, no duplicate, at least ``min_labels`` per metric (the stage
    also checks that every id was judged and counts the labels per configuration)."""
    from ragrade.io import iter_jsonl
    from ragrade.judge.calibrate import ScoreTable, read_labels

    path = Path(str(cfg.calibration.human))
    if not path.is_file():
        raise ConfigError(f"[calibration] human: labels file {path} not found")
    anyone = "any configuration"
    try:
        ids = {str(rec["id"]) for _, rec in iter_jsonl(path) if "id" in rec}
        scores: dict[str, dict[tuple[str, str], float | None]] = {
            m: {(anyone, i): 0.0 for i in ids} for m in cfg.judge.metrics
        }
        table = ScoreTable(Path("[judge] metrics"), "judge_scores", scores, {i: (anyone, i) for i in ids})
        read_labels(path, table, min_labels=cfg.calibration.min_labels)
    except RagradeError as exc:
        raise ConfigError(f"[calibration] human: {exc}") from exc


def _need_file(path: str | Path | None, where: str, what: str) -> None:
    """ConfigError unless ``path`` (when set) is a readable file: a folder and a missing path are told apart."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{where}: {p} is a folder; give the {what} file itself")
    if not p.is_file():
        raise ConfigError(f"{where}: {p} does not exist; give the path of the {what} file")


def _check_paths(cfg: JobConfig) -> None:
    """Every file and folder the job names, checked before the first stage (``run --check`` included): a run
    must not fail at a later stage on a path that was wrong from the start."""
    if not cfg.corpus.demo:
        for raw in cfg.corpus.paths:
            if not Path(raw).exists():
                raise ConfigError(f"[corpus] paths: {raw} does not exist; fix it or remove it from the list")
    if cfg.exam.enabled:
        _need_file(cfg.exam.path, "[exam] path", "exam (JSONL, from `ragrade exam generate`)")
        _need_file(cfg.exam.prompt_file, "[exam] prompt_file", "prompt")
        _need_file(cfg.exam.system_prompt_file, "[exam] system_prompt_file", "prompt")
    if cfg.robust.enabled:
        _need_file(cfg.robust.data, "[robust] data", "robustness data")
        _need_file(cfg.robust.prompts, "[robust] prompts", "robustness prompts (TOML)")
    if cfg.judge.enabled:
        for metric, prompt in cfg.judge.prompts.items():
            _need_file(prompt, f"[judge] prompts.{metric}", "judge prompt")


def check_job(cfg: JobConfig) -> None:
    """Raise a ConfigError for the first bad component name or model spec of ``cfg`` (see the module)."""
    from ragrade.judge.claims import OFFLINE_JUDGE
    from ragrade.judge.run import check_judge_settings

    llm_options = cfg.llm  # the job's [llm_options] (a check builds real backends and sends nothing)
    for c in cfg.chunkers:
        _known("chunker", c.strategy, f"[[chunkers]] {c.label}")
    if cfg.exam.enabled and not cfg.exam.path and cfg.exam.llm.strip().lower() not in _OFFLINE_EXAM:
        check_llm_spec(cfg.exam.llm, "[exam] llm", llm_options)
    _check_paths(cfg)
    if cfg.sweep.enabled:
        for spec in cfg.sweep.llms:
            check_llm_spec(spec, "[sweep] llms", llm_options)
        for r in cfg.sweep.retrievers:
            _check_retriever(r)
        if cfg.sweep.transform_llm:
            check_llm_spec(cfg.sweep.transform_llm, "[sweep] transform_llm", llm_options)
        specs = _sweep_specs(cfg)
        if cfg.irt.enabled:
            _check_irt(cfg, specs)
    if cfg.adaptive.enabled:
        _check_adaptive(cfg)
    if cfg.robust.enabled:
        for tb in cfg.robust.testbeds:
            _known("testbed", tb, "[robust] testbeds")
        for spec in cfg.robust.llm:
            check_llm_spec(spec, "[robust] llm", llm_options)
        if cfg.robust.judge:
            check_llm_spec(cfg.robust.judge, "[robust] judge", llm_options)
        if cfg.robust.data:
            _check_robust_data(cfg)
    if cfg.judge.enabled:
        for m in cfg.judge.metrics:
            _known("judge", m, "[judge] metrics")
        for spec in cfg.judge.answer_llms:
            check_llm_spec(spec, "[judge] answer_llms", llm_options)
        for r in cfg.judge.retrievers:
            _check_retriever(r)
        try:  # the judge's own checks: metrics, the judge LLM for them, screening, prompt files
            check_judge_settings(cfg.judge)
        except ConfigError as exc:  # "[judge] llm offline/student cannot judge ...": the keys by name
            raise ConfigError(f"[judge] {exc}") from exc
        if cfg.judge.llm and cfg.judge.llm != OFFLINE_JUDGE:
            check_llm_spec(cfg.judge.llm, "[judge] llm", llm_options)
        if cfg.judge.qa_llm.strip().lower() != "offline":
            check_llm_spec(cfg.judge.qa_llm, "[judge] qa_llm", llm_options)
        if cfg.calibration.human:
            _check_human_labels(cfg)


__all__ = ["check_job", "check_llm_spec"]
