"""Report section on the query transforms and passage post-processing: paired verdicts and IRT effects per level.

For the ``query`` and ``post`` factors (columns of ``sweep/responses.parquet``)
every level is compared with ``none`` on matched pipelines: pipelines equal in
every other factor, one untransformed and one with the level. Their answers
to the same questions are paired (pooled over the matched pipelines), and the
accuracy difference gets a paired bootstrap 95% interval, an exact McNemar
p-value (Holm-adjusted over the levels of the factor) and a verdict. The IRT
effect difference (level minus ``none``) from ``irt/irt.json`` stands beside it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ragrade.errors import DataError
from ragrade.report.html import Section, Table
from ragrade.report.sources import RunFiles

RESPONSES = "sweep/responses.parquet"
IRT = "irt/irt.json"
TRANSFORM_FACTORS = ("query", "post")
BASELINE = "none"
NOT_APPLICABLE = ("n/a", "")
MATCH_ON = ("llm", "retriever", "k", "icl", "chunker", "prompt", "method", "query", "post", "temperature", "max_tokens")


def paired_by_level(df: pd.DataFrame, factor: str, level: str) -> tuple[pd.DataFrame, int]:
    """Rows of ``level`` and of ``none`` on matched pipelines, relabelled as two pipelines; and the match count.

    Question ids are prefixed with the matched group, so every (group, question) is one pair.
    """
    keys = [c for c in MATCH_ON if c in df.columns and c != factor]
    sub = df[df[factor].astype(str).isin([level, BASELINE])].copy()
    group = sub[keys].astype(str).agg("|".join, axis=1) if keys else pd.Series("", index=sub.index)
    sub["_group"] = group
    both = sub.groupby("_group")[factor].nunique()
    matched = both[both == 2].index
    sub = sub[sub["_group"].isin(matched)]
    out = pd.DataFrame(
        {
            "pipeline": sub[factor].astype(str),
            "question_id": sub["_group"] + "::" + sub["question_id"].astype(str),
            "correct": sub["correct"],
        }
    )
    return out, len(matched)


def factor_verdicts(df: pd.DataFrame, factor: str, *, alpha: float = 0.05, seed: int = 0) -> list[dict[str, Any]]:
    """One comparison per level of ``factor`` against ``none`` (Holm over the levels); empty without a baseline."""
    from ragrade.run.compare import compare_pair
    from ragrade.stats import adjust_pvalues

    values = df[factor].map(lambda v: "" if pd.isna(v) else str(v))
    levels = sorted(v for v in set(values) if v not in NOT_APPLICABLE and v != BASELINE)
    if BASELINE not in set(values):
        return []
    out = []
    for level in levels:
        paired, n_match = paired_by_level(df, factor, level)
        if not n_match:
            continue
        try:
            comp = compare_pair(paired, level, BASELINE, n_boot=1000, seed=seed, alpha=alpha)
        except DataError:
            continue
        rec = comp.to_dict()
        rec.update(factor=factor, level=level, matched_pipelines=n_match)
        failures = (
            df.loc[values == level, "transform_error"] if "transform_error" in df else pd.Series([], dtype=object)
        )
        rec["transform_failures"] = int(failures.notna().sum())
        out.append(rec)
    adjusted = adjust_pvalues([r["p_value"] for r in out], "holm")
    for r, p in zip(out, adjusted, strict=True):
        r["p_adjusted"] = p
        diff = r["difference"]
        r["verdict"] = (
            ("better than none" if diff > 0 else "worse than none") if p < alpha else "no significant difference"
        )
    return out


def _effect_diff(irt: dict[str, Any], factor: str, level: str) -> tuple[float | None, float | None]:
    """IRT effect of ``level`` minus that of ``none``, and a conservative SE (the two SEs added in quadrature)."""
    levels = (irt.get("effects") or {}).get(factor) or {}
    a, b = levels.get(level) or {}, levels.get(BASELINE) or {}
    if a.get("estimate") is None or b.get("estimate") is None:
        return None, None
    se = None
    if a.get("se") is not None and b.get("se") is not None:
        se = (float(a["se"]) ** 2 + float(b["se"]) ** 2) ** 0.5
    return float(a["estimate"]) - float(b["estimate"]), se


def _levels(col: pd.Series) -> set[str]:
    """The levels a factor takes where it applies (``n/a``: closed book, oracle, external)."""
    return set(col.dropna().astype(str)) - {"n/a"}


def transforms_section(files: RunFiles) -> Section | None:
    """The section, or None when the run varies no query transform or post-processing."""
    if not files.has(RESPONSES):
        return None
    df = files.responses(RESPONSES)
    factors = [f for f in TRANSFORM_FACTORS if f in df.columns and len(_levels(df[f])) > 1]
    if not factors:
        return None
    sec = Section("transforms", "Query transforms and passage post-processing")
    sec.add_text(
        "Each level against no transform (none), on pipelines equal in every other factor: the paired accuracy "
        "difference over the same questions (pooled over the matched pipelines) with a paired bootstrap 95% "
        "interval, an exact McNemar test (Holm-adjusted over the factor's levels), and the IRT effect difference "
        "(level minus none, +-1.96 SE). Failed LLM rewrites fell back to the original query or passages and are "
        "counted, never hidden.",
        RESPONSES,
    )
    irt = files.json(IRT) or {}
    rows = []
    for factor in factors:
        for r in factor_verdicts(df, factor):
            eff, se = _effect_diff(irt, factor, r["level"])
            rows.append(
                [
                    factor,
                    r["level"],
                    r["matched_pipelines"],
                    r["n"],
                    r["accuracy_a"],
                    r["accuracy_b"],
                    r["difference"],
                    f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]",
                    r["p_value"],
                    r["p_adjusted"],
                    r["verdict"],
                    eff,
                    None if se is None else f"+-{1.96 * se:.3f}",
                    r["transform_failures"],
                ]
            )
    columns = [
        "factor",
        "level",
        "matched pipelines",
        "pairs",
        "accuracy (level)",
        "accuracy (none)",
        "difference",
        "95% CI (unadjusted)",
        "McNemar p",
        "p (Holm)",
        "verdict",
        "IRT effect vs none",
        "1.96 SE",
        "rewrite failures",
    ]
    src = f"{RESPONSES} + {IRT}" if irt else RESPONSES
    caption = "Paired verdicts and IRT effects against no transform (the verdict follows the Holm-adjusted p)"
    sec.add(Table(columns, rows, caption=caption, source=src))
    if not rows:
        sec.add_text("No level has a matched untransformed pipeline (add 'none' to the grid to compare).", RESPONSES)
    return sec


__all__ = ["factor_verdicts", "paired_by_level", "transforms_section"]
