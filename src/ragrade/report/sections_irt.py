"""Report section on Item Response Theory: component effects, item curves, information, improvement.

The fits come from ``irt/plan.json``: since plan version 2 usually one fit over every factor on every
pipeline (a factor that does not apply to a pipeline, like the chunker of closed book, gives it no
effect); runs made with version 1 have a main fit plus ``irt/by_<factor>/irt.json`` on the pipelines
where that factor applies, and both are rendered.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ragrade.io import JSONObject
from ragrade.report import charts
from ragrade.report.html import Section, Table
from ragrade.report.sections_core import SUMMARY, absent, accuracy_by_factor
from ragrade.report.sources import RunFiles

IRT = "irt/irt.json"
PLAN = "irt/plan.json"
IMPROVE = "irt/improve/irt_improve.json"
MAX_CURVES = 30
TIE = 0.02  # accuracy differences below this are ties for the sign check
NOT_APPLICABLE = ("none", "")  # what plan version 1 treated as "factor does not apply"


def _fits(files: RunFiles) -> list[dict[str, Any]]:
    plan = files.json(PLAN)
    if plan and plan.get("fits"):
        return [dict(f, file=f"irt/{f['path']}") for f in plan["fits"] if files.has(f"irt/{f['path']}")]
    return [{"name": "main", "file": IRT, "subset": None, "factor": None}] if files.has(IRT) else []


def _subset(summary: pd.DataFrame, fit: Mapping[str, object], na_values: list[str] | None = None) -> pd.DataFrame:
    factor = fit.get("factor")
    if fit.get("subset") and factor and factor in summary:
        keys = {v.strip().lower() for v in (na_values if na_values is not None else NOT_APPLICABLE)}
        text = summary[factor].map(lambda v: "" if pd.isna(v) else str(v).strip().lower())
        kept: pd.DataFrame = summary[~text.isin(keys)]
        return kept
    return summary


def not_applicable_note(doc: dict[str, Any]) -> str | None:
    """One sentence per factor that does not apply to some pipelines of a fit (from irt.json), or None."""
    n_all = (doc.get("counts") or {}).get("n_pipelines", "?")
    parts = []
    for factor, na in (doc.get("not_applicable") or {}).items():
        n = na.get("n_pipelines") or 0
        if not n:
            continue
        seen = "/".join(v or "empty" for v in na.get("seen", [])) or "none"
        parts.append(
            f"{factor} does not apply to {n} of {n_all} pipelines ({factor} = {seen}): they get no {factor} "
            f"effect, which places them at the average {factor}; the {factor} effects sum to zero over its "
            f"real levels and are estimated from the {na.get('n_pipelines_applicable', '?')} pipelines where "
            "it applies."
        )
    return " ".join(parts) or None


def effect_agreement(
    effects: dict[str, dict[str, dict[str, Any]]], summary: pd.DataFrame, tie: float = TIE
) -> list[dict[str, object]]:
    """For every factor and pair of levels: do the IRT effect and the pooled accuracy differ in the same direction?

    ``summary`` must hold the pipelines the fit used (columns n, n_correct and the factor). Pairs whose accuracy
    differs by less than ``tie`` are reported with ``agree`` None (a tie says nothing about the direction).
    """
    out = []
    for factor, levels in effects.items():
        if factor not in summary:
            continue
        acc = accuracy_by_factor(summary, factor)
        for a, b in itertools.combinations(sorted(levels), 2):
            ea, eb = levels[a].get("estimate"), levels[b].get("estimate")
            if ea is None or eb is None or a not in acc or b not in acc:
                continue
            d_acc, d_eff = acc[a] - acc[b], float(ea) - float(eb)
            agree = None if abs(d_acc) < tie else (d_acc > 0) == (d_eff > 0)
            out.append({"factor": factor, "a": a, "b": b, "accuracy_diff": d_acc, "effect_diff": d_eff, "agree": agree})
    return out


def irt_section(files: RunFiles) -> Section:
    """The IRT section: effects with error bars, sign check, ICCs, information curves, improvement."""
    sec = Section("irt", "Item response theory")
    fits = _fits(files)
    if not fits and (stale := files.stale(IRT)):
        sec.note = f"No fit shown: {stale}."
        return sec
    if not fits:
        return absent(sec, IRT)
    main = files.json(fits[0]["file"])
    fit = main.get("fit", {})
    sec.add_text(
        f"{main.get('model', '?').upper()} model on {main.get('counts', {}).get('n_pipelines', '?')} "
        f"pipelines x {main.get('counts', {}).get('n_items', '?')} questions; converged: "
        f"{fit.get('converged')}; RMSE {fit.get('rmse', float('nan')):.3f} against "
        f"{fit.get('rmse_baseline', float('nan')):.3f} for predicting the mean.",
        fits[0]["file"],
    )
    summary = files.csv(SUMMARY)
    if files.merged is not None and files.merged.irt_run is not None:
        sec.add_text(files.merged.irt_note(main.get("counts", {}).get("n_pipelines", "?")), fits[0]["file"])
        if summary is not None:  # the sign check compares the fit with its own pipelines
            merged = files.merged
            summary = summary[[merged.in_run(str(p), merged.irt_run) for p in summary["pipeline"]]]
    plan = files.json(PLAN) or {}
    for f in fits:
        _effects(sec, files, f, summary, plan.get("not_applicable_values"))
    _curves(sec, main, fits[0]["file"], item_params(files, fits[0]["file"]))
    _information(sec, main, fits[0]["file"])
    _improvement(sec, files)
    return sec


def _logit_unit(doc: dict[str, Any]) -> str:
    """How the fit set its logit unit, in a few words (irt.json ``identifiability.scale``)."""
    scale = str((doc.get("identifiability") or {}).get("scale") or "")
    if scale.startswith("discriminations with geometric mean 1"):
        bias = " and bias-corrected by a jackknife over pipelines" if "jackknife" in str(doc.get("se_method")) else ""
        return "on the unit where discriminations have geometric mean 1" + bias
    if scale.startswith("discriminations normalised"):
        return "on the unit where discriminations have geometric mean 1"
    return "whose unit is set by the model's priors"


def _effects(
    sec: Section, files: RunFiles, fit: dict[str, Any], summary: pd.DataFrame | None, na_values: list[str] | None
) -> None:
    doc = files.json(fit["file"])
    effects = doc.get("effects") or {}
    src = fit["file"]
    if not effects:
        sec.add(f'<p class="note">{html.escape(str(fit["name"]))}: flat model (no factors), abilities only.</p>')
        return
    labels, vals, lows, highs, rows = [], [], [], [], []
    pp, pp_lows, pp_highs = [], [], []
    for factor, levels in effects.items():
        for level, e in levels.items():
            est, se = e.get("estimate"), e.get("se")
            source = e.get("accuracy_pp_source") or "observed"
            labels.append(f"{factor}={level}" + ("" if source == "observed" else " (partly predicted)"))
            vals.append(est)
            lows.append(None if est is None or se is None else est - 1.96 * se)
            highs.append(None if est is None or se is None else est + 1.96 * se)
            pp.append(e.get("accuracy_pp"))
            pp_lows.append(e.get("accuracy_pp_ci95_low"))
            pp_highs.append(e.get("accuracy_pp_ci95_high"))
            rows.append([factor, level, e.get("accuracy_pp"), pp_lows[-1], pp_highs[-1], source, est, se])
    scope = fit.get("subset") or "all pipelines"
    sec.add(f"<h3>Component effects ({html.escape(str(fit['name']))}: {html.escape(str(scope))})</h3>")
    columns = ["factor", "level", "accuracy difference (pp)", "pp low", "pp high", "pp source"]
    columns += ["effect (logits)", "se (logits)"]
    table: Table | None = Table(columns, rows, source=src)
    if any(v is not None for v in pp):
        sec.add_text(
            "Each level as how much more accurate, on this exam, in percentage points, the pipelines where "
            "the factor applies are with it than on average over the factor's levels, the other components "
            "as they are (95% interval): from the observed accuracies; where a combination of components was "
            "not run, the model predicts it, and the value is labelled partly predicted ('a of b cells; c of d "
            "over the factor': a cell is one combination of the level with the other components; a of the "
            "level's b combinations, c of the factor's d, were predicted, not run). The logit effects "
            f"({_logit_unit(doc)}) follow for experts.",
            f"{src} (effects_units)",
        )
        sec.add(
            charts.bar_with_errors(
                f"effects-pp-{fit['name']}",
                f"Accuracy difference per component level ({scope}, 95% interval)",
                labels,
                pp,
                pp_lows,
                pp_highs,
                source=src,
                axis_title="accuracy difference (percentage points)",
                table=table,
            )
        )
        table = None
    sec.add(
        charts.bar_with_errors(
            f"effects-{fit['name']}",
            f"Ability effect per component level ({scope}, ±1.96 SE)",
            labels,
            vals,
            lows,
            highs,
            source=src,
            axis_title="effect on ability (theta, logits)",
            table=table or Table(["factor", "level", "estimate", "se"], [r[:2] + r[6:] for r in rows], source=src),
        )
    )
    note = not_applicable_note(doc)
    if note:
        sec.add_text(note, f"{src} (not_applicable)")
    if summary is not None:
        _sign_check(sec, effects, _subset(summary, fit, na_values), src)


def _sign_check(sec: Section, effects: dict[str, Any], summary: pd.DataFrame, src: str) -> None:
    """Do the IRT effects point the same way as the pooled accuracies? (a sentence and a table)"""
    checks = effect_agreement(effects, summary)
    decided = [c for c in checks if c["agree"] is not None]
    n_ok = sum(bool(c["agree"]) for c in decided)
    sec.add_text(
        f"Sign check: {n_ok} of {len(decided)} level pairs whose pooled accuracy differs by at least "
        f"{TIE:g} have IRT effects in the same direction ({len(checks) - len(decided)} ties).",
        f"{src} + {SUMMARY}",
    )
    sec.add(
        Table(
            ["factor", "A", "B", "accuracy A-B", "effect A-B", "same direction"],
            [
                [
                    c["factor"],
                    c["a"],
                    c["b"],
                    c["accuracy_diff"],
                    c["effect_diff"],
                    "tie" if c["agree"] is None else c["agree"],
                ]
                for c in checks
            ],
            caption="IRT effects against pooled accuracy",
            source=f"{src} + {SUMMARY}",
        )
    )


def _spread(items: list[str], difficulty: dict[str, float], n: int) -> list[str]:
    ordered = sorted(items, key=lambda i: (difficulty.get(i, 0.0), i))
    if len(ordered) <= n:
        return ordered
    step = (len(ordered) - 1) / (n - 1)
    return [ordered[round(k * step)] for k in range(n)]


def item_params(files: RunFiles, rel: str) -> dict[str, JSONObject]:
    """Question id -> its row of item parameters: inline in irt.json (version 1, small exams) or from the
    per-item Parquet table it names (version 2); {} when neither is there."""
    doc = files.json(rel) or {}
    if isinstance(doc.get("items"), dict):
        return dict(doc["items"])
    table = (doc.get("tables") or {}).get("items")
    if not table or not str(table).endswith(".parquet"):
        return {}
    folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
    df = files.parquet(folder + table)
    if df is None:
        return {}
    cols = ["question_id", "discrimination", "difficulty", "guessing"]
    return {str(r.pop("question_id")): {str(k): v for k, v in r.items()} for r in df[cols].to_dict("records")}


def _curves(sec: Section, doc: dict[str, Any], src: str, items: dict[str, dict[str, Any]]) -> None:
    info = doc.get("information") or {}
    icc = info.get("item_characteristic")
    grid = info.get("theta_grid")
    if not icc or not grid:
        return
    difficulty = {k: float(v.get("difficulty") or 0.0) for k, v in items.items()}
    chosen = _spread(list(icc), difficulty, MAX_CURVES)
    abilities = doc.get("abilities") or {}
    marks = {
        "type": "scatter",
        "mode": "markers",
        "name": "pipelines (ability)",
        "x": [a.get("theta") for a in abilities.values()],
        "y": [0.0] * len(abilities),
        "text": list(abilities),
        "marker": {"symbol": "x", "size": 8, "color": "#222"},
        "hovertemplate": "%{text}: theta %{x:.2f}<extra></extra>",
    }
    series = [(q, grid, icc[q]) for q in chosen]
    rows = [[q, *(items.get(q, {}).get(k) for k in ("discrimination", "difficulty", "guessing"))] for q in chosen]
    sec.add("<h3>Item characteristic curves</h3>")
    sec.add(
        charts.lines(
            "icc",
            f"Probability of a correct answer against ability ({len(chosen)} of {len(icc)} items, "
            "spread over difficulty)",
            series,
            source=f"{src} (information.item_characteristic)",
            x_title="ability theta",
            y_title="P(correct)",
            extra=[marks],
            legend=False,
            table=Table(["item", "discrimination", "difficulty", "guessing"], rows, source=src),
        )
    )


def _information(sec: Section, doc: dict[str, Any], src: str) -> None:
    info = doc.get("information") or {}
    grid = info.get("theta_grid")
    groups = info.get("groups") or {}
    if not grid:
        return
    sec.add("<h3>Information</h3>")
    base = [("all items (mean)", grid, info.get("mean", []))]
    for key, label in (("bloom", "Bloom level"), ("qword", "question word")):
        levels = groups.get(key) or {}
        if not levels:
            sec.add(f'<p class="note">No {label} tags: information per {label} is not available.</p>')
            continue
        series = base + [(f"{lvl} (n={v['n_items']})", grid, v["mean"]) for lvl, v in levels.items()]
        rows = [[lvl, v["n_items"], max(v["mean"]), grid[v["mean"].index(max(v["mean"]))]] for lvl, v in levels.items()]
        sec.add(
            charts.lines(
                f"info-{key}",
                f"Mean item information by {label}",
                series,
                source=f"{src} (information.groups.{key})",
                x_title="ability theta",
                y_title="mean information",
                table=Table([label, "items", "peak information", "at theta"], rows, source=src),
            )
        )


def _improvement(sec: Section, files: RunFiles) -> None:
    doc = files.json(IMPROVE)
    sec.add("<h3>Iterative exam improvement</h3>")
    if not doc and (stale := files.stale(IMPROVE)):
        sec.add(f'<p class="note stale">not shown: {html.escape(stale)}</p>')
        return
    if not doc:
        sec.add(f'<p class="note">not in this run: {IMPROVE}</p>')
        return
    grid = doc["theta_grid"]
    linked = all("linked" in s for s in doc["steps"])

    def curve(s: dict[str, Any]) -> list[float]:
        return list(s["linked"]["information_mean"] if linked else s["information_mean"])

    series = [(f"step {s['step']} ({s['n_items']} items)", grid, curve(s)) for s in doc["steps"]]
    base = doc["steps"][0]["linked"]["mean_information_at_abilities"] if linked else None
    rows = [
        [
            s["step"],
            s["n_items"],
            len(s.get("dropped", [])),
            s["discrimination"]["mean"],
            max(curve(s)),
            s["linked"]["mean_information_at_abilities"] if linked else None,
            None if base is None else 100.0 * (s["linked"]["mean_information_at_abilities"] / base - 1.0),
            s["fit"].get("rmse"),
            s["fit"].get("converged"),
        ]
        for s in doc["steps"]
    ]
    text = f"Each step drops the {doc.get('drop', 0):.0%} least discriminative questions and refits."
    if linked:
        text += (
            " Every step is linked to the ability scale of the first fit (mean/mean on the kept questions), so "
            "the curves and the information at the pipelines' abilities compare across steps."
        )
    else:
        text += " These curves are each on their own refit's scale (an older file): they do not compare across steps."
    sec.add_text(text, IMPROVE)
    sec.add(
        charts.lines(
            "improve",
            "Mean information per step of the improvement" + (" (on the first fit's scale)" if linked else ""),
            series,
            source=IMPROVE,
            x_title="ability theta",
            y_title="mean information",
            table=Table(
                [
                    "step",
                    "items",
                    "dropped",
                    "mean discrimination",
                    "peak mean information",
                    "mean information at the pipelines' abilities",
                    "change vs step 0 (%)",
                    "RMSE",
                    "converged",
                ],
                rows,
                source=IMPROVE,
            ),
        )
    )


__all__ = ["effect_agreement", "irt_section", "item_params", "not_applicable_note"]
