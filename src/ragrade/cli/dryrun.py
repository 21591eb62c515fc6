"""``ragrade --dry-run VERB ...``: run a command with every LLM replaced by a counter.

``--dry-run`` is a root option the command reads (:func:`~ragrade.cli.common.dry_run_requested`) into its
run's settings: the ``dry_run`` LLM option, which travels with the work to every executor (a Ray worker
builds its LLMs from the options it is shipped), so every :func:`~ragrade.llm.create_llm` of the run
returns a :class:`~ragrade.llm.dryrun.DryRunLLM`, which sends nothing and answers every request with a
dry-run error. The counts are read from :data:`~ragrade.llm.dryrun.LEDGER` (Ray actors send theirs back).
So that these non-answers never land in the
user's files (a later real run would resume from them), the run's settings name a temporary folder
(:class:`~ragrade.cli.common.CommandSettings`), and every verb writes its outputs there
(:func:`~ragrade.cli.common.output_path`: ``--out``, ``--qrels`` and the default output of a verb given
none), deleted afterwards. The counts are printed at the end.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from ragrade.cli.common import CommandSettings, error_line


def run_dry(args: list[str], invoke: Callable[[list[str], Callable[[str], None], CommandSettings], int]) -> int:
    """Run ``args`` (with ``--dry-run`` among the root options) as a dry run; print the counts.

    When the command made LLM requests, its own report (a leaderboard of unanswered questions, an
    error about an exam with no question) describes non-answers in a deleted folder: only the
    counts are printed. A command that made no request prints as usual (and fails as usual).
    """
    import contextlib
    import io

    from ragrade.llm.dryrun import LEDGER

    tmp = Path(tempfile.mkdtemp(prefix="ragrade-dry-run-"))
    errors: list[str] = []
    stdout = io.StringIO()
    mark = LEDGER.mark()
    try:
        with contextlib.redirect_stdout(stdout):  # the command reads --dry-run and writes into the folder
            code = invoke(args, errors.append, CommandSettings(dry_run_folder=tmp))
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


__all__ = ["run_dry"]
