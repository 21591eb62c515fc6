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
from pathlib import Path

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
COLOURS = 64


def _small_png(data: bytes) -> bytes:
    """The PNG reduced to a palette (a fraction of the size; text stays sharp)."""
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    out = io.BytesIO()
    image.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    return out.getvalue()


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
                {"width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                page=True,
            )
            browser.open(report.resolve().as_uri())
            browser.eval("document.fonts.ready.then(() => 1)")
            for section, name in (sections or SECTIONS).items():
                box = browser.eval(
                    f"(() => {{ const e = document.getElementById({section!r}); if (!e) return null;"
                    " const r = e.getBoundingClientRect();"
                    " return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; })()"
                )
                if box is None:
                    raise SystemExit(f"{report}: the report has no element '{section}' (a run without that stage?)")
                _, y, _, h = (float(v) for v in box)  # the page's full width: text may overflow a section
                clip = {"x": 0, "y": y, "width": WIDTH, "height": min(h, MAX_HEIGHT), "scale": 1}
                shot = browser.send(
                    "Page.captureScreenshot",
                    {"format": "png", "clip": clip, "captureBeyondViewport": True},
                    page=True,
                )
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
