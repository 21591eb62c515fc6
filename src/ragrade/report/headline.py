"""The best pipeline a summary line names: the best real one, as the report's leaderboard names it.

An oracle (handed each question's gold passage) is an upper bound, not a contender, and an ``offline/`` LLM is
a baseline: :func:`best_pipelines` picks the most accurate pipeline that is neither (or, when every pipeline is
an offline baseline, the best of those, labelled so) and names the oracle separately as the bound it is. Roles
come from :func:`ragrade.report.sections_core.pipeline_role`, the report's own rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragrade.report.sections_core import pipeline_role, short_pipeline

if TYPE_CHECKING:
    import pandas as pd

UPPER_BOUND = "upper bound"


def best_pipelines(summary: pd.DataFrame) -> dict[str, object]:
    """``best`` (a short label, its role appended when it has one), ``best_pipeline`` (the id) and
    ``best_accuracy`` of the best real pipeline of ``summary`` (a ``summary.csv``: ``pipeline``, ``accuracy``),
    then ``upper_bound`` / ``upper_bound_accuracy`` for the best oracle; empty when nothing was answered."""
    if summary.empty or not {"pipeline", "accuracy"} <= set(summary.columns):
        return {}
    df = summary[summary["accuracy"].notna()].sort_values(["accuracy", "pipeline"], ascending=[False, True])
    rows = [(str(r["pipeline"]), float(r["accuracy"])) for r in df.to_dict(orient="records")]
    roles = [pipeline_role(pid) for pid, _ in rows]
    real = [i for i, role in enumerate(roles) if not role]
    fair = real or [i for i, role in enumerate(roles) if UPPER_BOUND not in role]
    out: dict[str, object] = {}
    if fair:
        pid, acc = rows[fair[0]]
        out.update(best=short_pipeline(pid), best_pipeline=pid, best_accuracy=round(acc, 4))
    bound = next((i for i, role in enumerate(roles) if UPPER_BOUND in role), None)
    if bound is not None:
        pid, acc = rows[bound]
        out.update(upper_bound=f"{short_pipeline(pid)}: given the gold passage", upper_bound_accuracy=round(acc, 4))
    return out


__all__ = ["best_pipelines"]
