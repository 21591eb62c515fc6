"""The report in headless Chromium: no console messages, sections and charts drawn, injected script inert."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.report.cdp import FLAGS
from tests.report.report_fixtures import make_run

from ragrade.report.render import write_report

pytestmark = pytest.mark.browser
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _chromium() -> str:
    """The Chromium binary; installed with apt when missing and running as root, else the test is skipped."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, capture_output=True, timeout=600, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"], check=False, capture_output=True, timeout=900, env=env
        )
        found = shutil.which("chromium")
        if found:
            return found
    pytest.skip("headless Chromium is not installed (apt-get install chromium, as root) ")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_run(tmp_path_factory.mktemp("browser") / "run")
    return write_report(root, root / "report.html")


def _run(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [binary, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def test_report_in_chromium(report: Path, tmp_path: Path) -> None:
    binary = _chromium()
    proc = _run(binary, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    console = [line for line in proc.stderr.splitlines() if "INFO:CONSOLE" in line]
    assert console == [], console[:5]
    for sid in ("leaderboard", "irt", "topics", "exam", "robustness", "manifest"):
        assert f'<section id="{sid}">' in dom
    tags = re.findall(r'<div class="plot[^"]*" id="plot-[^"]+"[^>]*>', dom)
    assert len(tags) >= 10
    drawn = [t for t in tags if 'data-rendered="1"' in t]
    assert len(drawn) == len(tags), f"{len(drawn)} of {len(tags)} charts drawn"
    assert dom.count('class="main-svg"') >= len(tags)  # Plotly produced SVG for each chart
    assert 'data-pwned="1"' not in dom  # the script inside a question did not run
    assert "&lt;script&gt;document.documentElement" in dom  # ... and shows as text


def test_screenshot_artifact(report: Path, tmp_path: Path) -> None:
    binary = _chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    if shot.exists():
        shot.unlink()
    proc = _run(
        binary,
        tmp_path / "profile",
        "--virtual-time-budget=5000",
        f"--screenshot={shot}",
        "--window-size=1400,5000",
        report.as_uri(),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.is_file() and shot.stat().st_size > 50_000
