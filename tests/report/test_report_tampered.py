"""A tampered run folder: markup injected into every string field of every file the report reads stays text."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.report.report_fixtures import make_run
from tests.report.test_report_browser import _chromium, _run

from ragrade.report.render import write_report

# file-format markers the readers check before anything is shown (a tampered one is refused, not rendered)
STRUCTURAL = {"kind", "version", "path", "file", "__ragrade__", "ragrade"}
ATTACKS = (
    "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','1')\">",
    "<script>document.documentElement.setAttribute('data-pwned','1')</script>",
    "<svg onload=\"document.documentElement.setAttribute('data-pwned','1')\"></svg>",
)
MARK = "".join(ATTACKS)


def _taint(value: Any, key: str | None = None) -> Any:
    if key in STRUCTURAL:
        return value
    if isinstance(value, str):
        return value + MARK
    if isinstance(value, list):
        return [_taint(v) for v in value]
    if isinstance(value, dict):
        return {k: _taint(v, k) for k, v in value.items()}
    return value


def _taint_frame(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for col in out.columns:
        if col in STRUCTURAL:
            continue
        if out[col].map(lambda v: isinstance(v, str)).any():
            out[col] = out[col].map(lambda v: v + MARK if isinstance(v, str) else v)
        elif out[col].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any():
            out[col] = out[col].map(lambda v: [_taint(x) for x in list(v)] if v is not None else v)
    return out


def tamper(root: Path) -> int:
    """Inject markup into every string field of every JSON, JSONL, CSV and Parquet file under ``root``."""
    n = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.suffix == ".json":
            path.write_text(json.dumps(_taint(json.loads(path.read_text())), ensure_ascii=False))
        elif path.suffix == ".jsonl":
            lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            path.write_text("\n".join(json.dumps(_taint(r), ensure_ascii=False) for r in lines) + "\n")
        elif path.suffix == ".csv":
            _taint_frame(pd.read_csv(path)).to_csv(path, index=False)
        elif path.suffix == ".parquet":
            table = pq.read_table(path)
            pq.write_table(pa.Table.from_pandas(_taint_frame(table.to_pandas()), preserve_index=False), path)
        else:
            continue
        n += 1
    return n


@pytest.mark.browser
def test_markup_in_every_string_field_never_runs(tmp_path: Path) -> None:
    binary = _chromium()
    root = make_run(tmp_path / "run", n_questions=12)
    assert tamper(root) >= 15
    page = write_report(root, root / "report.html").read_text(encoding="utf-8")
    # outside the JSON data blocks (whose '</' is escaped, checked below) the raw markup appears nowhere
    blocks = re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page, flags=re.S)
    assert blocks and all("</" not in b for b in blocks)
    html_only = re.sub(r'<script type="application/json"[^>]*>.*?</script>', "", page, flags=re.S)
    for attack in ATTACKS:
        assert attack not in html_only
    proc = _run(
        binary, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", (root / "report.html").as_uri()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = re.sub(r'<script type="application/json"[^>]*>.*?</script>', "", proc.stdout, flags=re.S)
    assert 'data-pwned="1"' not in dom  # no injected script, handler or SVG ran ...
    assert re.search(r"<img[^>]*onerror", dom) is None and "<svg onload" not in dom  # ... nor became an element
    assert "&lt;img src=x onerror=" in dom  # the injected text is shown, as text
