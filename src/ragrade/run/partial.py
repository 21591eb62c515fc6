"""The results of an interrupted exam sweep: what finished, on disk as a run's files, marked partial.

A stop request (Ctrl-C or SIGTERM, :mod:`ragrade.interrupt`) ends ``exam take`` with its finished rows in
the journal. Before the command exits, :func:`write_partial` writes the files a finished run has, over
those rows only:

* ``responses.parquet``: every journaled row (a failed request's row included, as missing), the rows a
  complete run holds for those (pipeline, question) pairs, pipeline by pipeline in question order;
* ``summary.csv`` and ``summary_by_tag.csv``: the same summaries over those rows. ``summary.csv`` has a
  ``partial`` column in every sweep (:func:`mark_partial`): True for a pipeline with fewer rows than
  questions, so ``summary[~summary.partial]`` keeps the pipelines that answered the whole exam; a
  pipeline with no row yet has no line;
* ``manifest.json``: ``status`` ``partial: interrupted after N of M rows; rerun the same command to
  finish``, ``finished`` null and a ``partial`` note (``rows``, ``of``, ``stopped``); stopped before its first
  row finished, only the manifest, with ``interrupted: stopped before the first of M rows finished; rerun the
  same command``.

Rerunning the same command resumes from the journal and rewrites every file as a complete run (``partial``
False everywhere, no ``partial`` note). A second signal ends the process at once (:mod:`ragrade.interrupt`):
then these files are not written, and the rerun writes them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ragrade.io import now_iso
from ragrade.run.manifest import MANIFEST_FILE, finish_manifest, write_manifest
from ragrade.run.store import JOURNAL_FILE, Journal
from ragrade.run.summary import (
    RESPONSES_FILE,
    SUMMARY_BY_TAG_FILE,
    SUMMARY_FILE,
    summarise,
    summarise_by_tag,
    write_csv,
    write_responses,
)

log = logging.getLogger("ragrade.run")
PARTIAL_COLUMN = "partial"


def mark_partial(summary: pd.DataFrame, responses: pd.DataFrame, n_items: int) -> pd.DataFrame:
    """``summary`` with the ``partial`` column: True for a pipeline with fewer than ``n_items`` rows."""
    out = summary.copy()
    if out.empty or "pipeline" not in out:
        out[PARTIAL_COLUMN] = pd.Series(dtype=bool)
        return out
    rows = responses.groupby("pipeline").size() if not responses.empty else pd.Series(dtype=int)
    out[PARTIAL_COLUMN] = [int(rows.get(pid, 0)) < n_items for pid in out["pipeline"]]
    return out


def partial_status(rows: int, of: int | None) -> str:
    """The manifest status of a run stopped after ``rows`` of ``of`` rows (``of`` None: an adaptive run, which
    asks a part of the grid); before its first row: ``interrupted: ...``."""
    of_text = f" of {of}" if of is not None else ""
    if rows == 0:
        first = f"the first{of_text} rows" if of is not None else "the first row"
        return f"interrupted: stopped before {first} finished; rerun the same command"
    return f"partial: interrupted after {rows}{of_text} rows; rerun the same command to finish"


def mark_interrupted(run_dir: Path, manifest: dict[str, object], rows: int, of: int | None, **counts: int) -> None:
    """Write ``manifest`` to ``run_dir`` with the status of a run stopped after ``rows`` of ``of`` rows
    (:func:`partial_status`), ``finished`` null and the ``partial`` note (``rows``, ``of``, ``stopped``)."""
    finish_manifest(manifest, status=partial_status(rows, of), n_rows=rows, **counts)
    manifest["finished"] = None
    manifest["partial"] = {"rows": rows, "of": of, "stopped": now_iso()}
    write_manifest(run_dir, manifest)


def write_partial(run_dir: Path, manifest: dict[str, object], order: Sequence[str], items: Sequence[str]) -> None:
    """Write the files of a sweep interrupted in ``run_dir`` over its journaled rows (see the module docstring).

    Nothing is written before the run was accepted (no journal or manifest yet); when no row finished, only
    the manifest (status ``interrupted: stopped before the first of M rows finished``). A failure to write is
    logged, never raised (the interruption is what the command reports).
    """
    journal_path = run_dir / JOURNAL_FILE
    if not journal_path.is_file() or not (run_dir / MANIFEST_FILE).is_file():
        return
    try:
        with Journal(journal_path) as journal:
            rows = [r for pid in order for r in journal.rows(pid, items)]
        total = len(order) * len(items)
        sizes = {"n_pipelines": len(order), "n_questions": len(items)}
        if not rows:
            mark_interrupted(run_dir, manifest, 0, total, **sizes)
            return
        write_responses(run_dir / RESPONSES_FILE, rows)
        df = pd.DataFrame(rows)
        order = list(order)
        write_csv(run_dir / SUMMARY_FILE, mark_partial(summarise(df, order), df, len(items)))
        write_csv(run_dir / SUMMARY_BY_TAG_FILE, summarise_by_tag(df, order))
        mark_interrupted(
            run_dir,
            manifest,
            len(rows),
            total,
            **sizes,
            n_errors=int(df["error"].notna().sum()) if "error" in df else 0,
            n_parse_failures=int(df["parse_failed"].fillna(False).astype(bool).sum()) if "parse_failed" in df else 0,
        )
    except Exception as exc:  # the interruption is what the command reports; the journal keeps the rows
        log.warning("could not write the partial results of %s: %s", run_dir, exc)


__all__ = ["PARTIAL_COLUMN", "mark_interrupted", "mark_partial", "partial_status", "write_partial"]
