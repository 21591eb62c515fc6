"""Robustness testbeds: build them and answer them (``ragrade robust build``, ``robust run``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike, settings_layer
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    from ragrade.progress import ProgressFn
    from ragrade.retrieval.index import Index
    from ragrade.robust.run import ModelRun, RobustRunConfig


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
    cfg = build_config(RobustRunConfig, settings_layer(config), flags, source="robust run settings")
    runs, _ = run_robust(cfg, progress=progress, warn=warn or _warn)
    if show is not None:
        show(runs)
    robust_request_tally(runs).check(resume_hint(), max_failed, what="testbed")
    return runs


def _warn(message: str) -> None:
    import warnings

    warnings.warn(f"ragrade: {message}", stacklevel=3)
