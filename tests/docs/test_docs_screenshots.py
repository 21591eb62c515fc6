"""The documentation's pictures are taken by headless Chromium from a real report (``make screenshots``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from scripts.docs.screenshots import SECTIONS, take
from tests.report.report_fixtures import make_run

from ragrade.report.render import write_report

pytestmark = pytest.mark.browser


def test_screenshots_of_report_sections(tmp_path: Path) -> None:
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        pytest.skip("headless Chromium is not installed (make chromium)")
    root = make_run(tmp_path / "run")
    report = write_report(root, root / "report.html")
    wanted = {"leaderboard": "leaderboard.png", "plot-icc": "curves.png"}
    written = take(report, tmp_path / "img", wanted)
    assert [p.name for p in written] == ["leaderboard.png", "curves.png"]
    for path in written:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert 2_000 < len(data) < 150_000  # a picture of something, reduced to a palette
    with pytest.raises(SystemExit, match="no element 'nowhere'"):
        take(report, tmp_path / "img", {"nowhere": "x.png"})


def test_every_picture_the_script_takes_is_in_the_docs() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "img"
    assert sorted(SECTIONS.values()) == sorted(p.name for p in docs.glob("*.png"))
