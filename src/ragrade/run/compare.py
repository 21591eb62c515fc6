"""Paired comparisons of pipelines on the same questions: accuracy difference, bootstrap CI, McNemar.

Two pipelines of one run answered the same questions, so their difference is
judged on paired outcomes: the paired bootstrap resamples questions (keeping
each question's two outcomes together) and McNemar's exact test looks only at
the discordant questions (one right, the other wrong). Comparing many pairs
adjusts the p-values (Holm by default) so that "significant" keeps its meaning.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import numpy as np
import pandas as pd

from ragrade.errors import ConfigError, DataError
from ragrade.io import now_iso, write_json
from ragrade.run.summary import read_responses
from ragrade.stats import adjust_pvalues, mcnemar_exact, paired_bootstrap_ci

COMPARISONS_FILE = "comparisons.json"
COMPARISONS_VERSION = 1


class Verdicts(TypedDict):
    """``comparisons.json``: paired comparisons of a run's pipelines (:meth:`Comparison.to_dict` records)."""

    version: int
    created: str
    pipelines: list[str]
    identical: NotRequired[dict[str, str]]  # pipelines skipped, answering exactly like a better-ranked one
    correction: str
    alpha: float
    n_boot: int
    seed: int
    comparisons: list[dict[str, Any]]


@dataclass
class Comparison:
    """The paired comparison of pipelines ``a`` and ``b``."""

    a: str
    b: str
    n: int
    accuracy_a: float
    accuracy_b: float
    difference: float  # accuracy_a - accuracy_b
    ci_low: float
    ci_high: float
    a_only: int  # questions only a answered correctly
    b_only: int
    p_value: float  # McNemar exact, two-sided
    p_adjusted: float
    correction: str
    verdict: str  # "a better", "b better" or "no significant difference"
    ci_level: float = 0.95  # of ci_low/ci_high: one pair on its own (unadjusted)
    # Bonferroni-level interval over the pairs compared together (holm/bonferroni), the one that matches the
    # adjusted verdict's error rate; None when one pair is compared or the correction has no interval (bh, none)
    ci_adjusted_low: float | None = None
    ci_adjusted_high: float | None = None
    ci_adjusted_level: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def interval_text(c: dict[str, Any]) -> str:
    """The intervals of a comparison record, each named (unadjusted / adjusted), and, where the verdict and the
    interval that matches it disagree (in either direction), why."""
    level = float(c.get("ci_level") or 0.95)
    text = f"{level:.0%} CI [{c['ci_low']:+.1%}, {c['ci_high']:+.1%}]"
    adjusted = c.get("ci_adjusted_low") is not None and c.get("ci_adjusted_high") is not None
    correction = c.get("correction", "none")
    if correction != "none":
        text += " unadjusted"
    if adjusted:
        text += (
            f"; {float(c['ci_adjusted_level']):.1%} CI adjusted for the pairs compared "
            f"[{c['ci_adjusted_low']:+.1%}, {c['ci_adjusted_high']:+.1%}]"
        )
    test = "exact McNemar test" if correction == "none" else f"{correction}-adjusted exact McNemar test"
    discordant = f"{c['a_only'] + c['b_only']} discordant questions"
    if c.get("verdict") != "no significant difference":
        low, high = (c["ci_adjusted_low"], c["ci_adjusted_high"]) if adjusted else (c["ci_low"], c["ci_high"])
        if low <= 0 <= high:
            which = "adjusted interval" if adjusted else "interval"
            return text + (
                f" (the verdict is the {test} on {discordant}, which rejects; the bootstrap {which} of the "
                "accuracy difference still includes 0: the two disagree this close to the threshold)"
            )
        return text
    if correction == "none" or not (c["ci_low"] > 0 or c["ci_high"] < 0):
        return text
    which = "unadjusted interval excludes 0"
    if adjusted and (c["ci_adjusted_low"] > 0 or c["ci_adjusted_high"] < 0):
        which = f"bootstrap intervals exclude 0 on {discordant}"
    return text + f" (the {which}; the verdict is the {test}, which does not reject)"


def resolve_pipeline(name: str, pipelines: Sequence[str]) -> str:
    """The pipeline id equal to ``name``, or the only one containing it; ConfigError otherwise."""
    if name in pipelines:
        return name
    matches = [p for p in pipelines if name in p]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ConfigError(f"no pipeline matches '{name}'; pipelines: {', '.join(pipelines)}")
    raise ConfigError(f"'{name}' matches {len(matches)} pipelines ({', '.join(matches[:4])}); be more specific")


def _paired(df: pd.DataFrame, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    wide = df[df["pipeline"].isin([a, b])].pivot_table(
        index="question_id", columns="pipeline", values="correct", aggfunc="first"
    )
    wide = wide.dropna()
    if wide.empty or a not in wide or b not in wide:
        raise DataError(f"pipelines '{a}' and '{b}' share no questions")
    return wide[a].to_numpy(dtype=np.float64), wide[b].to_numpy(dtype=np.float64)


def _verdict(diff: float, p_adj: float, alpha: float) -> str:
    if p_adj < alpha and diff > 0:
        return "a better"
    if p_adj < alpha and diff < 0:
        return "b better"
    return "no significant difference"


def compare_pair(
    df: pd.DataFrame, a: str, b: str, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0, alpha: float = 0.05
) -> Comparison:
    """Compare pipelines ``a`` and ``b`` (ids) of a response matrix ``df``."""
    x, y = _paired(df, a, b)
    lo, hi = paired_bootstrap_ci(x, y, n_boot=n_boot, level=level, seed=seed)
    a_only = int(((x == 1) & (y == 0)).sum())
    b_only = int(((x == 0) & (y == 1)).sum())
    p = mcnemar_exact(a_only, b_only)
    diff = float(x.mean() - y.mean())
    return Comparison(
        a,
        b,
        int(x.size),
        float(x.mean()),
        float(y.mean()),
        diff,
        lo,
        hi,
        a_only,
        b_only,
        p,
        p,
        "none",
        _verdict(diff, p, alpha),
        level,
    )


def compare_many(
    df: pd.DataFrame,
    pipelines: Sequence[str],
    *,
    correction: str = "holm",
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
    alpha: float = 0.05,
) -> list[Comparison]:
    """All pairs of ``pipelines`` (first listed is ``a``), p-values adjusted together by ``correction``."""
    pairs = list(itertools.combinations(pipelines, 2))
    out = [compare_pair(df, a, b, n_boot=n_boot, level=level, seed=seed, alpha=alpha) for a, b in pairs]
    adjusted = adjust_pvalues([c.p_value for c in out], correction)
    for c, p_adj in zip(out, adjusted, strict=True):
        c.p_adjusted = p_adj
        c.correction = correction
        c.verdict = _verdict(c.difference, p_adj, alpha)
    if correction in ("holm", "bonferroni") and len(out) > 1:
        adj_level = 1.0 - (1.0 - level) / len(out)  # simultaneous coverage over the pairs, like the adjusted tests
        for c in out:
            x, y = _paired(df, c.a, c.b)
            c.ci_adjusted_low, c.ci_adjusted_high = paired_bootstrap_ci(x, y, n_boot=n_boot, level=adj_level, seed=seed)
            c.ci_adjusted_level = adj_level
    return out


def distinct_top_pipelines(df: pd.DataFrame, top: int) -> tuple[list[str], dict[str, str]]:
    """The ``top`` pipelines by accuracy whose answers differ, and the skipped twins.

    A pipeline that chose exactly the same candidate for every question as a better-ranked
    one (e.g. ICL levels a student ignores) adds nothing to pairwise tests: it is skipped
    and reported as ``{twin: pipeline it repeats}``.
    """
    acc = df.groupby("pipeline")["correct"].mean().reset_index()
    order = [str(p) for p in acc.sort_values(["correct", "pipeline"], ascending=[False, True])["pipeline"]]
    column = "chosen" if "chosen" in df.columns else "correct"
    wide = df.pivot_table(index="question_id", columns="pipeline", values=column, aggfunc="first")
    chosen: list[str] = []
    twins: dict[str, str] = {}
    seen: dict[tuple[object, ...], str] = {}
    for pid in order:
        key = tuple(wide[pid].fillna(-1).tolist()) if pid in wide.columns else (pid,)
        if key in seen:
            twins[pid] = seen[key]
            continue
        seen[key] = pid
        chosen.append(pid)
        if len(chosen) == top:
            break
    return chosen, twins


def verdicts(
    run: str | Path | pd.DataFrame,
    *,
    top: int = 5,
    correction: str = "holm",
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> Verdicts:
    """Pairwise verdicts among the ``top`` distinct pipelines of a run dir (what the report shows), or of its
    responses table (one run's, or several runs' merged by the report).

    Pipelines that answered every question exactly like a better-ranked one are skipped
    (listed under ``identical``), so the comparisons are between different behaviours.

    Returns ``{"version", "created", "pipelines", "correction", "alpha", "comparisons": [...]}``;
    ``a`` is always the pipeline with the higher accuracy.
    """
    df = run if isinstance(run, pd.DataFrame) else read_responses(run)
    best, twins = distinct_top_pipelines(df, top)
    comps = (
        compare_many(df, best, correction=correction, n_boot=n_boot, seed=seed, alpha=alpha) if len(best) > 1 else []
    )
    return {
        "version": COMPARISONS_VERSION,
        "created": now_iso(),
        "pipelines": best,
        "identical": twins,  # pipelines skipped because they answered exactly like a better-ranked one
        "correction": correction,
        "alpha": alpha,
        "n_boot": n_boot,
        "seed": seed,
        "comparisons": [c.to_dict() for c in comps],
    }


def write_comparisons(path: str | Path, result: Verdicts, responses: str | Path | None = None) -> Path:
    """Write a :func:`verdicts`-shaped result as JSON (atomically), recording under ``responses`` the responses
    file it was computed from (:func:`ragrade.provenance.source_record`), so that a reader can tell when the run
    changed since (the report then shows it as stale, never as current)."""
    from ragrade.provenance import source_record

    p = Path(path)
    doc = dict(result)
    if responses is not None and Path(responses).is_file():
        doc["responses"] = source_record(responses)
    write_json(p, doc)
    return p


__all__ = [
    "COMPARISONS_FILE",
    "COMPARISONS_VERSION",
    "Comparison",
    "Verdicts",
    "compare_many",
    "compare_pair",
    "distinct_top_pipelines",
    "interval_text",
    "resolve_pipeline",
    "verdicts",
    "write_comparisons",
]
