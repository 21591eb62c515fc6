"""Run the stages of a job in order, reusing what an earlier run of the same directory produced.

Reuse: every stage has a hash of the config it depends on and of the hashes of
the stages it reads. A stage whose hash equals the one recorded in
``stages.json`` (status ``done``) and whose outputs exist is skipped. Resume:
``stages.json`` is rewritten after each stage, so a killed job restarts at the
first unfinished stage; the sweep, the robustness runs and the judged answers
keep their own journals and continue where they stopped. ``timings.json`` holds
the wall time of every stage of the last invocation (``benchmarks/bench_demo.py``
reads it); ``manifest.json`` describes the whole job.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

from ragrade import interrupt
from ragrade.errors import DataError
from ragrade.io import now_iso, read_json, write_json
from ragrade.job import analysis as an
from ragrade.job import stages as st
from ragrade.job.config import JobConfig, config_paths
from ragrade.job.layout import MANIFEST_FILE, STAGES_FILE, TIMINGS_FILE, RunLayout
from ragrade.job.progress import Display, make_display
from ragrade.run.spec import fingerprint

STAGES_VERSION = 1


class StageRecord(TypedDict, total=False):
    """One stage's entry in ``stages.json``."""

    hash: str
    status: str  # running, done, failed or interrupted
    started: str
    finished: str
    seconds: float
    summary: st.StageSummary
    error: str


class StageOutcome(TypedDict):
    """What one stage came to in this invocation: ``ran`` or ``reused``, with its summary."""

    status: str
    summary: st.StageSummary


class StageTiming(TypedDict, total=False):
    """One stage's entry in ``timings.json``."""

    seconds: float
    reused: bool
    original_seconds: float | None  # a reused stage: what it took when it ran


class JobTimings(TypedDict, total=False):
    """``timings.json``: the wall time of every stage of the last invocation."""

    version: int
    kind: str
    created: str
    cpus: int | None
    total_seconds: float
    stages: dict[str, StageTiming]
    failed: str | None


class PlanStep(TypedDict):
    """One stage of :func:`describe_plan`."""

    stage: str
    needs: list[str]
    outputs: list[str]
    action: str  # run or reuse


#: bumped when a stage's code changes what it writes, so finished runs redo that stage (and what follows)
STAGE_CODE_VERSIONS: dict[str, int] = {"irt": 2}  # 2: one fit with not-applicable factor levels
MAX_FINGERPRINT_FILES = 100_000


@dataclass
class JobResult:
    """What a job did: per stage ``ran`` / ``reused`` and its summary, the timings and the report path."""

    run_dir: Path
    stages: dict[str, StageOutcome] = field(default_factory=dict)
    timings: JobTimings = field(default_factory=lambda: JobTimings())
    report: Path | None = None


def _files_fingerprint(paths: list[str]) -> list[list[str | int | None]]:
    """Size and modification time of every input file (a changed corpus invalidates the corpus stage)."""
    out: list[list[str | int | None]] = []
    for raw in paths:
        root = Path(raw)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
        for p in files[:MAX_FINGERPRINT_FILES]:
            stat = p.stat()
            out.append([str(p), stat.st_size, stat.st_mtime_ns])
        if not files:
            out.append([str(root), None, None])
    return out


def build_stages(cfg: JobConfig, layout: RunLayout) -> list[st.Stage]:
    """The job's stages in order (disabled stages left out)."""
    labels = [c.label for c in cfg.chunkers]
    corpus_key: dict[str, object] = {"corpus": cfg.corpus.stage_key()}
    if not cfg.corpus.demo:
        corpus_key["files"] = _files_fingerprint(cfg.corpus.paths)
    stages = [st.Stage("corpus", corpus_key, [], [layout.docs], st.run_corpus)]
    for label in labels:
        stages.append(
            st.Stage(
                f"chunk:{label}",
                {"chunker": cfg.chunker(label).model_dump()},
                ["corpus"],
                [layout.chunks(label)],
                _bind(st.run_chunk, label),
            )
        )
        stages.append(
            st.Stage(
                f"index:{label}",
                {
                    "index": cfg.index.model_dump(exclude_defaults=True) | {"embedder": cfg.index.embedder},
                    "dense": st.needs_dense(cfg),
                },
                [f"chunk:{label}"],
                [layout.index(label) / "manifest.json"],
                _bind(st.run_index, label),
            )
        )
    exam_label = cfg.chunker(cfg.exam.chunker).label
    if cfg.exam.enabled or cfg.exam.path:
        key: dict[str, object] = {"exam": cfg.exam.stage_key(), "llm": cfg.llm.stage_key()}
        if cfg.exam.path:
            key["file"] = _files_fingerprint([cfg.exam.path])
        stages.append(
            st.Stage("exam", key, [] if cfg.exam.path else [f"chunk:{exam_label}"], [layout.exam], st.run_exam)
        )
    has_exam = any(s.name == "exam" for s in stages)
    if cfg.sweep.enabled and has_exam:
        chunkers = cfg.sweep.chunkers or labels
        stages.append(
            st.Stage(
                "sweep",
                {"sweep": cfg.sweep.stage_key(), "llm": cfg.llm.stage_key()},
                ["exam", *(f"index:{c}" for c in chunkers)],
                [layout.sweep / "responses.parquet", layout.sweep / "comparisons.json"],
                st.run_sweep_stage,
                resumable=True,
            )
        )
        if cfg.irt.enabled:
            stages.append(
                st.Stage("irt", {"irt": cfg.irt.stage_key()}, ["sweep"], [layout.irt / "irt.json"], an.run_irt_stage)
            )
    if cfg.adaptive.enabled and has_exam:
        from ragrade.job.adaptive_stage import adaptive_stage

        stages.append(adaptive_stage(cfg, layout))
    stages.extend(_robust_stages(cfg, layout, has_exam))
    if cfg.judge.enabled:
        stages.append(
            st.Stage(
                "judge",
                {"judge": cfg.judge.stage_key(), "llm": cfg.llm.stage_key(), "sweep": cfg.sweep.stage_key()},
                [f"chunk:{exam_label}", *(f"index:{c}" for c in (cfg.judge.chunkers or labels))],
                [layout.judge / "scores" / "summary.json"],
                an.run_judge_stage,
                resumable=True,
                extra={"clean": [layout.judge]},
            )
        )
        if cfg.calibration.human:  # [calibration]: the judges' means corrected with human labels
            cal_key = {
                "calibration": cfg.calibration.model_dump(),
                "labels": _files_fingerprint([cfg.calibration.human]),
            }
            cal_out = layout.judge / "scores" / "calibration" / "calibration.json"
            stages.append(st.Stage("calibration", cal_key, ["judge"], [cal_out], an.run_calibration_stage))
    if cfg.report.enabled:
        stages.append(
            st.Stage(
                "report",
                {"report": cfg.report.model_dump()},
                [s.name for s in stages],
                [layout.report],
                st.run_report,
                extra={"always": True},
            )
        )
    return stages


def _robust_stages(cfg: JobConfig, layout: RunLayout, has_exam: bool) -> list[st.Stage]:
    r = cfg.robust
    if not r.enabled:
        return []
    out: list[st.Stage] = []
    needs: list[str] = []
    if r.data is None:
        if not has_exam:
            return []
        label = cfg.chunker(r.chunker).label
        out.append(
            st.Stage(
                "robust:build",
                r.build_key(),
                ["exam", f"index:{label}"],
                [layout.testbeds / "build_report.json"],
                an.run_robust_build,
            )
        )
        needs = ["robust:build"]
    for tb in r.testbeds:
        key = {"testbed": tb, **r.testbed_key(), "llm": cfg.llm.stage_key()}
        if r.prompts is not None:  # the prompts file's contents count, as an exam file's do
            key["prompts_file"] = _files_fingerprint([str(r.prompts)])
        out.append(
            st.Stage(f"robust:{tb}", key, needs, [layout.robust / tb], _bind(an.run_robust_testbed, tb), resumable=True)
        )
    return out


def _bind(
    fn: Callable[[st.StageContext, str], st.StageSummary], arg: str
) -> Callable[[st.StageContext], st.StageSummary]:
    def run(ctx: st.StageContext) -> st.StageSummary:
        return fn(ctx, arg)

    return run


def stage_hashes(stages: list[st.Stage]) -> dict[str, str]:
    """Each stage's hash: its own key plus the hashes of the stages it reads."""
    hashes: dict[str, str] = {}
    for s in stages:
        payload: dict[str, object] = {"stage": s.name, "key": s.key, "needs": {n: hashes.get(n) for n in s.needs}}
        code = STAGE_CODE_VERSIONS.get(s.name.split(":")[0], 1)
        if code != 1:  # version 1 leaves the payload as it was, so older runs' hashes still match
            payload["code"] = code
        hashes[s.name] = fingerprint(payload)
    return hashes


def read_stages(layout: RunLayout) -> dict[str, StageRecord]:
    """``stages.json`` of a run dir (empty when absent or unreadable)."""
    path = layout.root / STAGES_FILE
    if not path.is_file():
        return {}
    try:
        data = read_json(path)
    except DataError:
        return {}
    return dict(data.get("stages", {})) if isinstance(data, dict) else {}


class _Recorder:
    """Keeps ``stages.json`` up to date after every change."""

    def __init__(self, layout: RunLayout) -> None:
        self.layout = layout
        self.records = read_stages(layout)

    def set(self, name: str, **rec: Unpack[StageRecord]) -> None:
        self.records[name] = {**self.records.get(name, {}), **rec}
        write_json(
            self.layout.root / STAGES_FILE,
            {"version": STAGES_VERSION, "kind": "job-stages", "updated": now_iso(), "stages": self.records},
        )


def _reusable(stage: st.Stage, rec: StageRecord | None, digest: str) -> bool:
    if stage.extra.get("always") or rec is None:
        return False
    return rec.get("hash") == digest and rec.get("status") == "done" and all(p.exists() for p in stage.outputs)


def describe_plan(cfg: JobConfig, out: Path) -> list[PlanStep]:
    """The stages ``ragrade run`` would run into ``out``: name, inputs, outputs and whether each is reused."""
    layout = RunLayout(out)
    stages = build_stages(cfg, layout)
    hashes = stage_hashes(stages)
    done = read_stages(layout) if layout.root.is_dir() else {}
    plan: list[PlanStep] = []
    for s in stages:
        reused = _reusable(s, done.get(s.name), hashes[s.name])
        plan.append(
            {
                "stage": s.name,
                "needs": list(s.needs),
                "outputs": [str(p) for p in s.outputs],
                "action": "reuse" if reused else "run",
            }
        )
    return plan


def run_job(cfg: JobConfig, out: str | Path, *, force: bool = False, display: Display | None = None) -> JobResult:
    """Run (or resume) every stage of ``cfg`` into the run directory ``out``."""
    from ragrade.job.check import check_job

    check_job(cfg)  # every component name and model spec, before the first stage (and before writing anything)
    from ragrade.runlock import run_lock

    with run_lock(out):  # one process per run folder (each stage's own folder is locked by its runner too)
        return _run_locked(cfg, Path(out), force, display)


def _run_locked(cfg: JobConfig, out: Path, force: bool, display: Display | None) -> JobResult:
    """:func:`run_job` in a folder this process holds."""
    layout = RunLayout(out)
    layout.root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    stages = build_stages(cfg, layout)
    hashes = stage_hashes(stages)
    recorder = _Recorder(layout)
    result = JobResult(layout.root)
    manifest = _start_manifest(cfg, layout, stages)
    shown = display or make_display()
    t_job = time.perf_counter()
    timings: dict[str, StageTiming] = {}
    with shown:
        for i, stage in enumerate(stages):
            rec = recorder.records.get(stage.name)
            if not force and _reusable(stage, rec, hashes[stage.name]):
                shown.stage_reused(i, len(stages), stage.name, rec.get("seconds") if rec else None)
                timings[stage.name] = {
                    "seconds": 0.0,
                    "reused": True,
                    "original_seconds": rec.get("seconds") if rec else None,
                }
                result.stages[stage.name] = {"status": "reused", "summary": (rec or {}).get("summary", {})}
                continue
            if rec is not None and rec.get("hash") != hashes[stage.name]:
                for path in stage.extra.get("clean", []):
                    shutil.rmtree(path, ignore_errors=True)
            if stage.name == "report":  # the report shows the finished manifest and the timings
                result.timings = _write_timings(layout, timings, t_job)
                _finish_manifest(manifest, layout, result)
            shown.stage_start(i, len(stages), stage.name)
            recorder.set(stage.name, hash=hashes[stage.name], status="running", started=now_iso())
            t0 = time.perf_counter()
            interrupt.progress(i, len(stages), f"stages; stopped in {stage.name}")
            ctx = st.StageContext(cfg, layout, _tracked(stage.name, shown.sub_progress))
            try:
                summary = stage.run(ctx)
            except BaseException as exc:
                status = "interrupted" if isinstance(exc, interrupt.Interrupted) else "failed"
                recorder.set(stage.name, status=status, error=f"{type(exc).__name__}: {exc}"[:500])
                _write_timings(layout, timings, t_job, failed=stage.name)
                raise
            seconds = round(time.perf_counter() - t0, 3)
            recorder.set(stage.name, status="done", finished=now_iso(), seconds=seconds, summary=summary)
            timings[stage.name] = {"seconds": seconds, "reused": False}
            result.stages[stage.name] = {"status": "ran", "summary": summary}
            shown.stage_done(i, len(stages), stage.name, seconds, summary)
    result.timings = _write_timings(layout, timings, t_job)
    _finish_manifest(manifest, layout, result)
    result.report = layout.report if layout.report.is_file() else None
    return result


def _tracked(stage: str, show: st.Progress) -> st.Progress:
    """The stage's progress callback: shown, and kept for the message of an interrupted run."""

    def progress(what: str, done: int, total: int) -> None:
        interrupt.progress(done, total, what if what.startswith(stage) else f"{stage}: {what}")
        show(what, done, total)

    return progress


def _write_timings(
    layout: RunLayout, timings: dict[str, StageTiming], t_job: float, failed: str | None = None
) -> JobTimings:
    doc: JobTimings = {
        "version": 1,
        "kind": "job-timings",
        "created": now_iso(),
        "cpus": os.cpu_count(),
        "total_seconds": round(time.perf_counter() - t_job, 3),
        "stages": timings,
        "failed": failed,
    }
    write_json(layout.root / TIMINGS_FILE, doc)
    return doc


def _start_manifest(cfg: JobConfig, layout: RunLayout, stages: list[st.Stage]) -> dict[str, Any]:
    from ragrade.run.manifest import build_manifest, write_manifest

    labels = [c.label for c in cfg.chunkers]
    inputs: dict[str, object] = {
        "corpus": "demo (Python standard library docstrings)" if cfg.corpus.demo else list(cfg.corpus.paths)
    }
    manifest = build_manifest(
        "job",
        cfg,
        {},
        {"exam": cfg.exam.seed, "sweep": cfg.sweep.seed, "robust": cfg.robust.seed},
        inputs,
        exam=str(layout.exam),
        indexes={label: layout.index(label) for label in labels},
        extra={"name": cfg.name, "stages": [s.name for s in stages], "paths": config_paths(cfg, layout.root)},
    )
    path = layout.root / MANIFEST_FILE
    if path.is_file():
        try:
            old = read_json(path)
            manifest["started"] = old.get("started", manifest["started"])
            manifest["resumed"] = [*old.get("resumed", []), now_iso()]
        except (DataError, AttributeError):
            pass
    write_manifest(layout.root, manifest)
    return manifest


def _finish_manifest(manifest: dict[str, object], layout: RunLayout, result: JobResult) -> None:
    from ragrade.run.manifest import finish_manifest, write_manifest

    manifest["stage_status"] = {k: v["status"] for k, v in result.stages.items()}
    manifest["timings"] = {k: v["seconds"] for k, v in result.timings.get("stages", {}).items()}
    missing = missing_answers(layout)
    manifest["missing_by"] = missing
    write_manifest(layout.root, finish_manifest(manifest, missing=sum(missing.values())))


def missing_answers(layout: RunLayout) -> dict[str, int]:
    """Failed requests (missing answers) per output folder of the job: the ``missing`` of every run manifest
    below the job folder and the failures of every robustness ``metrics.json``; folders with none left out."""
    found: dict[str, int] = {}
    for path in sorted([*layout.root.glob("*/manifest.json"), *layout.root.glob("*/*/manifest.json")]):
        try:
            n = int((read_json(path) or {}).get("missing") or 0)
        except (DataError, AttributeError, TypeError, ValueError):
            continue
        if n:
            found[layout.rel(path.parent)] = n
    for path in sorted(layout.robust.glob("**/metrics.json")):
        try:
            n = len((read_json(path) or {}).get("failures") or [])
        except (DataError, AttributeError, TypeError):
            continue
        if n:
            found[layout.rel(path.parent)] = n
    return found


__all__ = ["JobResult", "build_stages", "describe_plan", "read_stages", "run_job", "stage_hashes"]
