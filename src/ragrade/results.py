"""A run directory's results as pandas DataFrames (:func:`open_run`, part of the Python API).

Read with the report's readers (:class:`~ragrade.report.sources.RunFiles`), so the same folders open:
a ``ragrade run``/``demo`` directory, an ``exam take`` run (with an ``irt fit`` inside), or a ``robust
run`` / ``judge`` / IRT output folder on its own. Nothing heavy is imported until a table is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from ragrade.report.sources import RunFiles

PathLike = str | Path


class RunData:
    """A run directory's results as DataFrames; a table whose file is absent is None.

    Opens a ``ragrade run``/``demo`` directory, an ``exam take`` run (with an ``irt fit`` inside), or a
    ``robust run`` / ``judge`` output folder. Files are read on first access, with the report's readers.
    """

    def __init__(self, files: RunFiles) -> None:
        self.files = files
        self.root = files.root

    def __repr__(self) -> str:
        return f"RunData({str(self.root)!r}, tables={self.tables()})"

    def tables(self) -> list[str]:
        """The names of the tables this run has."""
        found = [name for name, rel in _TABLES.items() if self.files.has(rel)]
        return found + (["robust"] if self.files.glob("robust/*/table.csv") else [])

    @property
    def manifest(self) -> dict[str, Any]:
        """``manifest.json`` of the run (or of its sweep), ``{}`` when absent."""
        doc = self.files.json("manifest.json") or self.files.json("sweep/manifest.json")
        return dict(doc) if isinstance(doc, dict) else {}

    @property
    def responses(self) -> pd.DataFrame | None:
        """One row per pipeline x question (``sweep/responses.parquet``)."""
        return self.files.parquet(_TABLES["responses"])

    @property
    def summary(self) -> pd.DataFrame | None:
        """Accuracy with its interval per pipeline (``sweep/summary.csv``)."""
        return self.files.csv(_TABLES["summary"])

    @property
    def summary_by_tag(self) -> pd.DataFrame | None:
        """Accuracy per pipeline and question tag (``sweep/summary_by_tag.csv``)."""
        return self.files.csv(_TABLES["summary_by_tag"])

    @property
    def irt_items(self) -> pd.DataFrame | None:
        """Item parameters (discrimination, difficulty, guessing, ...) of the IRT fit."""
        return self.files.parquet(_TABLES["irt_items"])

    @property
    def irt_abilities(self) -> pd.DataFrame | None:
        """Pipeline abilities (theta and its SE) of the IRT fit."""
        return self.files.csv(_TABLES["irt_abilities"])

    @property
    def irt_effects(self) -> pd.DataFrame | None:
        """Factor effects of a hierarchical IRT fit."""
        return self.files.csv(_TABLES["irt_effects"])

    @property
    def adaptive(self) -> pd.DataFrame | None:
        """An adaptive run's estimates per pipeline (``adaptive/summary.csv``)."""
        return self.files.csv(_TABLES["adaptive"])

    @property
    def judge_scores(self) -> pd.DataFrame | None:
        """One row per answer x metric of the judged answers (``judge/scores/scores.jsonl``)."""
        got = self.files.jsonl(_TABLES["judge_scores"])
        if got is None:
            return None
        import pandas as pd

        return pd.DataFrame(got[1])

    @property
    def answers(self) -> pd.DataFrame | None:
        """Free-text answers, one row per pipeline x question (``answers.jsonl`` of a ``qa answer`` run)."""
        got = self.files.jsonl(_TABLES["answers"]) or self.files.jsonl("judge/answers/answers.jsonl")
        if got is None:
            return None
        import pandas as pd

        return pd.DataFrame(got[1])

    @property
    def judge_summary(self) -> pd.DataFrame | None:
        """Judge statistics per configuration x metric (``judge/scores/summary.csv``)."""
        return self.files.csv(_TABLES["judge_summary"])

    @property
    def robust(self) -> dict[str, pd.DataFrame]:
        """Robustness tables by testbed (``robust/<testbed>/table.csv``: one row per model)."""
        out: dict[str, pd.DataFrame] = {}
        for rel in self.files.glob("robust/*/table.csv"):
            table = self.files.csv(rel)
            if table is not None:
                out[rel.split("/")[1]] = table
        return out


_TABLES = {
    "responses": "sweep/responses.parquet",
    "summary": "sweep/summary.csv",
    "summary_by_tag": "sweep/summary_by_tag.csv",
    "irt_items": "irt/irt_items.parquet",
    "irt_abilities": "irt/irt_pipelines.csv",
    "irt_effects": "irt/irt_effects.csv",
    "adaptive": "adaptive/summary.csv",
    "answers": "answers.jsonl",
    "judge_scores": "judge/scores/scores.jsonl",
    "judge_summary": "judge/scores/summary.csv",
}


# a job's run directory or an `exam take` run (what `ragrade report` reads without aliases)
_JOB_MARKS = ("stages.json", "responses.parquet", "sweep", "exam", "irt", "robust", "judge", "adaptive")


def open_run(run_dir: PathLike, *, extra: Sequence[PathLike] = ()) -> RunData:
    """Open a run directory's results (plus run folders kept elsewhere, as ``ragrade report --add``)."""
    from ragrade.report.render import run_files
    from ragrade.report.sources import RunFiles, extra_aliases

    root = Path(run_dir)
    if not root.is_dir():
        raise DataError(f"{root}: no such run directory")
    folders = [Path(p) for p in extra]
    if (root / "answers.jsonl").is_file() and (root / "judge" / "scores.jsonl").is_file():
        folders.insert(0, root / "judge")  # a `qa answer` run judged into its default RUN/judge
    if any((root / k).exists() for k in _JOB_MARKS):
        files = run_files(root, folders)
    elif (root / "answers.jsonl").is_file():
        files = RunFiles(root).with_extra(folders)
    else:  # a robust run, a judge output or an IRT fit's folder on its own (DataError for anything else)
        files = RunFiles(root, extra_aliases(root)).with_extra(folders)
    return RunData(files)


__all__ = ["RunData", "open_run"]
