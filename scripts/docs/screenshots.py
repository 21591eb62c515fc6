"""Screenshots of a real report for the documentation, taken by headless Chromium (``make screenshots``).

Usage: ``python -m scripts.docs.screenshots REPORT.html OUT_DIR``. Each picture is one section or plot of the report
(an element id), cut at :data:`MAX_HEIGHT` pixels and reduced to a 64-colour palette so the
committed PNGs stay small. Chromium is driven over the DevTools protocol as the report's browser tests drive it
(``tests/report/cdp.py``).
"""

from __future__ import annotations

import base64
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: element id in the report (a section or one plot) -> picture file name
SECTIONS = {
    "leaderboard": "report-leaderboard.png",
    "irt": "report-irt.png",
    "plot-icc": "report-item-curves.png",
    "plot-info-bloom": "report-information.png",
    "robustness": "report-robustness.png",
    "judges": "report-judges.png",
}
WIDTH = 1100
MAX_HEIGHT = 760
VIEW_HEIGHT = 900
UNSTICK = "<style>nav{position:static!important}</style>"
COLOURS = 64


def _small_png(data: bytes) -> bytes:
    """The PNG reduced to a palette (a fraction of the size; text stays sharp)."""
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    return out.getvalue()


def _wait_for_layout(browser: Any, timeout: float = 30.0) -> None:
    """Wait until every chart is drawn and the page's height has stopped changing (charts draw after load and
    move what follows them)."""
    deadline = time.monotonic() + timeout
    drawn = "document.querySelectorAll('.plot').length === document.querySelectorAll('.plot .main-svg').length"
    while browser.eval(drawn) is not True and time.monotonic() < deadline:
        time.sleep(0.2)
    height, steady = -1, 0
    while steady < 5 and time.monotonic() < deadline:
        now = browser.eval("document.body.scrollHeight")
        steady = steady + 1 if now == height else 0
        height = now
        time.sleep(0.2)


def take(report: Path, out_dir: Path, sections: dict[str, str] | None = None) -> list[Path]:
    """One picture per entry of ``sections`` (default :data:`SECTIONS`) of ``report``, written under ``out_dir``."""
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from cdp import Browser  # the report tests' client; tests/ is not a package

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        raise SystemExit("chromium is missing: `make chromium` installs it")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as profile:
        browser = Browser(binary, Path(profile))
        try:
            browser.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": VIEW_HEIGHT, "deviceScaleFactor": 1, "mobile": False},
                page=True,
            )
            browser.open(report.resolve().as_uri())
            # the report's section menu sticks to the top of the window: in a picture it would cover the section
            browser.eval(f"document.head.insertAdjacentHTML('beforeend', {UNSTICK!r})")
            _wait_for_layout(browser)
            for section, name in (sections or SECTIONS).items():
                box = browser.eval(
                    f"(() => {{ const e = document.getElementById({section!r}); if (!e) return null;"
                    " e.scrollIntoView({block: 'start'}); const r = e.getBoundingClientRect();"
                    " return [window.scrollY + r.top, r.height, r.top]; })()"
                )
                if box is None:
                    raise SystemExit(f"{report}: the report has no element '{section}' (a run without that stage?)")
                time.sleep(0.3)
                y, h, top = (float(v) for v in box)
                # the element's top is in view: a clip inside the viewport, which does not resize the page
                clip = {"x": 0, "y": y, "width": WIDTH, "height": min(h, MAX_HEIGHT, VIEW_HEIGHT - top), "scale": 1}
                shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip}, page=True)
                path = out_dir / name
                path.write_bytes(_small_png(base64.b64decode(shot["data"])))
                written.append(path)
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    """Take the pictures; print each file and its size."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m scripts.docs.screenshots REPORT.html OUT_DIR", file=sys.stderr)
        return 2
    for path in take(Path(args[0]), Path(args[1])):
        print(f"{path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
