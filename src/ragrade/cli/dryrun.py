"""``ragrade --dry-run VERB ...``: run a command with every LLM replaced by a counter.

``--dry-run`` is a root option the command reads (:func:`~ragrade.cli.common.dry_run_requested`) into its
run's settings: the ``dry_run`` LLM option, which travels with the work to every executor (a Ray worker
builds its LLMs from the options it is shipped), so every :func:`~ragrade.llm.create_llm` of the run
returns a :class:`~ragrade.llm.dryrun.DryRunLLM`, which sends nothing and answers every request with a
dry-run error. The counts are read from :data:`~ragrade.llm.dryrun.LEDGER` (Ray actors send theirs back).
So that these non-answers never land in the
user's files (a later real run would resume from them), the command's output
options (``--out``, ``--qrels``) are pointed into a temporary folder, which is
deleted afterwards; a command that takes ``--out`` but was not given one gets
one there too. The counts are printed at the end.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

OUTPUT_OPTIONS = ("--out", "--qrels")


def _command_params(args: list[str]) -> set[str]:
    """The option names the command that ``args`` names accepts (empty when it cannot be resolved)."""
    from ragrade.cli.app import app

    try:
        from typer.main import get_command

        cmd: Any = get_command(app)
        ctx = cmd.make_context("ragrade", [], resilient_parsing=True)
        for token in args:
            if token.startswith("-") or not hasattr(cmd, "get_command"):
                break
            route = getattr(cmd, "command_for", None)  # a group with a default command (`judge ANSWERS`)
            sub = route(ctx, token) if route is not None else cmd.get_command(ctx, token)
            if sub is None:
                break
            cmd = sub
        return {opt for p in getattr(cmd, "params", []) for opt in getattr(p, "opts", [])}
    except Exception:  # resolution is best effort; the command itself reports bad usage
        return set()


def redirect_outputs(args: list[str], tmp: Path) -> list[str]:
    """``args`` with every output option's value moved into ``tmp`` (file names kept)."""
    out: list[str] = []
    given: set[str] = set()
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, value = token.partition("=")
        if name in OUTPUT_OPTIONS:
            given.add(name)
            if eq:
                out.append(f"{name}={tmp / (Path(value).name or 'out')}")
            else:
                out.append(token)
                if i + 1 < len(args):
                    out.append(str(tmp / (Path(args[i + 1]).name or "out")))
                    i += 1
        else:
            out.append(token)
        i += 1
    if "--out" not in given and "--out" in _command_params(args):
        out += ["--out", str(tmp / "out")]
    return out


def run_dry(args: list[str], invoke: Callable[[list[str], Callable[[str], None]], int]) -> int:
    """Run ``args`` (with ``--dry-run`` among the root options) as a dry run; print the counts.

    When the command made LLM requests, its own report (a leaderboard of unanswered questions, an
    error about an exam with no question) describes non-answers in a deleted folder: only the
    counts are printed. A command that made no request prints as usual (and fails as usual).
    """
    import contextlib
    import io

    from ragrade.cli.common import error_line
    from ragrade.llm.dryrun import LEDGER

    n_root = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
    tmp = Path(tempfile.mkdtemp(prefix="ragrade-dry-run-"))
    errors: list[str] = []
    stdout = io.StringIO()
    mark = LEDGER.mark()
    try:
        with contextlib.redirect_stdout(stdout):  # the root options keep --dry-run: the command reads it
            code = invoke([*args[:n_root], *redirect_outputs(args[n_root:], tmp)], errors.append)
    finally:
        summaries = LEDGER.since(mark)
        shutil.rmtree(tmp, ignore_errors=True)
    if not summaries:
        typer.echo(stdout.getvalue(), nl=False)
        for message in errors:
            error_line(message.replace(str(tmp), "<dry-run folder>"))
    _print(summaries)
    return 0 if summaries else code


def _print(summaries: list[dict[str, Any]]) -> None:
    typer.echo("", err=True)
    if not summaries:
        typer.echo("dry run: the command made no LLM request", err=True)
        return
    typer.echo("dry run: nothing was sent; the command's files went to a temporary folder, now deleted", err=True)
    for s in summaries:
        typer.echo(
            f"  {s['llm']}: {s['requests']} requests ({s['generate_requests']} generate, "
            f"{s['loglikelihood_requests']} log-likelihood with {s['loglikelihood_continuations']} continuations), "
            f"~{s['prompt_tokens_estimate']} prompt tokens, at most {s['max_completion_tokens']} completion tokens",
            err=True,
        )
    typer.echo(json.dumps({"dry_run": summaries}, ensure_ascii=False))


__all__ = ["redirect_outputs", "run_dry"]
