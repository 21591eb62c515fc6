"""Robustness testbeds: build them, answer them and table the runs (``ragrade robust build``, ``robust run``,
``robust table``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike, settings_layer
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    from ragrade.api.types import BuiltTestbeds, TestbedRuns
    from ragrade.io import JSONObject
    from ragrade.progress import ProgressFn
    from ragrade.retrieval.index import Index
    from ragrade.robust.run import RobustRunConfig


def build_testbeds(
    out: PathLike,
    index: Index | PathLike,
    *,
    exam: PathLike | None = None,
    qa: PathLike | None = None,
    retriever: str = "bm25",
    **options: Any,
) -> BuiltTestbeds:
    """Build robustness testbeds from an exam (or QA file) and an index (``ragrade robust build``).

    ``options`` are :class:`~ragrade.robust.corpus.CorpusBuildOptions` fields (``k``, ``max_positive``,
    ``min_positives``, ``max_questions``, ...). Writes ``base.jsonl``, ``integration.jsonl``,
    ``counterfactual.jsonl`` and ``build_report.json`` under ``out``; returns ``{name: path}`` with the build
    report as ``.report`` (questions, records per testbed, questions dropped and why).
    """
    from ragrade.api.types import BuiltTestbeds
    from ragrade.io import read_json_object
    from ragrade.robust.corpus import CorpusBuildOptions, build_testbeds_from

    if (exam is None) == (qa is None):
        raise ConfigError("give exactly one of $exam or $qa")
    _, paths = build_testbeds_from(out, index, retriever, CorpusBuildOptions(**options), exam=exam, qa=qa)
    report = read_json_object(paths["report"], "a testbed build report")  # what the build wrote
    return BuiltTestbeds(dict(paths), dict(report))


def run_testbed(
    data: PathLike,
    testbed: str,
    llm: str | Sequence[str],
    out: PathLike,
    *,
    config: RobustRunConfig | None = None,
    max_failed: float | None = None,
    check: bool = True,
    progress: ProgressFn | None = None,
    warn: Callable[[str], None] | None = None,
    **settings: Any,
) -> TestbedRuns:
    """Answer a robustness testbed with one or more LLMs (``ragrade robust run``); resumable.

    ``testbed``: noise, negative, integration or counterfactual; ``data``: RGB-shaped JSONL (e.g. from
    :func:`build_testbeds`). ``settings`` are :class:`~ragrade.robust.run.RobustRunConfig` fields
    (``noise_ratios``, ``docs``, ``judge``, ``limit``, ...). Writes ``results.jsonl``, ``metrics.json``
    and ``table.csv`` under ``out`` (one folder per model when several). Each run's ``metrics`` is a dict.
    ``progress(what, done, total)`` follows the requests; ``warn`` receives each warning (default: a Python
    warning). Raises (exit-code errors) when more requests failed than ``max_failed`` allows, after the
    files are written (``check=False``: returns the runs anyway; ``runs.check()`` raises then).
    """
    from ragrade.api.types import TestbedRuns
    from ragrade.config import build_config
    from ragrade.robust.run import RobustRunConfig, run_robust

    llms = [llm] if isinstance(llm, str) else list(llm)
    flags = {**settings, "data": data, "testbed": testbed, "llm": llms, "out": out}
    cfg = build_config(RobustRunConfig, settings_layer(config), flags, source="robust run settings")
    found, _ = run_robust(cfg, progress=progress, warn=warn or _warn)
    runs = TestbedRuns(found)
    if check:
        runs.check(max_failed)
    return runs


def _warn(message: str) -> None:
    import warnings

    warnings.warn(f"ragrade: {message}", stacklevel=3)


@dataclass(frozen=True)
class RobustTable:
    """Robustness runs in one paper-shaped table (one row per model, one column per noise ratio)."""

    table: JSONObject
    #: the CSV written, if any
    out: Path | None

    def render(self) -> str:
        """The table as aligned text."""
        from ragrade.robust.table import render_table

        return render_table(self.table)


def robust_table(runs: Sequence[PathLike], out: PathLike | None = None) -> RobustTable:
    """Combine robustness runs of one testbed into one table (``ragrade robust table``).

    ``runs``: run directories or ``metrics.json`` files (of ``robust run``); writes the table as CSV to ``out``
    when given.
    """
    from ragrade.robust.table import build_table, load_run_metrics, write_table

    table = build_table([m for r in runs for m in load_run_metrics(r)])
    if out is not None:
        write_table(table, out)
    return RobustTable(table, Path(out) if out is not None else None)
