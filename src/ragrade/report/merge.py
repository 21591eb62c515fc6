"""Several exam runs of the same exam in one report (``ragrade report RUN --add OTHER``).

Each run is an ``exam take`` folder or a job's ``sweep/``. Runs merge only when they took the same exam:
the exam files' fingerprints (sha256 recorded in each sweep manifest, or hashed here) and the question ids
every run answered must agree; otherwise the report is refused with one line naming the difference.

The merged responses give one leaderboard, one set of paired verdicts and the tag table, recomputed
here with the sweep's own functions (nothing is written). A pipeline id found in several runs is shown
once when its specification (the components the sweep manifest records for it, paths left out, and
the answer settings) is the same in every run, with the answers of the run given first (said in a note);
otherwise it is shown once per run, its id followed by ``|run=<run>``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.errors import DataError
from ragrade.io import read_json

if TYPE_CHECKING:
    import pandas as pd

SUMMARY = "sweep/summary.csv"
BY_TAG = "sweep/summary_by_tag.csv"
COMPARISONS = "sweep/comparisons.json"
RESPONSES = "sweep/responses.parquet"
RUN_KEY = "run"  # the pipeline-id part that tells apart a pipeline found in several runs
SHOWN_IDS = 3


@dataclass(frozen=True)
class ExamRun:
    """One exam run: the folder holding its responses, its exam file and the sweep manifest."""

    label: str
    folder: Path  # where responses.parquet is
    exam: Path | None
    manifest: dict[str, Any]
    irt: Path | None  # the folder of its IRT fit (irt.json), when it has one

    def sha256(self) -> str | None:
        """The exam file's sha256 (recorded in the manifest, else hashed from the file), or None."""
        recorded = (self.manifest.get("exam") or {}).get("sha256")
        if isinstance(recorded, str) and recorded:
            return recorded
        if self.exam is not None and self.exam.is_file():
            return hashlib.sha256(self.exam.read_bytes()).hexdigest()
        return None


@dataclass(frozen=True, eq=False)
class Merged:
    """The merged exam runs: tables recomputed from their responses, and what the report must say about them."""

    runs: tuple[ExamRun, ...]
    tables: dict[str, Any]  # job-layout path (SUMMARY, BY_TAG, COMPARISONS, RESPONSES) -> DataFrame / JSON
    notes: tuple[str, ...]
    pipelines: dict[str, int] = field(default_factory=dict)  # run label -> pipelines shown from it
    irt_run: str | None = None  # the run whose IRT fit the report shows
    origin: dict[str, tuple[str, ...]] = field(default_factory=dict)  # shown pipeline -> runs that hold it

    def in_run(self, pid: str, label: str | None) -> bool:
        """True when the shown pipeline ``pid`` is (with the same specification) in the run ``label``."""
        return label in self.origin.get(pid, ())

    def describe(self) -> str:
        """One line for the report's header: which runs, and what was recomputed."""
        runs = "; ".join(f"{r.label} = {r.folder} ({self.pipelines.get(r.label, 0)} pipelines)" for r in self.runs)
        return (
            f"{len(self.runs)} runs of the same exam: {runs}. {SUMMARY}, {BY_TAG} and {COMPARISONS} are "
            "recomputed from their responses together"
        )

    def irt_note(self, fit_pipelines: object) -> str:
        """Which run the IRT fit describes (it never covers the pipelines of the other runs)."""
        others = [r for r in self.runs if r.label != self.irt_run]
        n_other = sum(not self.in_run(pid, self.irt_run) for pid in self.origin)
        own = [r.label for r in others if r.irt is not None]
        return (
            f"This fit describes the run {self.irt_run} only ({fit_pipelines} pipelines); the {n_other} pipelines "
            f"of the leaderboard found only in {', '.join(r.label for r in others)} are not in it (the leaderboard "
            "and the verdicts cover every run; fit IRT on one run that holds every pipeline to compare them on "
            "this scale)." + (f" The IRT fit of {', '.join(own)} is not shown." if own else "")
        )


def exam_run(
    label: str, responses: Path, exam: Path | None, manifest: Mapping[str, Any] | None, irt: Path | None
) -> ExamRun:
    """An :class:`ExamRun` (``responses``: the run's responses.parquet)."""
    return ExamRun(label, responses.parent, exam, dict(manifest or {}), irt)


def run_labels(folders: Sequence[Path]) -> list[str]:
    """Short distinct names for run folders: their names, with the parent's when two share a name."""
    resolved = [f.resolve() for f in folders]
    names = [f.name or str(f) for f in resolved]
    if len(set(names)) < len(names):
        names = [f"{f.parent.name}/{f.name}" for f in resolved]
    if len(set(names)) < len(names):
        names = [f"run {i + 1}" for i in range(len(resolved))]
    return names


def check_same_exam(first: ExamRun, other: ExamRun, ids: Mapping[str, set[str]]) -> None:
    """DataError naming the difference when ``other`` did not take ``first``'s exam (``ids``: label -> ids)."""
    where = f"{other.folder}: cannot merge with {first.folder}"
    a, b = first.sha256(), other.sha256()
    qa, qb = _exam_ids(first.exam), _exam_ids(other.exam)
    if a and b and a != b:
        files = f"{_name(first.exam)} (sha256 {a[:12]}) and {_name(other.exam)} (sha256 {b[:12]})"
        if qa is not None and qb is not None and qa != qb:
            raise DataError(f"{where}: the runs took different exams, {files}: {_id_difference(qa, qb, first, other)}")
        raise DataError(f"{where}: the runs took different exam files, {files}, with the same question ids")
    if qa is not None and qb is not None and qa != qb:
        raise DataError(f"{where}: the runs' exams differ: {_id_difference(qa, qb, first, other)}")
    got_a, got_b = ids[first.label], ids[other.label]
    if got_a != got_b:
        raise DataError(
            f"{where}: the runs asked different questions of the exam ({_id_difference(got_a, got_b, first, other)}; "
            "a different $limit or ICL pool?)"
        )


def _name(path: Path | None) -> str:
    return str(path) if path is not None else "(exam file not found)"


def _exam_ids(path: Path | None) -> set[str] | None:
    if path is None or not path.is_file():
        return None
    from ragrade.io import read_jsonl

    return {str(r.get("id")) for r in read_jsonl(path)[1]}


def _id_difference(a: set[str], b: set[str], first: ExamRun, other: ExamRun) -> str:
    def some(ids: set[str]) -> str:
        shown = ", ".join(sorted(ids)[:SHOWN_IDS])
        return shown + (", ..." if len(ids) > SHOWN_IDS else "")

    parts = [f"{len(a & b)} question ids in common"]
    if a - b:
        parts.append(f"{len(a - b)} only in {first.label} ({some(a - b)})")
    if b - a:
        parts.append(f"{len(b - a)} only in {other.label} ({some(b - a)})")
    return ", ".join(parts)


def pipeline_spec(pid: str, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a pipeline is beyond its id: the components the sweep manifest records for it (index paths
    replaced by the index's own description) and the answer settings; None when the manifest has none."""
    components = manifest.get("components")
    if not isinstance(components, dict) or not components:
        return None
    parts = dict(p.partition("=")[::2] for p in pid.split("|"))
    labels = manifest.get("llm_labels") or {}
    llm = str(labels.get(parts.get("llm", ""), parts.get("llm", "")))
    chunker, retriever = parts.get("chunker", ""), parts.get("retriever", "")
    wanted = {
        f"llm:{llm}",
        f"prompt:{parts.get('prompt', 'default')}",
        f"retriever:{chunker}:{retriever}",
        f"transforms:{chunker}:{retriever}:query={parts.get('query', 'none')}:post={parts.get('post', 'none')}",
    }
    if retriever.startswith("external:"):
        wanted.add(retriever)
    spec: dict[str, Any] = {key: _without_paths(value) for key, value in components.items() if key in wanted}
    config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
    spec["answer"] = (config or {}).get("answer")
    return spec


def _without_paths(value: Any) -> Any:
    """``value`` with each ``index`` path replaced by that index's manifest (counts, chunker, embedder)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out[key] = _index_identity(item) if key == "index" and isinstance(item, str) else _without_paths(item)
        return out
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    return value


def _index_identity(path: str) -> Any:
    manifest = Path(path) / "manifest.json"
    if not manifest.is_file():
        return "(an index)"
    doc = read_json(manifest)
    if not isinstance(doc, dict):
        return "(an index)"
    embedder = doc.get("embedder") if isinstance(doc.get("embedder"), dict) else {}
    return {"counts": doc.get("counts"), "chunker": doc.get("chunker"), "embedder": (embedder or {}).get("cache_key")}


def merge_runs(runs: Sequence[ExamRun], frames: Sequence[pd.DataFrame], settings: Mapping[str, Any]) -> Merged:
    """Merge the responses ``frames`` of ``runs`` (the same exam, checked by :func:`check_same_exam`).

    ``settings``: the paired comparisons' ``top``, ``correction``, ``alpha``, ``n_boot`` and ``seed``.
    """
    import pandas as pd

    from ragrade.run.partial import mark_partial
    from ragrade.run.summary import summarise, summarise_by_tag

    kept: list[pd.DataFrame] = []
    origin: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    shown: dict[str, int] = {r.label: 0 for r in runs}
    twice = _shared_pipelines(frames)
    for i, (run, frame) in enumerate(zip(runs, frames, strict=True)):
        part = frame.copy()
        part[RUN_KEY] = run.label
        for pid in list(dict.fromkeys(str(p) for p in part["pipeline"])):
            holders = twice.get(pid)
            if holders is None:
                shown[run.label] += 1
                origin[pid] = (run.label,)
                continue
            if _same_spec(pid, [runs[j] for j in holders]):
                if i != holders[0]:
                    part = part[part["pipeline"] != pid]
                    continue
                shown[run.label] += 1
                origin[pid] = tuple(runs[j].label for j in holders)
                notes.append(_same_note(pid, [runs[j] for j in holders], [frames[j] for j in holders]))
            else:
                part.loc[part["pipeline"] == pid, "pipeline"] = f"{pid}|{RUN_KEY}={run.label}"
                shown[run.label] += 1
                origin[f"{pid}|{RUN_KEY}={run.label}"] = (run.label,)
                if i == holders[0]:
                    notes.append(_different_note(pid, [runs[j] for j in holders]))
        kept.append(part)
    df = pd.concat(kept, ignore_index=True)
    order = list(dict.fromkeys(str(p) for p in df["pipeline"]))
    n_items = int(df["question_id"].nunique())
    summary = mark_partial(summarise(df, order), df, n_items)
    source = df.drop_duplicates("pipeline").set_index("pipeline")[RUN_KEY]
    summary[RUN_KEY] = [str(source[p]) for p in summary["pipeline"]]
    tables: dict[str, Any] = {
        SUMMARY: summary,
        BY_TAG: summarise_by_tag(df, order),
        COMPARISONS: merged_verdicts(df, settings),
        RESPONSES: df,
    }
    return Merged(tuple(runs), tables, tuple(notes), shown, origin=origin)


def _shared_pipelines(frames: Sequence[pd.DataFrame]) -> dict[str, list[int]]:
    """Pipeline ids found in more than one run -> the indices of the runs holding them."""
    where: dict[str, list[int]] = {}
    for i, frame in enumerate(frames):
        for pid in dict.fromkeys(str(p) for p in frame["pipeline"]):
            where.setdefault(pid, []).append(i)
    return {pid: runs for pid, runs in where.items() if len(runs) > 1}


def _same_spec(pid: str, runs: Sequence[ExamRun]) -> bool:
    specs = [pipeline_spec(pid, r.manifest) for r in runs]
    return all(s is not None for s in specs) and all(s == specs[0] for s in specs[1:])


def _same_note(pid: str, runs: Sequence[ExamRun], frames: Sequence[pd.DataFrame]) -> str:
    column = "chosen" if all("chosen" in f for f in frames) else "correct"
    answers = [f[f["pipeline"] == pid].set_index("question_id")[column] for f in frames]
    alike = sum(int(answers[0].get(q) == answers[1].get(q)) for q in answers[0].index)
    return (
        f"{pid} is in {' and '.join(r.label for r in runs)} with the same specification: it is shown once, with "
        f"the answers of {runs[0].label} (the run given first); {runs[1].label}'s answers agree on {alike} of "
        f"{len(answers[0])} questions."
    )


def _different_note(pid: str, runs: Sequence[ExamRun]) -> str:
    specs = [pipeline_spec(pid, r.manifest) for r in runs]
    if any(s is None for s in specs):
        missing = [r.label for r, s in zip(runs, specs, strict=True) if s is None]
        why = f"the manifest of {', '.join(missing)} does not record its components, so they cannot be matched"
    else:
        keys = sorted(
            {k for s in specs if s for k in s if any((t or {}).get(k) != (specs[0] or {}).get(k) for t in specs)}
        )
        why = "their specifications differ in " + ", ".join(keys)
    return f"{pid} is in {' and '.join(r.label for r in runs)}: {why}; it is shown once per run (|{RUN_KEY}=...)."


def merged_verdicts(df: pd.DataFrame, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The paired comparisons of the merged runs' top distinct pipelines (as ``comparisons.json``)."""
    from ragrade.run.compare import verdicts

    return dict(
        verdicts(
            df,
            top=int(settings.get("top", 5)),
            correction=str(settings.get("correction", "holm")),
            alpha=float(settings.get("alpha", 0.05)),
            n_boot=int(settings.get("n_boot", 2000)),
            seed=int(settings.get("seed", 0)),
        )
    )


__all__ = ["ExamRun", "Merged", "check_same_exam", "exam_run", "merge_runs", "pipeline_spec", "run_labels"]
