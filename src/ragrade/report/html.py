"""Building blocks of the self-contained HTML report: figures, tables, sections and the page.

Everything from corpora and model outputs is escaped: the page is rendered by
Jinja2 with autoescaping, figure data travels as JSON inside
``<script type="application/json">`` blocks (with ``</`` escaped), and Plotly
draws it from there. Plotly's JavaScript is inlined, so the file works offline.
Every figure also carries its numbers as a table (the static fallback, shown
when scripts do not run) and names the file its numbers come from.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

_SAFE_ID = re.compile(r"[^a-zA-Z0-9_-]+")


def slug(text: str) -> str:
    """An HTML id made of ``text``'s safe characters."""
    return _SAFE_ID.sub("-", text).strip("-").lower() or "x"


@dataclass
class Table:
    """A table of plain values; every cell is escaped when rendered."""

    columns: list[str]
    rows: list[list[object]]
    caption: str = ""
    source: str = ""

    def to_html(self) -> str:
        """The table as escaped HTML."""
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>" for row in self.rows)
        cap = f"<caption>{html.escape(self.caption)}</caption>" if self.caption else ""
        src = f'<p class="src">from <code>{html.escape(self.source)}</code></p>' if self.source else ""
        return f'<table class="data">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{src}'


def fmt(value: object) -> str:
    """A compact display string for a cell value."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "n/a"
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


@dataclass
class Figure:
    """A Plotly figure (plain dicts) with the table of its numbers and its source file."""

    id: str
    title: str
    data: list[dict[str, Any]]
    layout: dict[str, Any] = field(default_factory=dict)
    table: Table | None = None
    source: str = ""

    def spec_json(self) -> str:
        """The figure as JSON safe to place inside a script element."""
        layout = {"title": {"text": self.title}, "margin": {"t": 48, "l": 60, "r": 20, "b": 60}, **self.layout}
        text = json.dumps({"data": self.data, "layout": layout}, ensure_ascii=True, default=_json_default)
        return text.replace("</", "<\\/").replace("<!--", "<\\!--")

    def to_html(self) -> str:
        """The figure's container, data block and fallback table."""
        fid = slug(self.id)
        table = self.table.to_html() if self.table else ""
        src = f'<p class="src">from <code>{html.escape(self.source)}</code></p>' if self.source else ""
        return (
            f'<figure class="chart"><div class="plot" id="plot-{fid}" data-fig="fig-{fid}"></div>'
            f'<script type="application/json" id="fig-{fid}">{self.spec_json()}</script>'
            f"<figcaption>{html.escape(self.title)}</figcaption>{src}"
            f'<details class="fallback"><summary>numbers</summary>{table}</details></figure>'
        )


def _json_default(obj: object) -> object:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


@dataclass
class Section:
    """One titled part of the report, made of HTML fragments (already escaped)."""

    id: str
    title: str
    parts: list[str] = field(default_factory=list)
    note: str = ""

    def add_text(self, text: str, source: str = "") -> None:
        """Append a paragraph of plain text (escaped), naming the file its numbers come from."""
        src = f' <span class="src">(from <code>{html.escape(source)}</code>)</span>' if source else ""
        self.parts.append(f"<p>{html.escape(text)}{src}</p>")

    def add(self, item: Table | Figure | str) -> None:
        """Append a table, a figure, or a trusted HTML fragment built by this package."""
        self.parts.append(item if isinstance(item, str) else item.to_html())


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """Plotly's minified JavaScript, from the installed plotly package (inlined, no CDN)."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def render_page(title: str, sections: Sequence[Section], meta: Mapping[str, object], *, inline_js: bool = True) -> str:
    """Render the whole page with the package template."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
        undefined=jinja2.StrictUndefined,
    )
    template = env.get_template("report.html.j2")
    return template.render(
        title=title,
        sections=sections,
        meta=meta,
        plotly_js=plotly_js().replace("</script", "<\\/script") if inline_js else "",
        markup=_markup,
    )


def _markup(fragment: str) -> object:
    """Mark a fragment built by this module (already escaped) as safe for the template."""
    import markupsafe

    return markupsafe.Markup(fragment)


__all__ = ["Figure", "Section", "Table", "fmt", "plotly_js", "render_page", "slug"]
