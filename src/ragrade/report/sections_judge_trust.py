"""Report section "Can the judges be trusted?": human calibration and the claim-level diagnosis.

Reads ``judge/scores/calibration/calibration.json`` (``ragrade judge calibrate``)
and the claims statistics of ``judge/scores/summary.json``. Shows, per metric and
configuration, the uncorrected judge mean beside the PPI++ corrected estimate and
the human-only estimate (each with its interval) and the judge-human agreement;
then, per configuration, the claim metrics with their intervals grouped by the
component they speak for, and where the reference's facts are lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragrade.report.charts import PALETTE
from ragrade.report.html import Figure, Section, Table, slug
from ragrade.report.sections_more import JUDGE_SUMMARY
from ragrade.report.sources import RunFiles

CALIBRATION = "judge/scores/calibration/calibration.json"
CLAIM_ORDER = (
    ("claim_recall", "retriever: claim recall"),
    ("context_precision", "retriever: context precision"),
    ("context_utilisation", "generator: context utilisation"),
    ("noise_relevant", "generator: noise sensitivity (relevant)"),
    ("noise_irrelevant", "generator: noise sensitivity (irrelevant)"),
    ("hallucination", "generator: hallucination"),
    ("self_knowledge", "generator: self-knowledge"),
    ("faithfulness", "generator: faithfulness"),
    ("precision", "overall: claim precision"),
    ("recall", "overall: claim recall"),
    ("f1", "overall: claim F1"),
)
#: what the claim metrics mean (RAGChecker's definitions; ragrade.judge.claims_metrics has the formulas)
CLAIM_HELP = (
    "A passage is relevant when it entails a claim of the reference answer; an answer claim is correct when "
    "the reference entails it. Claim recall: share of the reference's claims found in some passage; context "
    "precision: share of the passages that are relevant; context utilisation: of the reference's claims found "
    "in the passages, the share the answer states. Of the answer's claims: noise sensitivity (relevant) the "
    "incorrect ones a relevant passage entails, noise sensitivity (irrelevant) the incorrect ones only "
    "irrelevant passages entail, hallucination the incorrect ones no passage entails (these three add up to "
    "1 - precision), self-knowledge the correct ones no passage entails, faithfulness those some passage "
    "entails. Where RAGChecker writes 0 for an undefined value (no answer claims, no reference claims, no "
    "passages, no reference claim in the passages) the answer is left out of that mean here; with no passages "
    "(closed book) every incorrect claim counts as a hallucination and every correct one as self-knowledge."
)


def _ci(v: object) -> str:
    return "" if not isinstance(v, list) or len(v) != 2 else f"[{v[0]:.3f}, {v[1]:.3f}]"


def _agreement(a: Mapping[str, object] | None) -> str:
    if not a:
        return ""
    return ", ".join(f"{k} {v:.2f}" for k, v in a.items() if isinstance(v, float))


def _points(fid: str, title: str, configs: list[str], rows: dict[str, dict[str, Any]], source: str) -> Figure:
    data = []
    for i, (est, ci, name) in enumerate(
        (
            ("judge_mean", "judge_ci", "judge (uncorrected)"),
            ("ppi_estimate", "ppi_ci", "corrected (PPI++)"),
            ("human_mean", "human_only_ci", "human labels only"),
        )
    ):
        vals = [rows[c].get(est) for c in configs]
        hi = [None if v is None else rows[c][ci][1] - v for c, v in zip(configs, vals, strict=True)]
        lo = [None if v is None else v - rows[c][ci][0] for c, v in zip(configs, vals, strict=True)]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": name,
                "x": configs,
                "y": vals,
                "marker": {"color": PALETTE[i], "size": 10},
                "error_y": {"type": "data", "symmetric": False, "array": hi, "arrayminus": lo, "visible": True},
            }
        )
    layout = {"xaxis": {"automargin": True}, "yaxis": {"title": {"text": "mean"}}, "scattermode": "group"}
    return Figure(fid, title, data, layout, source=source)


def _calibration(sec: Section, cal: dict[str, Any]) -> None:
    sec.add_text(
        f"Judge scores corrected with human labels by prediction-powered inference ({cal.get('method')}); "
        f"{float(cal.get('level', 0.95)):.0%} intervals. Labels from {cal.get('labels')}.",
        CALIBRATION,
    )
    for metric, m in (cal.get("metrics") or {}).items():
        rows = {c: r for c, r in (m.get("configs") or {}).items() if "ppi_ci" in r}
        trows = []
        for config, r in (m.get("configs") or {}).items():
            if "ppi_ci" not in r:
                trows.append([config, r.get("n_labels", 0), r.get("note", ""), "", "", "", "", "", ""])
                continue
            trows.append(
                [
                    config,
                    r["n_labels"],
                    f"{r['judge_mean']:.3f} {_ci(r['judge_ci'])}",
                    f"{r['ppi_estimate']:.3f} {_ci(r['ppi_ci'])}",
                    f"{r['human_mean']:.3f} {_ci(r['human_only_ci'])}",
                    f"{r['bias']:+.3f} {_ci(r['bias_ci'])}",
                    r.get("judge_outside_ppi_ci"),
                    _agreement(r.get("agreement")),
                    r.get("lambda"),
                ]
            )
        table = Table(
            [
                "configuration",
                "labels",
                "judge (raw)",
                "corrected (PPI++)",
                "human only",
                "judge bias",
                "raw outside corrected CI",
                "agreement with humans",
                "lambda",
            ],
            trows,
            caption=f"{metric} (scale {m.get('scale')})",
            source=CALIBRATION,
        )
        if rows:
            fig = _points(
                f"trust-{slug(metric)}", f"{metric}: judge vs corrected vs human-only", list(rows), rows, CALIBRATION
            )
            fig.table = table  # the static fallback, as every chart of the report has
            sec.add(fig)
        sec.add(table)
        biased = [c for c, r in rows.items() if r.get("judge_outside_ppi_ci")]
        if biased:
            sec.add_text(
                f"{metric}: the uncorrected judge mean lies outside the corrected interval for "
                f"{', '.join(biased)}; report the corrected estimate, not the judge's.",
                CALIBRATION,
            )


def _claims(sec: Section, summary: dict[str, Any]) -> None:
    per = {c: m["claims"] for c, m in (summary.get("configs") or {}).items() if "claims" in m}
    if not per:
        sec.add_text("No claim-level diagnosis in this run (add claims to the judge metrics).", JUDGE_SUMMARY)
        return
    judge = (summary.get("judges") or {}).get("claims") or {}
    tag = " (offline baseline)" if judge.get("baseline") else ""
    configs = sorted(per)
    stats = {c: {s["statistic"]: s for s in per[c].get("statistics", [])} for c in configs}
    data, trows = [], []
    for i, config in enumerate(configs):
        vals = [stats[config].get(k, {}).get("value") for k, _ in CLAIM_ORDER]
        lo = [stats[config].get(k, {}).get("ci_low") for k, _ in CLAIM_ORDER]
        hi = [stats[config].get(k, {}).get("ci_high") for k, _ in CLAIM_ORDER]
        data.append(
            {
                "type": "bar",
                "name": config,
                "x": [label for _, label in CLAIM_ORDER],
                "y": vals,
                "marker": {"color": PALETTE[i % len(PALETTE)]},
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "visible": True,
                    "array": [None if v is None or h is None else h - v for v, h in zip(vals, hi, strict=True)],
                    "arrayminus": [None if v is None or lw is None else v - lw for v, lw in zip(vals, lo, strict=True)],
                },
            }
        )
        for (k, label), v, a, b in zip(CLAIM_ORDER, vals, lo, hi, strict=True):
            trows.append([config, label, v, a, b, stats[config].get(k, {}).get("n_used")])
    table = Table(
        ["configuration", "metric", "mean", "CI low", "CI high", "answers"],
        trows,
        caption=f"Claim metrics per configuration{tag}",
        source=JUDGE_SUMMARY,
    )
    layout = {
        "barmode": "group",
        "yaxis": {"title": {"text": "share of claims"}, "range": [0, 1.05]},
        "xaxis": {"automargin": True, "tickangle": -30},
    }
    sec.add(
        Figure(
            "trust-claims",
            f"Claim-level diagnosis per configuration{tag}",
            data,
            layout,
            table=table,
            source=JUDGE_SUMMARY,
        )
    )
    sec.add_text(CLAIM_HELP)
    for config in configs:
        cr = stats[config].get("claim_recall", {}).get("value")
        cu = stats[config].get("context_utilisation", {}).get("value")
        if cr is None or cu is None:
            continue
        lost_r, lost_g = 1 - cr, cr * (1 - cu)
        who = "the retriever" if lost_r >= lost_g else "the generator"
        sec.add_text(
            f"{config}{tag}: of the reference's facts, about {lost_r:.0%} never reach the passages (retriever) and "
            f"about {lost_g:.0%} are retrieved but left out of the answer (generator): {who} loses more "
            f"(products of per-configuration means).",
            JUDGE_SUMMARY,
        )


def trust(files: RunFiles) -> Section:
    """Judge vs human agreement, corrected estimates beside raw ones, and the claim-level diagnosis."""
    sec = Section("trust", "Can the judges be trusted?")
    cal = files.json(CALIBRATION)
    summary = files.json(JUDGE_SUMMARY)
    if not cal and not summary:
        sec.note = f"not in this run: {JUDGE_SUMMARY}, {CALIBRATION} (no judged answers, no human labels)"
        return sec
    if cal:
        _calibration(sec, cal)
    else:
        sec.add_text(
            "No human labels yet: grade a sample with `ragrade label RUN/judge/scores --n 100 --out label.html`, "
            "then `ragrade judge calibrate RUN/judge/scores --human labels.jsonl` (or human = ... in [calibration]) "
            "to see how far the judges' means are from what a human would give."
        )
    if summary:
        _claims(sec, summary)
    return sec


__all__ = ["CALIBRATION", "trust"]
