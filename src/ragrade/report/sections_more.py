"""Report sections: robustness testbeds, judged free-text answers, and what ran (manifest, stages, timings)."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

from ragrade.io import JSONObject
from ragrade.report import charts
from ragrade.report.html import Section, Table
from ragrade.report.sections_core import absent
from ragrade.report.sources import RunFiles

BUILD_REPORT = "robust/testbeds/build_report.json"
JUDGE_SUMMARY = "judge/scores/summary.json"
JUDGE_AGREEMENT = "judge/scores/agreement.json"
MANIFEST = "manifest.json"
STAGES = "stages.json"
TIMINGS = "timings.json"
_METRIC_LABELS = (
    ("accuracy", "accuracy"),
    ("rejection_rate", "rejection rate"),
    ("error_detection_rate", "error detection"),
    ("error_correction_rate", "error correction"),
    ("accuracy_without_docs", "accuracy without documents"),
    ("partial_accuracy", "partial accuracy"),
)


def robustness(files: RunFiles) -> Section:
    """One table per testbed (the paper's layout) and accuracy against the noise ratio."""
    sec = Section("robustness", "Robustness")
    metrics = [
        p
        for p in files.glob("robust/*/metrics.json") + files.glob("robust/*/*/metrics.json")
        if not p.startswith("robust/testbeds/")
    ]
    skipped = files.glob("robust/*/skipped.json")
    if not metrics and not skipped:
        return absent(sec, "robust/<testbed>/metrics.json")
    build = files.json(BUILD_REPORT)
    if build:
        sec.add_text(
            f"Testbeds built from {build.get('questions')} exam questions and the index: base "
            f"{build.get('base')}, integration {build.get('integration')}, counterfactual "
            f"{build.get('counterfactual')} items ({len(build.get('dropped', []))} dropped with a reason).",
            BUILD_REPORT,
        )
    by_testbed: dict[str, list[tuple[str, JSONObject]]] = {}
    for rel in metrics:
        doc = files.json(rel)
        by_testbed.setdefault(str(doc.get("testbed")), []).append((rel, doc))
    for testbed, runs in by_testbed.items():
        _testbed(sec, testbed, runs)
    for rel in skipped:
        doc = files.json(rel)
        sec.add(
            f'<p class="note">{html.escape(str(doc.get("testbed")))}: skipped, {html.escape(str(doc.get("reason")))}'
            f" (<code>{html.escape(rel)}</code>)</p>"
        )
    return sec


def _testbed(sec: Section, testbed: str, runs: list[tuple[str, dict[str, Any]]]) -> None:
    sec.add(f"<h3>{html.escape(testbed)}</h3>")
    sources = ", ".join(rel for rel, _ in runs)
    first = runs[0][1]
    table = first.get("table") or {}
    if table.get("rows") and len(runs) == 1:
        actual = {c.removeprefix("actual noise "): c for c in table.get("actual_columns") or []}
        cells: list[list[object]] = []
        for r in table["rows"]:
            cells.append([r["model"], *(r.get(c) for c in table["columns"])])
            if actual:  # the noise share the documents really had, under each requested ratio
                cells.append(["actual noise ratio", *(r.get(actual.get(c, "")) for c in table["columns"])])
        note = "; columns are the requested noise ratios" if actual else ""
        sec.add(
            Table(
                ["model", *table["columns"]],
                cells,
                caption=f"{testbed}: percent ({'/'.join(table.get('scoring', []))} scoring{note})",
                source=sources,
            )
        )
    _skipped_items(sec, testbed, first, sources)
    _run_notes(sec, testbed, first, sources)
    rows = []
    for _rel, doc in runs:
        for key, label in _METRIC_LABELS:
            m = doc.get(key)
            if isinstance(m, dict) and m.get("value") is not None:
                rows.append([doc.get("model"), label, m["value"], m.get("low"), m.get("high"), m.get("k"), m.get("n")])
    sec.add(
        Table(
            ["model", "metric", "value", "CI low", "CI high", "k", "n"],
            rows,
            caption=f"{testbed}: metrics with Wilson 95% intervals (n = {first.get('n')} responses, "
            f"{first.get('failed', 0)} failed)",
            source=sources,
        )
    )
    ratios = [g for g in first.get("by_noise_ratio", []) if isinstance(g.get("accuracy"), dict)]
    if len(ratios) > 1 and _ratio_columns(testbed, first):
        series: list[tuple[str, list[float], list[float | None]]] = []
        trows: list[list[object]] = []
        for _rel, doc in runs:
            groups = doc.get("by_noise_ratio", [])
            xs = [g["noise_ratio"] for g in groups]
            ys = [(g.get("accuracy") or {}).get("value") for g in groups]
            series.append((str(doc.get("model")), xs, ys))
            trows.extend(
                [
                    doc.get("model"),
                    g["noise_ratio"],
                    g.get("noise_ratio_actual_mean"),
                    (g.get("accuracy") or {}).get("value"),
                    (g.get("accuracy") or {}).get("low"),
                    (g.get("accuracy") or {}).get("high"),
                ]
                for g in groups
            )
        sec.add(
            charts.lines(
                f"noise-{testbed}",
                f"{testbed}: accuracy against the share of noise documents",
                series,
                source=sources,
                x_title="noise ratio",
                y_title="accuracy",
                markers=True,
                table=Table(
                    ["model", "noise ratio", "actual noise ratio", "accuracy", "CI low", "CI high"],
                    trows,
                    source=sources,
                ),
            )
        )


def _ratio_columns(testbed: str, metrics: Mapping[str, object]) -> bool:
    """Whether the testbed's table columns are noise ratios (as its registry entry says; unknown: no)."""
    from ragrade.errors import ConfigError
    from ragrade.robust.testbeds import get_testbed

    try:
        return bool(get_testbed(testbed).actual_cells(metrics))
    except (ConfigError, KeyError, TypeError, ValueError):
        return False


def _run_notes(sec: Section, testbed: str, metrics: dict[str, Any], source: str) -> None:
    """What 'flagged' and 'untestable' count, and the run's warnings (actual noise ratios off the requested)."""
    if metrics.get("flagged"):
        meaning = metrics.get("flagged_means") or "flagged: records whose documents are not what was asked"
        sec.add_text(f"{testbed}: {metrics['flagged']} {meaning}.", source)
    if metrics.get("untestable"):
        sec.add_text(
            f"{testbed}: {metrics['untestable']} record(s) untestable (fake answer equals the answer), "
            "left out of the metrics.",
            source,
        )
    for note in metrics.get("warnings") or []:
        sec.add_text(f"warning: {note}", source)


def _skipped_items(sec: Section, testbed: str, metrics: dict[str, Any], source: str) -> None:
    """One line per reason an item was left out of a testbed, with the item ids."""
    by_reason: dict[str, list[str]] = {}
    for s in metrics.get("skipped_items") or []:
        ids = by_reason.setdefault(str(s.get("reason")), [])
        if str(s.get("id")) not in ids:
            ids.append(str(s.get("id")))
    for reason, ids in by_reason.items():
        shown = ", ".join(ids[:20]) + (", ..." if len(ids) > 20 else "")
        sec.add_text(
            f"{testbed}: {len(ids)} item{'s' if len(ids) != 1 else ''} skipped ({reason}), ids: {shown}", source
        )


def judges(files: RunFiles) -> Section:
    """Judged free-text answers: metric values per configuration, and agreement between metrics."""
    sec = Section("judges", "Judged answers")
    summary = files.json(JUDGE_SUMMARY)
    if not summary:
        return absent(sec, JUDGE_SUMMARY)
    rows = []
    baseline = {m for m, d in (summary.get("judges") or {}).items() if isinstance(d, dict) and d.get("baseline")}
    for config, metrics in (summary.get("configs") or {}).items():
        for metric, s in metrics.items():
            for stat in s.get("statistics", []):
                rows.append(
                    [
                        config,
                        f"{metric} (baseline)" if metric in baseline else metric,
                        stat.get("statistic"),
                        stat.get("value"),
                        stat.get("ci_low"),
                        stat.get("ci_high"),
                        stat.get("n_used"),
                        s.get("n_unparsed"),
                        s.get("n_failed"),
                        s.get("n_skipped"),
                    ]
                )
    sec.add_text(f"{summary.get('n_answers')} answers judged.", JUDGE_SUMMARY)
    sec.add(
        Table(
            [
                "configuration",
                "metric",
                "statistic",
                "value",
                "CI low",
                "CI high",
                "n used",
                "unparsed",
                "failed",
                "skipped",
            ],
            rows,
            caption="Judge metrics (95% intervals)",
            source=JUDGE_SUMMARY,
        )
    )
    agreement = files.json(JUDGE_AGREEMENT)
    if agreement:
        arows = [[k, json.dumps(v, default=str)[:200]] for k, v in (agreement.get("all") or {}).items()]
        if arows:
            sec.add(
                Table(
                    ["measure (all answers)", "value"],
                    arows,
                    caption="Agreement between metrics",
                    source=JUDGE_AGREEMENT,
                )
            )
        else:
            sec.add_text("Agreement needs an LLM correctness judge next to BERTScore or exact match; none ran.")
    return sec


def _missing(manifest: Mapping[str, object]) -> str:
    """``"3 (sweep: 2, judge/scores: 1); rerun to retry"``, ``"0"``, or ``"not recorded"`` (older manifests)."""
    n = manifest.get("missing")
    if n is None:
        return "not recorded"
    by = manifest.get("missing_by") or {}
    where = f" ({', '.join(f'{k}: {v}' for k, v in by.items())})" if isinstance(by, dict) and by else ""
    return f"{n}{where}; rerun to ask them again" if n else "0"


def run_info(files: RunFiles) -> Section:
    """What ran: stages with their status and time, and the manifest (config, seeds, versions)."""
    sec = Section("manifest", "What ran")
    manifest = files.json(MANIFEST)
    stages = files.json(STAGES)
    timings = files.json(TIMINGS)
    if stages:
        t = (timings or {}).get("stages", {})
        rows = [
            [
                name,
                rec.get("status"),
                rec.get("seconds"),
                "reused" if (t.get(name) or {}).get("reused") else "",
                json.dumps(rec.get("summary", {}), default=str)[:160],
            ]
            for name, rec in stages.get("stages", {}).items()
        ]
        sec.add(
            Table(
                ["stage", "status", "seconds (when it ran)", "this invocation", "summary"],
                rows,
                caption="Stages",
                source=f"{STAGES} + {TIMINGS}",
            )
        )
    if timings:
        per = {k: v.get("seconds") or 0.0 for k, v in timings.get("stages", {}).items()}
        if per:
            sec.add(
                charts.bar_with_errors(
                    "timings",
                    "Wall time per stage in the last invocation (s)",
                    list(per),
                    list(per.values()),
                    source=TIMINGS,
                    axis_title="seconds",
                )
            )
    if not manifest:
        return absent(sec, MANIFEST) if not stages else sec
    software = manifest.get("software") or {}
    rows = [
        ["kind", manifest.get("kind")],
        ["name", manifest.get("name")],
        ["status", manifest.get("status")],
        ["missing answers (failed requests)", _missing(manifest)],
        ["started", manifest.get("started")],
        ["finished", manifest.get("finished")],
        ["python", software.get("python")],
        ["platform", software.get("platform")],
        ["git", json.dumps(software.get("git"), default=str)],
        ["seeds", json.dumps(manifest.get("seeds"))],
    ]
    rows += [[f"package {k}", v] for k, v in (software.get("packages") or {}).items()]
    sec.add(Table(["field", "value"], rows, caption="Manifest", source=MANIFEST))
    _provenance(sec, files)
    text = json.dumps(manifest.get("config", {}), indent=2, ensure_ascii=False, default=str)
    sec.add(
        f'<details><summary>full configuration</summary><pre class="manifest">{html.escape(text)}</pre>'
        f'<p class="src">from <code>{MANIFEST}</code> (config)</p></details>'
    )
    return sec


def _provenance(sec: Section, files: RunFiles) -> None:
    """What the responses depend on (the sweep manifest's provenance: ragrade.provenance), in a table and whole."""
    rel = "sweep/manifest.json"
    sweep = files.json(rel) or {}
    prov = sweep.get("provenance") if isinstance(sweep, dict) else None
    if not isinstance(prov, dict):
        return
    from ragrade.provenance import digest

    models = prov.get("models") or {}
    rows: list[list[object]] = [
        ["digest (what the responses depend on)", digest(prov)],
        ["inputs (by content)", "; ".join(f"{k} {str(v)[:12]}" for k, v in (prov.get("inputs") or {}).items())],
        ["models", "; ".join(f"{k}: {json.dumps(v, default=str)[:120]}" for k, v in models.items())],
        ["pipelines x questions", f"{len(prov.get('grid') or {})} x {len(prov.get('items') or [])}"],
        ["ragrade", (prov.get("code") or {}).get("ragrade")],
    ]
    sec.add(Table(["provenance", "value"], rows, caption="What the responses depend on", source=f"{rel} (provenance)"))
    text = json.dumps(prov, indent=2, ensure_ascii=False, default=str)
    sec.add(
        f'<details><summary>full provenance</summary><pre class="manifest">{html.escape(text)}</pre>'
        f'<p class="src">from <code>{rel}</code> (provenance; throughput settings under "recorded" are kept '
        "beside it, never depended on)</p></details>"
    )


__all__ = ["judges", "robustness", "run_info"]
