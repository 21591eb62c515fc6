"""Item response theory on a run's responses (``ragrade irt fit``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.irt.problem import FitConfig
    from ragrade.irt.result import IRTResult


def fit_irt(
    source: PathLike | pd.DataFrame,
    *,
    model: str = "3pl",
    factors: Sequence[str] = (),
    out: PathLike | None = None,
    exam: PathLike | None = None,
    config: FitConfig | None = None,
    **settings: Any,
) -> IRTResult:
    """Fit abilities and item parameters on a run's responses (``ragrade irt fit``).

    ``source``: a run directory, a Parquet/CSV file or a responses DataFrame. ``factors`` switch on the
    hierarchical model; ``settings`` are :class:`~ragrade.irt.problem.FitConfig` fields (``se``,
    ``solver``, ``max_iter``, ``not_applicable``, ...). Writes ``out`` (default ``<run>/irt.json`` for a
    folder or file; nothing for a DataFrame) and ``<stem>_items.parquet``, ``<stem>_pipelines.csv``,
    ``<stem>_effects.csv``, ``<stem>_information.csv`` next to it.
    """
    import dataclasses

    from ragrade.irt.fit import fit_irt as _fit
    from ragrade.irt.problem import FitConfig

    if config is None:
        cfg = FitConfig(model=model, factors=tuple(factors), **settings)
    else:
        cfg = dataclasses.replace(config, **settings)
    if out is None and isinstance(source, (str, Path)):
        out = (Path(source) if Path(source).is_dir() else Path(source).parent) / "irt.json"
    return _fit(source, config=cfg, out=out, exam=exam)
