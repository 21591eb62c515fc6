"""Failed LLM requests after a command: count them, decide whether the command failed, say how to resume.

A request that ended in an error (after its retries) is *missing* data, never a
wrong answer: results keep it as a failure, metrics leave it out, and a rerun of
the same command asks exactly the failed items again. A command still has to
tell its caller when too much is missing. :class:`FailureTally` counts requests
per group (a pipeline, a testbed) and per model; :meth:`FailureTally.check`
raises

- :class:`~ragrade.errors.BackendError` (exit 2) when a backend was declared
  unusable (the server rejected the API key; its first requests, or its recent
  ones, all failed; or it gave no reply in time to requests sent one at a time,
  in which case the message gives the latencies seen and the settings to rerun with),
- :class:`~ragrade.errors.FailedRequests` (exit 3) when some group has more than
  ``max_share`` of its requests failed, or every request of one model failed,

each with a one-line summary of what failed and how to resume.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ragrade.errors import BackendError, ConfigError, FailedRequests
from ragrade.llm.dryrun import DRY_RUN_ERROR
from ragrade.llm.limits import AUTH_REJECTED, TOO_SLOW, UNREACHABLE
from ragrade.llm.pacing import marked

DEFAULT_MAX_FAILED = 0.05
MAX_FAILED_ENV = "RAGRADE_MAX_FAILED"
MAX_FAILED_HELP = (
    "Share of failed LLM requests a pipeline or testbed may have before the command exits with code 3 "
    f"(default {DEFAULT_MAX_FAILED:g}, or ${MAX_FAILED_ENV}); failed requests are missing, never wrong."
)


def max_failed_share(value: float | None = None) -> float:
    """The failure threshold: ``value``, else ``$RAGRADE_MAX_FAILED``, else 0.05; ConfigError outside [0, 1]."""
    if value is None:
        raw = os.environ.get(MAX_FAILED_ENV)
        try:
            value = float(raw) if raw else DEFAULT_MAX_FAILED
        except ValueError as exc:
            raise ConfigError(f"${MAX_FAILED_ENV} must be a number between 0 and 1, got '{raw}'") from exc
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"$max_failed must be between 0 and 1, got {value:g}")
    return float(value)


def fatal_kind(error: str | None) -> str | None:
    """``"auth"``, ``"slow"`` or ``"unreachable"`` when ``error`` says the backend was declared unusable, else None."""
    if not error:
        return None
    if AUTH_REJECTED in error:
        return "auth"
    if TOO_SLOW in error:
        return "slow"
    if UNREACHABLE in error:
        return "unreachable"
    return None


@dataclass
class FailureTally:
    """Requests and failures per group and per model; the first error of each kind."""

    total: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    model_total: Counter[str] = field(default_factory=Counter)
    model_failed: Counter[str] = field(default_factory=Counter)
    fatal: dict[str, tuple[str, str]] = field(default_factory=dict)  # kind -> (model, error)
    first_error: str | None = None
    dry_run: bool = False  # a dry run's replies were counted: nothing was sent, so nothing failed

    def add(self, group: str, model: str | None, error: str | None) -> None:
        """Count one request of ``group`` sent to ``model``; ``error`` when it failed."""
        self.total[group] += 1
        if model:
            self.model_total[model] += 1
        if not error:
            return
        if DRY_RUN_ERROR in error:
            self.dry_run = True
        self.failed[group] += 1
        if model:
            self.model_failed[model] += 1
        kind = fatal_kind(error)
        if kind is not None:
            self._note_fatal(kind, model or "the LLM", error)
        elif self.first_error is None:
            self.first_error = error

    def add_backend(self, llm: object) -> None:
        """Note a backend declared unusable during the command (its limiter's ``fatal`` message), or a dry run."""
        if getattr(llm, "is_dry_run", False):
            self.dry_run = True
        fatal = getattr(getattr(llm, "limiter", None), "fatal", None)
        kind = fatal_kind(fatal)
        if kind is not None and fatal:
            self._note_fatal(kind, str(getattr(llm, "name", "the LLM")), f"not sent: {fatal}")

    def _note_fatal(self, kind: str, model: str, error: str) -> None:
        """Keep the first stop reason of each kind; a request refused for it (``not sent: ...``) tells it whole,
        so it replaces the error of a request that was in flight when the backend was stopped."""
        known = self.fatal.get(kind)
        if known is None or (not known[1].startswith("not sent:") and error.startswith("not sent:")):
            self.fatal[kind] = (model, error)

    def add_rows(self, rows: Iterable[dict[str, object]], group: str, model: str, error: str = "error") -> None:
        """Count dict rows: ``row[group]`` names the group, ``row[model]`` the model, ``row[error]`` the failure."""
        for r in rows:
            err = r.get(error)
            failed = err is not None and err == err and err != ""  # None, NaN (pandas) and "" are no error
            self.add(str(r.get(group)), str(r.get(model) or "") or None, str(err) if failed else None)

    @property
    def n_failed(self) -> int:
        """Failed requests in all."""
        return sum(self.failed.values())

    @property
    def n_total(self) -> int:
        """Requests in all."""
        return sum(self.total.values())

    def summary(self) -> str:
        """``"3 of 40 LLM requests failed (pipeline x: 3 of 10)"``, or ``""`` when none failed."""
        if not self.n_failed:
            return ""
        worst = max(self.failed, key=lambda g: (self.failed[g] / self.total[g], g))
        return (
            f"{self.n_failed} of {self.n_total} LLM requests failed and are missing from the results "
            f"(worst: {worst}, {self.failed[worst]} of {self.total[worst]})"
        )

    def check(self, resume: str, max_share: float | None = None, what: str = "group") -> None:
        """Raise when the failures are beyond the threshold (see the module docstring); ``resume`` says how."""
        share = max_failed_share(max_share)
        if self.dry_run:  # nothing was sent: every "failure" is a request counted, not lost
            return
        self.check_backends(resume)
        dead = [m for m, n in self.model_total.items() if n and self.model_failed[m] == n]
        over = [g for g, n in self.total.items() if n and self.failed[g] / n > share]
        if not dead and not over:
            return
        why = f"every request of {dead[0]} failed" if dead else f"{len(over)} {what}(s) above {share:.0%} failed"
        last = f"; first error: {marked(self.first_error)}" if self.first_error else ""  # settings as flags
        raise FailedRequests(f"{self.summary()}; {why}{last}. {resume}")

    def check_backends(self, resume: str) -> None:
        """BackendError (exit 2) when a backend was declared unusable (rejected key, too slow, unreachable)."""
        if self.dry_run:
            return
        if "auth" in self.fatal:
            model, _ = self.fatal["auth"]
            raise BackendError(
                f"{model}: {AUTH_REJECTED} (HTTP 401/403); {self.n_failed} of {self.n_total} requests failed "
                f"or were not sent. Set OPENAI_API_KEY to a valid key, then {resume}"
            )
        if "slow" in self.fatal:
            model, error = self.fatal["slow"]
            cause = marked(error.split(f"{TOO_SLOW}:", 1)[-1].strip())  # the CLI spells the settings as flags
            raise BackendError(
                f"{model}: {TOO_SLOW}: {cause}. {self.n_failed} of {self.n_total} requests failed or were not "
                f"sent; {resume}"
            )
        if "unreachable" in self.fatal:
            model, error = self.fatal["unreachable"]
            cause = error.split(f"{UNREACHABLE}:", 1)[-1].strip()
            raise BackendError(
                f"{model}: {UNREACHABLE} ({cause}); {self.n_failed} of {self.n_total} requests failed or were "
                f"not sent. Check $base_url and the server, then {resume}"
            )


def exam_request_tally(result: Any, llm: object = None) -> FailureTally:
    """The generation requests of an exam result: failed ones (``generation:llm_error``) among every chunk asked."""
    tally = FailureTally()
    if llm is not None:
        tally.add_backend(llm)
    asked = int((result.funnel.get("chunks") or {}).get("asked", 0))
    failed = [r for r in result.rejected if r.get("reason") == "generation:llm_error"]
    for r in failed:
        tally.add("exam generation", None, str(r.get("detail") or "failed"))
    for _ in range(max(0, asked - len(failed))):
        tally.add("exam generation", None, None)
    return tally


def robust_request_tally(runs: Iterable[Any]) -> FailureTally:
    """The requests of robustness runs (``ModelRun``): failed records among the answered ones, per model+testbed."""
    tally = FailureTally()
    for r in runs:
        m = r.metrics
        group = f"{r.model} on {m['testbed']}"
        for f in m.get("failures", []):
            tally.add(group, r.model, str(f.get("error") or "failed"))
        for _ in range(int(m["n"]) + int(m.get("n_without_docs") or 0)):
            tally.add(group, r.model, None)
    return tally


def resume_hint(command: str = "rerun the same command") -> str:
    """The standard resume sentence."""
    return f"{command} to ask only the failed requests again (finished answers are kept)"


def check_grid_failures(
    rows: Any, max_failed: float | None, resume: str | None = None, *, backends_only: bool = False
) -> None:
    """Raise (exit 2/3) when a pipeline grid's failed requests are beyond the threshold.

    ``rows``: a DataFrame or dict rows with ``pipeline``, ``llm`` and ``error``; ``resume``: how to resume.
    ``backends_only``: raise only for a backend declared unusable (exit 2), whatever the share that failed.
    """
    if hasattr(rows, "to_dict"):
        cols = [c for c in ("pipeline", "llm", "error") if c in rows.columns]
        rows = rows[cols].to_dict(orient="records")
    tally = FailureTally()
    tally.add_rows(rows, "pipeline", "llm")
    if backends_only:
        tally.check_backends(resume or resume_hint())
    else:
        tally.check(resume or resume_hint(), max_failed, what="pipeline")


__all__ = [
    "DEFAULT_MAX_FAILED",
    "MAX_FAILED_ENV",
    "MAX_FAILED_HELP",
    "FailureTally",
    "check_grid_failures",
    "exam_request_tally",
    "fatal_kind",
    "max_failed_share",
    "resume_hint",
    "robust_request_tally",
]
