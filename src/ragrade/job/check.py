"""Validate a whole job config before the first stage runs, and describe the plan (``ragrade run --check``).

A bad ``[irt] model``, ``[robust] testbeds``, ``[judge] metrics``, ``[sweep] retrievers`` or model spec
used to surface only when its stage started, hours into a run. :func:`check_job` checks every component
name and every model spec up front (without loading models or reading the corpus) and raises the first
problem as a one-line :class:`~ragrade.errors.ConfigError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragrade.errors import ConfigError, RagradeError
from ragrade.job.config import JobConfig

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


def check_llm_spec(spec: str, where: str, llm_kwargs: dict[str, Any]) -> None:
    """Check a model spec: its provider, the offline baseline's name, an OpenAI-compatible model's key/URL."""
    from ragrade.llm import create_llm, parse_spec

    provider, model = parse_spec(spec)
    _known("llm", provider, where)
    if provider in ("offline", "openai"):  # cheap to build: builds check names, keys and limits
        try:
            llm = create_llm(spec, **{**llm_kwargs, "cache": False})
        except RagradeError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
        close = getattr(llm, "close", None)
        if callable(close):
            close()
    elif provider == "hf" and not Path(model).exists():
        raise ConfigError(f"{where}: no local model folder '{model}' for {spec}")


def _check_retriever(spec: str) -> None:
    m = _RETRIEVER.match(spec)
    if not m:
        raise ConfigError(f"[sweep] retrievers: invalid retriever spec '{spec}'; expected e.g. bm25 or rerank(dense)")
    name, arg = m.group(1), m.group(2)
    if name not in ("closed", "oracle"):
        _known("retriever", name, "[sweep] retrievers")
    if arg is not None:
        if name != "rerank":
            raise ConfigError(f"[sweep] retrievers: '{name}' takes no argument in parentheses")
        _check_retriever(arg.strip() or "hybrid")


def check_job(cfg: JobConfig) -> None:
    """Raise a ConfigError for the first bad component name or model spec of ``cfg`` (see the module)."""
    from ragrade.irt.model import MODELS

    llm_kwargs = {
        "base_url": cfg.llm.base_url,
        "concurrency": cfg.llm.concurrency,
        "timeout": cfg.llm.timeout,
        "max_retries": getattr(cfg.llm, "max_retries", 5),
    }
    for c in cfg.chunkers:
        _known("chunker", c.strategy, f"[[chunkers]] {c.label}")
    if cfg.exam.enabled and not cfg.exam.path and cfg.exam.llm.strip().lower() not in _OFFLINE_EXAM:
        check_llm_spec(cfg.exam.llm, "[exam] llm", llm_kwargs)
    if cfg.exam.path and not Path(cfg.exam.path).is_file():
        raise ConfigError(f"[exam] path: {cfg.exam.path} not found")
    if cfg.sweep.enabled:
        for spec in cfg.sweep.llms:
            check_llm_spec(spec, "[sweep] llms", llm_kwargs)
        for r in cfg.sweep.retrievers:
            _check_retriever(r)
    if cfg.irt.enabled and cfg.irt.model not in MODELS:
        raise ConfigError(f"[irt] model: unknown model '{cfg.irt.model}'; valid: {', '.join(MODELS)}")
    if cfg.robust.enabled:
        for tb in cfg.robust.testbeds:
            _known("testbed", tb, "[robust] testbeds")
        for spec in cfg.robust.llms:
            check_llm_spec(spec, "[robust] llms", llm_kwargs)
        if cfg.robust.data and not Path(cfg.robust.data).is_file():
            raise ConfigError(f"[robust] data: {cfg.robust.data} not found")
    if cfg.judge.enabled:
        for m in cfg.judge.metrics:
            _known("judge", m, "[judge] metrics")
        for spec in cfg.judge.answer_llms:
            check_llm_spec(spec, "[judge] answer_llms", llm_kwargs)
        for r in cfg.judge.retrievers:
            _check_retriever(r)
        from ragrade.judge.claims import OFFLINE_JUDGE

        if cfg.judge.judge_llm and cfg.judge.judge_llm != OFFLINE_JUDGE:  # offline/judge: the claims baseline
            check_llm_spec(cfg.judge.judge_llm, "[judge] judge_llm", llm_kwargs)
        if cfg.judge.qa_llm.strip().lower() != "offline":
            check_llm_spec(cfg.judge.qa_llm, "[judge] qa_llm", llm_kwargs)


def describe_plan(cfg: JobConfig, out: Path) -> list[dict[str, Any]]:
    """The stages ``ragrade run`` would run into ``out``: name, inputs, outputs and whether each is reused."""
    from ragrade.job.layout import RunLayout
    from ragrade.job.runner import _reusable, build_stages, read_stages, stage_hashes

    layout = RunLayout(out)
    stages = build_stages(cfg, layout)
    hashes = stage_hashes(stages)
    done = read_stages(layout) if layout.root.is_dir() else {}
    plan = []
    for s in stages:
        reused = _reusable(s, done.get(s.name), hashes[s.name])
        plan.append(
            {
                "stage": s.name,
                "needs": list(s.needs),
                "outputs": [str(p) for p in s.outputs],
                "action": "reuse" if reused else "run",
            }
        )
    return plan


__all__ = ["check_job", "check_llm_spec", "describe_plan"]
