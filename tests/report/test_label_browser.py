"""The labelling page in headless Chromium: keyboard grading, progress kept over a reload, export, calibrate."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.report.cdp import Browser
from tests.report.test_report_browser import _chromium

from ragrade.judge.label import write_label_page
from ragrade.judge.run import JudgeRunConfig, run_judging

pytestmark = pytest.mark.browser
INJECTED = "<script>document.body.dataset.pwned='1'</script>"


def _wait_ready(b: Browser) -> None:
    """Wait until the page has read its saved progress (after its load event)."""
    deadline = time.monotonic() + 30
    while b.eval("document.body.dataset.ready") != "1":
        assert time.monotonic() < deadline, "the labelling page never became ready"
        time.sleep(0.05)


@pytest.fixture()
def judged(tmp_path: Path) -> Path:
    answers = tmp_path / "answers.jsonl"
    lines = []
    for config in ("bm25", "dense"):
        for i in range(14):
            right = (i % 3) != 0
            answer = f"value {i}" if right else f"wrong {i} {INJECTED}"
            rec = {"id": f"q{i}", "pipeline": config, "query": f"what is {i}?", "answer": answer}
            lines.append(json.dumps({**rec, "reference": f"value {i}", "contexts": [f"passage on {i}"]}))
    answers.write_text("\n".join(lines) + "\n")
    run_judging(answers, tmp_path / "judge", JudgeRunConfig(metrics=["exact"]))
    return tmp_path / "judge"


def _grade_current(b: Browser) -> None:
    fields = b.eval("Array.from(document.querySelectorAll('#item dd')).map(d => d.textContent)")
    b.key("y" if fields[1] == fields[2] else "n")  # answer == reference


def test_label_page_end_to_end(judged: Path, tmp_path: Path) -> None:
    page = tmp_path / "label.html"
    info = write_label_page(judged, page, n=28, seed=1, metrics=["exact"])  # named: computed metrics are opt-in
    assert info["n_tasks"] == 28
    html = page.read_text()
    assert INJECTED not in html and "<script>document" not in html  # escaped in the data block
    b = Browser(_chromium(), tmp_path / "profile")
    try:
        b.open(page.as_uri())
        _wait_ready(b)
        assert b.eval("document.body.dataset.graded") == "0"
        for _ in range(4):
            _grade_current(b)
        assert b.eval("document.body.dataset.graded") == "4"
        time.sleep(1.0)  # let the browser commit localStorage, as any person's pause would
        b.reload()
        _wait_ready(b)
        kept = b.eval("document.body.dataset.graded")
        assert kept == "4", (kept, b.eval("document.readyState"), b.eval("Object.keys(localStorage)"))  # progress kept
        assert b.eval("document.body.dataset.pos") == "4"
        seen_script = False
        for _ in range(30):
            if int(b.eval("document.body.dataset.graded")) == 28:
                break
            if INJECTED in b.eval("document.getElementById('item').textContent"):
                seen_script = True
                assert "&lt;script&gt;" in b.eval("document.getElementById('item').innerHTML")
            _grade_current(b)
        assert b.eval("document.body.dataset.graded") == "28"
        assert seen_script
        assert b.eval("document.body.dataset.pwned") is None  # the injected script stayed inert
        b.key("k")
        b.key("x")  # clear one grade, then give it back
        assert b.eval("document.body.dataset.graded") == "27"
        _grade_current(b)
        downloads = tmp_path / "downloads"
        downloads.mkdir()
        b.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        b.eval("document.getElementById('export').click()")
        target = downloads / "labels.jsonl"
        deadline = time.monotonic() + 20
        while not target.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        b.close()
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(rows) == 28 and all(set(r) == {"id", "metric", "label"} for r in rows)
    assert all(r["metric"] == "exact" and r["label"] in (0, 1) for r in rows)
    out = tmp_path / "cal"
    proc = subprocess.run(
        [sys.executable, "-m", "ragrade", "judge", "calibrate", str(judged), "--human", str(target), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    cal = json.loads((out / "calibration.json").read_text())
    rows_by_config = cal["metrics"]["exact"]["configs"]
    assert sum(r["n_labels"] for r in rows_by_config.values()) == 28
    for row in rows_by_config.values():
        assert row["agreement"]["accuracy"] == 1.0  # graded by the same rule as exact match


def test_trust_section_draws_in_chromium(tmp_path: Path) -> None:
    import re

    from tests.report.test_report_browser import _run
    from tests.report.test_report_trust import _run_dir

    from ragrade.report.render import write_report

    root = _run_dir(tmp_path, calibrated=True)
    report = write_report(root, root / "report.html")
    proc = _run(_chromium(), tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [ln for ln in proc.stderr.splitlines() if "INFO:CONSOLE" in ln] == []
    tags = re.findall(r'<div class="plot[^"]*" id="plot-trust[^"]*"[^>]*>', proc.stdout)
    assert len(tags) == 2 and all('data-rendered="1"' in t for t in tags)  # calibration and claims charts drawn
    assert 'data-pwned="1"' not in proc.stdout and "&lt;script&gt;document.body" in proc.stdout  # inert text
