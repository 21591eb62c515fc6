"""``ragrade report``: one self-contained HTML file rendered from a run directory's files only.

The report never takes in-memory results: every section reads the files a
stage wrote (paths in :mod:`ragrade.job.layout`), names the file each number
comes from, and says so when a file is absent. Text from corpora and model
outputs is escaped (see :mod:`ragrade.report.html`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrade.errors import DataError
from ragrade.io import atomic_write_text, now_iso
from ragrade.report.html import Section, render_page
from ragrade.report.sections_adaptive import cost_section
from ragrade.report.sections_core import exam_section, leaderboard, topics
from ragrade.report.sections_factors import transforms_section
from ragrade.report.sections_irt import irt_section
from ragrade.report.sections_judge_trust import trust
from ragrade.report.sections_more import judges, robustness, run_info
from ragrade.report.sources import RunFiles, extra_aliases

KNOWN = ("manifest.json", "stages.json", "responses.parquet", "sweep", "exam", "irt", "robust", "judge", "adaptive")


def _sections(files: RunFiles, top: int) -> list[Section]:
    transforms = transforms_section(files)  # only when the run varies a query transform or post-processing
    return [
        leaderboard(files, top),
        cost_section(files),
        irt_section(files),
        *([transforms] if transforms is not None else []),
        topics(files),
        exam_section(files),
        robustness(files),
        judges(files),
        trust(files),
        run_info(files),
    ]


def run_files(root: Path, extra: Sequence[Path] = (), adaptive: Path | None = None, *, top: int = 5) -> RunFiles:
    """The files of ``root`` plus run folders kept elsewhere (``--add``: exam runs of the same exam are merged,
    ``top`` pipelines compared), an adaptive run (``--adaptive``) last."""
    files = RunFiles.for_dir(root).with_extra(extra, top=top)
    if adaptive is not None:
        files = RunFiles(files.root, {**files.aliases, **extra_aliases(adaptive, "adaptive")}, files.merged)
    return files


def render_report(
    run_dir: str | Path,
    *,
    top: int = 5,
    title: str | None = None,
    inline_js: bool = True,
    extra: Sequence[Path] = (),
    adaptive: Path | None = None,
) -> str:
    """The report's HTML for ``run_dir`` and the run folders ``extra`` / ``adaptive`` (DataError when absent)."""
    root = Path(run_dir)
    if not root.is_dir():
        raise DataError(f"{root}: no such run directory")
    if not any((root / k).exists() for k in KNOWN):
        raise DataError(f"{root}: not a ragrade run directory (none of {', '.join(KNOWN)} found)")
    files = run_files(root, extra, adaptive, top=top)
    manifest: dict[str, Any] = files.json("manifest.json") or {}
    sections = _sections(files, top)
    meta = {
        "run directory": str(root.resolve()),
        "rendered": now_iso(),
        "job": manifest.get("name") or manifest.get("kind") or "(no manifest.json)",
        "status": manifest.get("status", "unknown"),
    }
    if files.aliases:  # a sweep directory on its own: say what the job-layout names below stand for
        meta["file names"] = "; ".join(
            f"{rel} = {_shown(target, root)}" for rel, target in sorted(files.aliases.items())
        )
    if files.merged is not None:
        meta["merged runs"] = files.merged.describe()
    return render_page(title or "ragrade report", sections, meta, inline_js=inline_js)


def _shown(target: Path, root: Path) -> str:
    try:
        rel = target.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(target)
    return "this directory" if rel == "." else rel


def write_report(
    run_dir: str | Path,
    out: str | Path,
    *,
    top: int = 5,
    title: str | None = None,
    extra: Sequence[Path] = (),
    adaptive: Path | None = None,
) -> Path:
    """Render and write the report atomically; returns its path."""
    text = render_report(run_dir, top=top, title=title, extra=extra, adaptive=adaptive)
    path = Path(out)
    atomic_write_text(path, text)
    return path


__all__ = ["render_report", "run_files", "write_report"]
