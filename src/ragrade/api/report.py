"""Reading a finished run: the HTML report (``ragrade report``); :func:`open_run` gives its tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragrade.api._common import PathLike

if TYPE_CHECKING:
    pass


def render_report(
    run_dir: PathLike,
    out: PathLike | None = None,
    *,
    top: int = 5,
    title: str | None = None,
    extra: Sequence[PathLike] = (),
    adaptive: PathLike | None = None,
) -> Path:
    """Write the self-contained HTML report of a run directory (``ragrade report``); returns its path.

    ``out`` defaults to ``<run_dir>/report.html``; ``extra``: run folders kept elsewhere (``--add``).
    """
    from ragrade.report.render import write_report

    target = Path(out) if out is not None else Path(run_dir) / "report.html"
    return write_report(
        run_dir,
        target,
        top=top,
        title=title,
        extra=[Path(p) for p in extra],
        adaptive=Path(adaptive) if adaptive is not None else None,
    )
