"""What :func:`ragrade.api.run_job` and :func:`ragrade.api.demo` return (its own module: it loads the job runner)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ragrade.job.runner import JobResult


@dataclass
class JobRun(JobResult):
    """What a job did (a :class:`~ragrade.job.runner.JobResult`: each stage ran or reused, the timings, the
    report), with the notes a reader should see about the run (an offline exam, offline-only pipelines)."""

    notes: list[str] = field(default_factory=list)


def job_run(result: JobResult) -> JobRun:
    """``result`` with the notes read from its run directory."""
    from ragrade.report.sections_core import baseline_notes
    from ragrade.report.sources import RunFiles

    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return JobRun(**fields, notes=baseline_notes(RunFiles(result.run_dir)))


__all__ = ["JobRun", "job_run"]
