"""Plotly figure specs (plain dicts) for the report: bars with error bars, lines, funnels, radar."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragrade.report.html import Figure, Table

PALETTE = ("#2f5fb3", "#d9822b", "#2e9c5a", "#c23b3b", "#7b52ab", "#8c6d31", "#d45a9c", "#5a6b7a", "#1fa3a3", "#9aa12b")


def bar_with_errors(
    fid: str,
    title: str,
    labels: Sequence[str],
    values: Sequence[float | None],
    low: Sequence[float | None] | None = None,
    high: Sequence[float | None] | None = None,
    *,
    source: str,
    table: Table | None = None,
    horizontal: bool = True,
    axis_title: str = "",
    colors: Sequence[str] | None = None,
) -> Figure:
    """A bar chart whose error bars run from ``low`` to ``high`` (asymmetric, e.g. Wilson intervals)."""
    vals = [None if v is None else float(v) for v in values]
    trace: dict[str, Any] = {
        "type": "bar",
        "orientation": "h" if horizontal else "v",
        "name": title,
        "hovertemplate": "%{"
        + ("y" if horizontal else "x")
        + "}: %{"
        + ("x" if horizontal else "y")
        + ":.3f}<extra></extra>",
    }
    if low is not None and high is not None:
        plus = [None if v is None or h is None else max(0.0, float(h) - v) for v, h in zip(vals, high, strict=True)]
        minus = [None if v is None or lo is None else max(0.0, v - float(lo)) for v, lo in zip(vals, low, strict=True)]
        trace["error_" + ("x" if horizontal else "y")] = {
            "type": "data",
            "symmetric": False,
            "array": plus,
            "arrayminus": minus,
            "visible": True,
        }
    if colors is not None:
        trace["marker"] = {"color": list(colors)}
    if horizontal:
        trace.update(x=vals, y=list(labels))
        layout = {
            "yaxis": {"automargin": True, "autorange": "reversed"},
            "xaxis": {"title": {"text": axis_title}},
            "height": max(320, 26 * len(labels) + 120),
        }
    else:
        trace.update(x=list(labels), y=vals)
        layout = {"yaxis": {"title": {"text": axis_title}}, "xaxis": {"automargin": True}}
    return Figure(fid, title, [trace], layout, table=table, source=source)


def lines(
    fid: str,
    title: str,
    series: Sequence[tuple[str, Sequence[float], Sequence[float | None]]],
    *,
    source: str,
    x_title: str,
    y_title: str,
    table: Table | None = None,
    markers: bool = False,
    extra: Sequence[dict[str, Any]] = (),
    legend: bool = True,
) -> Figure:
    """One line per ``(name, x, y)`` series."""
    data = []
    for i, (name, x, y) in enumerate(series):
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers" if markers else "lines",
                "name": name,
                "x": list(x),
                "y": list(y),
                "line": {"color": PALETTE[i % len(PALETTE)], "width": 1.6},
            }
        )
    data.extend(extra)
    layout = {"xaxis": {"title": {"text": x_title}}, "yaxis": {"title": {"text": y_title}}, "showlegend": legend}
    return Figure(fid, title, data, layout, table=table, source=source)


def grouped_bars(
    fid: str,
    title: str,
    categories: Sequence[str],
    groups: Sequence[tuple[str, Sequence[float | None]]],
    *,
    source: str,
    y_title: str,
    table: Table | None = None,
) -> Figure:
    """Bars per category, one colour per group (e.g. accuracy per topic and retriever)."""
    data = [
        {
            "type": "bar",
            "name": name,
            "x": list(categories),
            "y": list(vals),
            "marker": {"color": PALETTE[i % len(PALETTE)]},
        }
        for i, (name, vals) in enumerate(groups)
    ]
    layout = {
        "barmode": "group",
        "yaxis": {"title": {"text": y_title}, "range": [0, 1.05]},
        "xaxis": {"automargin": True, "tickangle": -35},
    }
    return Figure(fid, title, data, layout, table=table, source=source)


def radar(
    fid: str,
    title: str,
    axes: Sequence[str],
    groups: Sequence[tuple[str, Sequence[float | None]]],
    *,
    source: str,
    table: Table | None = None,
) -> Figure:
    """A radar (polar) chart: one closed line per group over the ``axes``."""
    data = []
    for i, (name, vals) in enumerate(groups):
        r = [None if v is None else float(v) for v in vals]
        data.append(
            {
                "type": "scatterpolar",
                "name": name,
                "r": [*r, r[0]] if r else r,
                "theta": [*axes, axes[0]] if axes else list(axes),
                "fill": "none",
                "line": {"color": PALETTE[i % len(PALETTE)]},
            }
        )
    layout = {"polar": {"radialaxis": {"range": [0, 1]}}, "height": 520}
    return Figure(fid, title, data, layout, table=table, source=source)


def funnel(
    fid: str, title: str, stages: Sequence[str], counts: Sequence[int], *, source: str, table: Table | None = None
) -> Figure:
    """A funnel of counts (e.g. exam candidates surviving each filter)."""
    data = [{"type": "funnel", "y": list(stages), "x": list(counts), "textinfo": "value+percent initial"}]
    return Figure(fid, title, data, {"yaxis": {"automargin": True}}, table=table, source=source)


__all__ = ["PALETTE", "bar_with_errors", "funnel", "grouped_bars", "lines", "radar"]
