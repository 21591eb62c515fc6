"""Whole jobs: a job config or the demo, every stage into one run directory (``ragrade run``, ``demo``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike

if TYPE_CHECKING:
    from ragrade.api.job_run import JobRun
    from ragrade.job.config import JobConfig
    from ragrade.job.progress import Display
    from ragrade.job.runner import PlanStep


def run_job(
    config: PathLike | Mapping[str, Any] | JobConfig,
    out: PathLike | None = None,
    *,
    overrides: Mapping[str, object] | None = None,
    force: bool = False,
    display: Display | None = None,
    warn: Callable[[str], None] | None = None,
) -> JobRun:
    """Run every stage of a job config (a TOML file, its tables as a dict, or a loaded
    :class:`~ragrade.job.config.JobConfig`) into a run directory (``ragrade run``).

    ``overrides``: tables over the config's (as the command line's flags are; not with a loaded config).
    Reuses the stages whose configuration is unchanged; ``out`` defaults to the config's ``out``.
    Writes the job layout (``corpus/``, ``chunks/``, ``index/``, ``exam/``, ``sweep/``, ``irt/``,
    ``robust/``, ``judge/``, ``report.html``, ``stages.json``, ``timings.json``). ``display``: the stage
    progress display (:func:`ragrade.job.progress.make_display`; default: plain lines). ``warn`` receives
    the warning given when ``out`` holds another command's run (default: a Python warning). The result
    has the notes a reader should see about the run (``notes``: an offline exam, offline-only pipelines).
    """
    from ragrade.api.job_run import job_run
    from ragrade.job.runner import run_job as _run

    cfg = _job_config(config, overrides)
    target = Path(out) if out is not None else Path(cfg.out)
    note = foreign_layout_note(target)
    if note is not None:
        (warn or _warn)(note)
    return job_run(_run(cfg, target, force=force, display=display))


@dataclass(frozen=True)
class JobPlan:
    """What :func:`plan_job` found: the run directory, the job's resolved file paths, and each stage with
    whether it would run or be reused."""

    run_dir: Path
    paths: dict[str, str | list[str]]
    stages: list[PlanStep]


def plan_job(
    config: PathLike | Mapping[str, Any] | JobConfig,
    out: PathLike | None = None,
    *,
    overrides: Mapping[str, object] | None = None,
) -> JobPlan:
    """Validate a job config (every component name and model spec) and plan it, running nothing
    (``ragrade run --check``); ConfigError at the first bad name. Arguments as for :func:`run_job`."""
    from ragrade.job.check import check_job
    from ragrade.job.config import config_paths
    from ragrade.job.runner import describe_plan

    cfg = _job_config(config, overrides)
    target = Path(out) if out is not None else Path(cfg.out)
    check_job(cfg)
    return JobPlan(target, config_paths(cfg, target), describe_plan(cfg, target))


def demo(out: PathLike, *, small: bool = True, force: bool = False, display: Display | None = None) -> JobRun:
    """The offline demo job (``ragrade demo``, ``small``: ``--small``) into ``out``; see :func:`run_job`."""
    from ragrade.api.job_run import job_run
    from ragrade.job.demo import demo_config
    from ragrade.job.runner import run_job as _run

    return job_run(_run(demo_config(small=small), out, force=force, display=display))


def _job_config(config: PathLike | Mapping[str, Any] | JobConfig, overrides: Mapping[str, object] | None) -> JobConfig:
    """The job's settings: the file, tables or loaded config, with ``overrides`` over them."""
    from ragrade.errors import ConfigError
    from ragrade.job.config import JobConfig, load_job_config

    if isinstance(config, JobConfig):
        if overrides:
            raise ConfigError("overrides apply to a config file or tables, not to a loaded JobConfig")
        return config
    if isinstance(config, (str, Path)):
        return load_job_config(config, overrides)
    if overrides:
        from ragrade.config import deep_merge

        return load_job_config(None, deep_merge(dict(config), overrides))
    return load_job_config(None, dict(config))


def foreign_layout_note(target: Path) -> str | None:
    """A warning when ``target`` holds another command's run (e.g. ``exam take``): the job's layout would mix in."""
    if not target.is_dir() or (target / "stages.json").exists():
        return None
    marks = [
        name
        for name in ("responses.parquet", "answers.jsonl", "results.jsonl", "manifest.json")
        if (target / name).exists()
    ]
    if not marks:
        return None
    return (
        f"{target} holds another command's run ({', '.join(marks)} at its top, e.g. from "
        "`ragrade exam take`); `ragrade run` adds its own layout (corpus/, exam/, sweep/, ...) beside it; "
        "give a new folder with $out to keep them apart"
    )


def _warn(message: str) -> None:
    import warnings

    warnings.warn(f"ragrade: {message}", stacklevel=3)
