"""Whole jobs: a job config or the demo, every stage into one run directory (``ragrade run``, ``demo``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrade.api._common import PathLike

if TYPE_CHECKING:
    from ragrade.job.config import JobConfig
    from ragrade.job.progress import Display
    from ragrade.job.runner import JobResult


def run_job(
    config: PathLike | Mapping[str, Any] | JobConfig,
    out: PathLike | None = None,
    *,
    force: bool = False,
    display: Display | None = None,
) -> JobResult:
    """Run every stage of a job config (a TOML file, its tables as a dict, or a loaded
    :class:`~ragrade.job.config.JobConfig`) into a run directory (``ragrade run``).

    Reuses the stages whose configuration is unchanged; ``out`` defaults to the config's ``out``.
    Writes the job layout (``corpus/``, ``chunks/``, ``index/``, ``exam/``, ``sweep/``, ``irt/``,
    ``robust/``, ``judge/``, ``report.html``, ``stages.json``, ``timings.json``). ``display``: the stage
    progress display (:func:`ragrade.job.progress.make_display`; default: plain lines).
    """
    from ragrade.job.config import JobConfig, load_job_config
    from ragrade.job.runner import run_job as _run

    if isinstance(config, JobConfig):
        cfg = config
    elif isinstance(config, (str, Path)):
        cfg = load_job_config(config, None)
    else:
        cfg = load_job_config(None, dict(config))
    return _run(cfg, out if out is not None else Path(cfg.out), force=force, display=display)


def demo(out: PathLike, *, small: bool = True, force: bool = False, display: Display | None = None) -> JobResult:
    """The offline demo job (``ragrade demo``, ``small``: ``--small``) into ``out``; see :func:`run_job`."""
    from ragrade.job.demo import demo_config
    from ragrade.job.runner import run_job as _run

    return _run(demo_config(small=small), out, force=force, display=display)
