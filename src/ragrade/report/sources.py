"""Reading a run directory's files for the report (nothing here holds results in memory between stages)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ragrade.errors import DataError
from ragrade.io import read_json, read_jsonl

if TYPE_CHECKING:
    from ragrade.report.merge import ExamRun, Merged


#: the command that refreshes each derived file, by a part of its path (what :meth:`RunFiles.stale` names)
REFRESH = {
    "comparisons": "ragrade compare {run} --all",
    "irt_improve": "ragrade irt improve {run}",
    "irt.json": "ragrade irt fit {run}",
}


@dataclass(frozen=True)
class RunFiles:
    """A run directory; every reader returns None when its file is absent.

    Paths are those of a job's run directory (``sweep/summary.csv``, ``irt/irt.json``,
    ``exam/exam.jsonl``, ...). ``aliases`` maps such a relative path, or a folder prefix
    ending in ``/``, to where the file really is, so a bare ``ragrade exam take`` run
    directory renders too (see :meth:`for_dir`).
    """

    root: Path
    aliases: dict[str, Path] = field(default_factory=dict)
    merged: Merged | None = None  # several exam runs of one exam (``--add``): tables recomputed from them

    @classmethod
    def for_dir(cls, root: Path) -> RunFiles:
        """The files of ``root``: a job's run directory, or a sweep's run directory on its own.

        A sweep directory (``responses.parquet`` at its top) is read as the ``sweep/``
        folder; its ``irt.json`` (or ``irt/irt.json``) as the IRT fit; the exam named in
        its manifest (``manifest["exam"]["path"]``) with that exam's funnel sidecar.
        """
        if not (root / "responses.parquet").is_file() or (root / "sweep").is_dir():
            return cls(root)
        aliases: dict[str, Path] = {"sweep/": root}
        if (root / "irt.json").is_file():
            aliases["irt/"] = root
        manifest = read_json(root / "manifest.json") if (root / "manifest.json").is_file() else {}
        exam = (manifest.get("exam") or {}).get("path") if isinstance(manifest, dict) else None
        if isinstance(exam, str) and exam:
            exam_path = Path(exam) if Path(exam).is_absolute() else (root / exam)
            if not exam_path.is_file() and Path(exam).is_file():
                exam_path = Path(exam)
            aliases["exam/exam.jsonl"] = exam_path
            aliases["exam/exam.funnel.json"] = exam_path.with_name(exam_path.stem + ".funnel.json")
            aliases["exam/exam.rejected.jsonl"] = exam_path.with_name(exam_path.stem + ".rejected.jsonl")
        return cls(root, aliases)

    def path(self, rel: str) -> Path:
        """The absolute path of ``rel``."""
        if rel in self.aliases:
            return self.aliases[rel]
        for prefix, target in self.aliases.items():
            if prefix.endswith("/") and rel.startswith(prefix):
                return target / rel[len(prefix) :]
        return self.root / rel

    def _merged(self, rel: str) -> Any:
        return self.merged.tables.get(rel) if self.merged is not None else None

    def has(self, rel: str) -> bool:
        """True when ``rel`` exists (a derived file computed from other responses than the run's is not there:
        see :meth:`stale`)."""
        if self._merged(rel) is not None:
            return True
        return self.path(rel).exists() and self.stale(rel) is None

    def stale(self, rel: str) -> str | None:
        """Why the derived file ``rel`` (comparisons, an IRT fit, an improvement: a JSON file that records the
        responses it was computed from) no longer describes the run's ``sweep/responses.parquet``, with the
        command that refreshes it; None when it does, or when ``rel`` records no source."""
        if self.merged is not None or not rel.endswith(".json"):
            return None
        p = self.path(rel)
        return self._stale(rel, read_json(p)) if p.is_file() else None

    def _stale(self, rel: str, doc: Any) -> str | None:
        """:meth:`stale` of ``rel`` whose content ``doc`` was read already."""
        if self.merged is not None or not isinstance(doc, dict) or "responses" not in doc:
            return None
        from ragrade.provenance import stale_reason

        responses = self.path("sweep/responses.parquet")
        why = stale_reason(doc["responses"], responses)
        if why is None:
            return None
        fix = next((cmd for key, cmd in REFRESH.items() if key in rel), "rerun the stage that wrote it")
        return f"{rel} is out of date: {why}; `{fix.format(run=responses.parent)}` refreshes it"

    def json(self, rel: str) -> Any:
        """A JSON file's content, or None when absent (or stale: see :meth:`stale`)."""
        if (doc := self._merged(rel)) is not None:
            return doc
        p = self.path(rel)
        if not p.is_file():
            return None
        doc = read_json(p)
        return None if rel.endswith(".json") and self._stale(rel, doc) is not None else doc

    def _frame(
        self, rel: str, read: Callable[[Path], pd.DataFrame], kind: str, errors: tuple[type[Exception], ...]
    ) -> pd.DataFrame | None:
        """A table as a DataFrame (the merged runs' when merged), or None when absent; ``read`` reads the file,
        and ``errors`` are what it raises on a corrupt one (a DataError naming the file)."""
        if (frame := self._merged(rel)) is not None:
            return frame.copy()  # type: ignore[no-any-return]
        p = self.path(rel)
        if not p.is_file():
            return None
        try:
            return read(p)
        except errors as exc:
            raise DataError(f"{p}: unreadable {kind} ({type(exc).__name__}: {exc})") from exc

    def csv(self, rel: str) -> pd.DataFrame | None:
        """A CSV file as a DataFrame, or None when absent."""
        return self._frame(
            rel, pd.read_csv, "CSV", (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError)
        )

    def parquet(self, rel: str) -> pd.DataFrame | None:
        """A Parquet file as a DataFrame, or None when absent."""
        return self._frame(rel, pd.read_parquet, "Parquet", (Exception,))  # pyarrow raises several types

    def responses(self, rel: str) -> pd.DataFrame:
        """A responses table, checked (``read_responses``); the merged runs' when merged."""
        if (frame := self._merged(rel)) is not None:
            return frame.copy()  # type: ignore[no-any-return]
        from ragrade.run.summary import read_responses

        return read_responses(self.path(rel))

    def jsonl(self, rel: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """A JSONL file's header meta and records, or None when absent."""
        p = self.path(rel)
        if not p.is_file():
            return None
        header, records = read_jsonl(p)
        return (dict(header.meta) if header else {}), records

    def glob(self, pattern: str) -> list[str]:
        """Relative paths matching ``pattern`` (sorted), folders added from elsewhere included."""
        for prefix, target in self.aliases.items():
            if prefix.endswith("/") and pattern.startswith(prefix):
                found = target.glob(pattern[len(prefix) :])
                return sorted(prefix + p.relative_to(target).as_posix() for p in found)
        out = {p.relative_to(self.root).as_posix() for p in self.root.glob(pattern)}
        parts = pattern.split("/")
        for prefix, target in self.aliases.items():  # e.g. "robust/noise/" matched by "robust/*/metrics.json"
            head = prefix.rstrip("/").split("/")
            if prefix.endswith("/") and len(parts) > len(head) and all(map(fnmatch, head, parts[: len(head)])):
                out.update(prefix + p.relative_to(target).as_posix() for p in target.glob("/".join(parts[len(head) :])))
        return sorted(out)

    def with_extra(self, folders: Sequence[Path], *, top: int = 5) -> RunFiles:
        """These files plus run folders kept elsewhere (see :func:`extra_aliases`); a later folder wins, except
        for a second exam run (an ``exam take`` run or a job's ``sweep/``): exam runs of the same exam are merged
        into one leaderboard (:mod:`ragrade.report.merge`; ``top``: pipelines in the paired verdicts), and runs
        of different exams are refused with a DataError naming the difference."""
        files = self
        runs: list[Path] = []
        for folder in folders:
            new = extra_aliases(folder)
            if "sweep/" in new and files.has(RESPONSES):
                held = files.path(RESPONSES).parent
                if held.resolve() != new["sweep/"].resolve() and all(r.resolve() != folder.resolve() for r in runs):
                    runs.append(folder)
                continue
            files = RunFiles(files.root, {**files.aliases, **new})
        return merge_into(files, runs, top) if runs else files


RESPONSES = "sweep/responses.parquet"
IRT_FILES = ("irt/plan.json", "irt/irt.json")


def _exam_run_at(folder: Path, label: str) -> ExamRun:
    """The exam run of an added folder: an ``exam take`` run or a job's run directory."""
    return _exam_run_of(RunFiles.for_dir(folder), label)


def _exam_run_of(files: RunFiles, label: str) -> ExamRun:
    from ragrade.report.merge import exam_run

    exam = files.path("exam/exam.jsonl")
    manifest = files.json("sweep/manifest.json")
    irt = files.path("irt/irt.json").parent if any(files.has(rel) for rel in IRT_FILES) else None
    return exam_run(label, files.path(RESPONSES), exam if exam.is_file() else None, manifest, irt)


def merge_into(files: RunFiles, folders: Sequence[Path], top: int) -> RunFiles:
    """``files`` with the exam runs of ``folders`` merged into its own (see :mod:`ragrade.report.merge`)."""
    from dataclasses import replace

    from ragrade.report.merge import check_same_exam, merge_runs, run_labels

    labels = run_labels([files.root, *folders])
    runs = [_exam_run_of(files, labels[0])] + [
        _exam_run_at(f, label) for f, label in zip(folders, labels[1:], strict=True)
    ]
    frames = [files.responses(RESPONSES)] + [RunFiles(r.folder).responses("responses.parquet") for r in runs[1:]]
    ids = {r.label: {str(q) for q in f["question_id"]} for r, f in zip(runs, frames, strict=True)}
    for run in runs[1:]:
        check_same_exam(runs[0], run, ids)
    settings: dict[str, Any] = {"top": top}
    held = files.json("sweep/comparisons.json")
    if isinstance(held, dict):
        settings.update({k: held[k] for k in ("correction", "alpha", "n_boot", "seed") if k in held})
    merged = merge_runs(runs, frames, settings)
    aliases = dict(files.aliases)
    irt_run = next((r for r in runs if r.irt is not None), None)
    if irt_run is not None and irt_run.irt is not None and irt_run is not runs[0]:
        aliases["irt/"] = irt_run.irt
    merged = replace(merged, irt_run=irt_run.label if irt_run is not None else None)
    return RunFiles(files.root, aliases, merged)


def extra_aliases(folder: Path, kind: str | None = None) -> dict[str, Path]:
    """Where the report should read ``folder``: an adaptive or full ``exam take`` run, an IRT fit, a robustness
    testbed's output or judged answers (``kind``: ``adaptive`` to insist on an adaptive run)."""
    if not folder.is_dir():
        raise DataError(f"{folder}: no such run folder")
    manifest = read_json(folder / "manifest.json") if (folder / "manifest.json").is_file() else {}
    adaptive = isinstance(manifest, dict) and "adaptive" in manifest
    if kind == "adaptive" or adaptive:
        if not ((folder / "summary.csv").is_file() and adaptive):
            raise DataError(
                f"{folder}: not an adaptive run (an adaptive `exam take` writes summary.csv and a "
                "manifest.json with an adaptive entry)"
            )
        return {"adaptive/": folder}
    if (folder / "responses.parquet").is_file():
        return {"sweep/": folder, **({"irt/": folder} if (folder / "irt.json").is_file() else {})}
    if (folder / RESPONSES).is_file():  # a job's run directory: its exam run, exam and IRT fit
        parts = ("sweep", "exam", "irt")
        return {f"{p}/": folder / p for p in parts if (folder / p).is_dir()}
    if (folder / "irt.json").is_file():
        return {"irt/": folder}
    if (folder / "metrics.json").is_file():
        testbed = (read_json(folder / "metrics.json") or {}).get("testbed")
        if isinstance(testbed, str) and testbed:
            return {f"robust/{testbed}/": folder}
    if (folder / "summary.json").is_file() and (folder / "scores.jsonl").is_file():
        return {"judge/scores/": folder}
    raise DataError(
        f"{folder}: not a run folder the report reads (an `exam take` run, a `ragrade run` directory, an IRT "
        "fit, a `robust run` output or `judge` scores)"
    )


__all__ = ["RunFiles", "extra_aliases", "merge_into"]
