"""The report renders from a run directory's files: sections, sources, escaping, absent files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from tests.report.report_fixtures import INJECTED, make_run

from ragrade.cli.main import main
from ragrade.report.html import Figure, Table
from ragrade.report.render import render_report
from ragrade.report.sections_irt import effect_agreement


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("report") / "run")


@pytest.fixture(scope="module")
def page(run_dir: Path) -> str:
    return render_report(run_dir, inline_js=False)


def test_sections_and_sources_present(page: str) -> None:
    for sid in ("leaderboard", "irt", "topics", "exam", "robustness", "judges", "manifest"):
        assert f'<section id="{sid}">' in page
    for src in (
        "sweep/summary.csv",
        "sweep/comparisons.json",
        "irt/irt.json",
        "irt/improve/irt_improve.json",
        "sweep/summary_by_tag.csv",
        "exam/exam.funnel.json",
        "robust/noise/metrics.json",
        "manifest.json",
    ):
        assert f"<code>{src}" in page, src
    for fig in (
        "leaderboard",
        "effects-main",
        "icc",
        "info-bloom",
        "info-qword",
        "improve",
        "topic-bars",
        "topic-radar",
        "exam-funnel",
        "noise-noise",
    ):
        assert f'id="plot-{fig}"' in page, fig


def test_one_irt_fit_with_chunker_not_applicable(run_dir: Path, page: str) -> None:
    """Closed book and oracle have no chunker: one fit over (retriever, chunker, icl) on every pipeline."""
    plan = json.loads((run_dir / "irt" / "plan.json").read_text())
    assert plan["version"] == 2 and [f["name"] for f in plan["fits"]] == ["main"]
    assert plan["fits"][0]["factors"] == ["retriever", "chunker", "icl"]
    assert plan["fits"][0]["not_applicable"] == {"chunker": 4}
    assert not (run_dir / "irt" / "by_chunker").exists()
    doc = json.loads((run_dir / "irt" / "irt.json").read_text())
    assert set(doc["effects"]["chunker"]) == {"rec", "sent"}  # no 'none' level
    assert set(doc["effects"]["retriever"]) == {"bm25", "closed", "dense", "oracle"}
    assert doc["not_applicable"]["chunker"]["n_pipelines"] == 4
    assert "plot-effects-by_chunker" not in page and "irt/by_chunker/irt.json" not in page
    # the chunker effect is in the main chart (no 'none' bar), with the note on where it does not apply
    found = re.search(r'<script type="application/json" id="fig-effects-main">(.*?)</script>', page)
    assert found is not None
    fig = json.loads(found.group(1))
    labels = fig["data"][0]["y"]
    assert "chunker=sent" in labels and "chunker=rec" in labels and "chunker=none" not in labels
    assert "chunker does not apply to 4 of 12 pipelines (chunker = none)" in page


def test_legacy_two_fit_plan_still_renders(tmp_path: Path) -> None:
    """Runs made before plan version 2 have a main fit without the chunker and irt/by_chunker/irt.json."""
    run = make_run(tmp_path / "run", with_robust=False, legacy_irt=True, n_questions=24)
    text = render_report(run, inline_js=False)
    for fig in ("effects-main", "effects-by_chunker", "icc", "improve"):
        assert f'id="plot-{fig}"' in text, fig
    assert "<code>irt/by_chunker/irt.json" in text
    assert "by_chunker: pipelines where chunker applies (not none)" in text
    main_doc = json.loads((run / "irt" / "irt.json").read_text())
    assert set(main_doc["effects"]) == {"retriever", "icl"}
    # the sign check of the by_chunker fit uses the indexed pipelines only
    assert text.count("Sign check:") == 2


def test_injected_text_is_escaped(page: str) -> None:
    assert INJECTED not in page
    assert "&lt;script&gt;document.documentElement" in page
    # JSON figure data cannot close its script element either
    for block in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page, flags=re.S):
        assert "</" not in block
        json.loads(block)


def test_absent_files_are_named(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", with_irt=False, with_robust=False)
    text = render_report(run, inline_js=False)
    assert "not in this run: irt/irt.json" in text
    assert "not in this run: judge/scores/summary.json" in text
    assert "not in this run: robust/&lt;testbed&gt;/metrics.json" in text


def test_effect_agreement_reference() -> None:
    summary = pd.DataFrame(
        {"pipeline": ["p1", "p2", "p3"], "retriever": ["a", "b", "c"], "n": [10, 10, 10], "n_correct": [9, 5, 5]}
    )
    effects = {"retriever": {"a": {"estimate": 1.0}, "b": {"estimate": -0.5}, "c": {"estimate": -0.4}}}
    rows = {(r["a"], r["b"]): r for r in effect_agreement(effects, summary)}
    assert rows[("a", "b")]["agree"] is True and rows[("a", "b")]["accuracy_diff"] == pytest.approx(0.4)
    assert rows[("b", "c")]["agree"] is None  # equal accuracy: a tie
    effects["retriever"]["b"]["estimate"] = 2.0
    assert {(r["a"], r["b"]): r for r in effect_agreement(effects, summary)}[("a", "b")]["agree"] is False


def test_table_and_figure_escape() -> None:
    t = Table(["<x>"], [["<img src=x onerror=alert(1)>"]], source="a<b")
    assert "<img" not in t.to_html() and "&lt;img" in t.to_html()
    f = Figure("f", "</script><script>alert(1)</script>", [{"x": ["</script>"]}])
    assert "</script><script>" not in f.to_html()


def test_report_cli(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    assert out.stat().st_size > 1_000_000  # plotly inlined: no CDN
    assert "cdn" not in out.read_text(encoding="utf-8")[:2000].lower()
    assert main(["report", str(tmp_path / "missing")]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("ragrade: error:") == 2 and "Traceback" not in err


def test_sweep_directory_on_its_own_renders(run_dir: Path, tmp_path: Path) -> None:
    """A bare `ragrade exam take` run directory: its files stand for sweep/, irt/ and the manifest's exam."""
    import shutil

    from ragrade.io import write_json

    sweep = tmp_path / "sweep-only"
    shutil.copytree(run_dir / "sweep", sweep)
    shutil.copy(run_dir / "irt" / "irt.json", sweep / "irt.json")
    write_json(
        sweep / "manifest.json",
        {"version": 1, "kind": "exam-sweep", "exam": {"path": str(run_dir / "exam" / "exam.jsonl")}},
    )
    html_text = render_report(sweep, inline_js=False)
    assert "not in this run: sweep/summary.csv" not in html_text
    assert "not in this run: irt/irt.json" not in html_text
    assert "not in this run: exam/exam.jsonl" not in html_text
    assert "sweep/ = this directory" in html_text and "irt/ = this directory" in html_text
    assert "not in this run: irt/improve/irt_improve.json" in html_text  # what is really absent is still named


def test_identical_twins_are_named_under_the_verdicts(run_dir: Path, tmp_path: Path) -> None:
    import shutil

    from ragrade.io import read_json, write_json

    copy = tmp_path / "twins"
    shutil.copytree(run_dir, copy)
    comps = read_json(copy / "sweep" / "comparisons.json")
    comps["identical"] = {"llm=x|retriever=bm25|k=3|icl=1|chunker=rec": "llm=x|retriever=bm25|k=3|icl=0|chunker=rec"}
    write_json(copy / "sweep" / "comparisons.json", comps)
    text = render_report(copy, inline_js=False)
    assert "answered every question exactly like" in text and "icl=1" in text
