"""Paired comparisons of a run's pipelines (``ragrade compare``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragrade.api._common import PathLike
from ragrade.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.run.compare import Verdicts

CORRECTIONS = ("holm", "bonferroni", "bh", "none")


@dataclass(frozen=True)
class PipelineComparison:
    """What :func:`compare_pipelines` found: the comparisons (``comparisons.json``'s content) and where they
    were written (None: not written)."""

    verdicts: Verdicts
    out: Path | None


def compare_pipelines(
    run_dir: PathLike,
    a: str | None = None,
    b: str | None = None,
    *,
    top: int = 5,
    correction: str = "holm",
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    out: PathLike | None = None,
) -> PipelineComparison:
    """Paired comparison of pipelines of a run directory (``ragrade compare``): accuracy difference, bootstrap
    interval, McNemar exact p-value and a verdict at ``alpha``.

    ``a`` and ``b``: two pipelines (ids or unique parts of ids), compared without correction; neither: the
    ``top`` distinct pipelines pairwise, p-values adjusted by ``correction`` (holm, bonferroni, bh, none;
    pipelines that answered exactly like a better-ranked one are skipped and named). Writes the comparisons
    as JSON to ``out`` (default ``<run_dir>/comparisons.json``, read by the report, when ``run_dir`` is a
    folder).
    """
    from ragrade.run.compare import COMPARISONS_FILE, verdicts, write_comparisons

    if correction not in CORRECTIONS:
        raise ConfigError(f"unknown correction '{correction}'; valid: {', '.join(CORRECTIONS)}")
    if not 0 < alpha < 1 or n_boot < 1 or top < 2:
        raise ConfigError("need 0 < $alpha < 1, $n_boot >= 1 and $top >= 2")
    if (a is None) != (b is None):
        raise ConfigError("name two pipelines (ids or unique parts of ids), or neither to compare the top ones")
    if a is not None and b is not None:
        result = _compare_two(Path(run_dir), a, b, alpha=alpha, n_boot=n_boot, seed=seed)
    else:
        result = verdicts(run_dir, top=top, correction=correction, alpha=alpha, n_boot=n_boot, seed=seed)
    target = Path(out) if out is not None else None
    if target is None and Path(run_dir).is_dir():
        target = Path(run_dir) / COMPARISONS_FILE
    if target is not None:
        from ragrade.run.summary import RESPONSES_FILE

        source = Path(run_dir) / RESPONSES_FILE if Path(run_dir).is_dir() else Path(run_dir)
        write_comparisons(target, result, responses=source)
    return PipelineComparison(result, target)


def _compare_two(run_dir: Path, a: str, b: str, *, alpha: float, n_boot: int, seed: int) -> Verdicts:
    """The comparison of two pipelines of a run, named by ids or unique parts of ids (no correction)."""
    from ragrade.io import now_iso
    from ragrade.run.compare import COMPARISONS_VERSION, compare_pair, resolve_pipeline
    from ragrade.run.summary import read_responses
    from ragrade.stats import adjust_pvalues

    df: pd.DataFrame = read_responses(run_dir)
    ids = list(dict.fromkeys(str(p) for p in df["pipeline"]))
    pa_, pb_ = resolve_pipeline(a, ids), resolve_pipeline(b, ids)
    if pa_ == pb_:
        raise ConfigError(f"'{a}' and '{b}' name the same pipeline")
    comp = compare_pair(df, pa_, pb_, n_boot=n_boot, seed=seed, alpha=alpha)
    comp.correction = "none"
    comp.p_adjusted = adjust_pvalues([comp.p_value], "none")[0]
    return {
        "version": COMPARISONS_VERSION,
        "created": now_iso(),
        "pipelines": [pa_, pb_],
        "correction": "none",
        "alpha": alpha,
        "n_boot": n_boot,
        "seed": seed,
        "comparisons": [comp.to_dict()],
    }


__all__ = ["PipelineComparison", "compare_pipelines"]
