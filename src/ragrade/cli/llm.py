"""CLI verbs of the llm stage: ``ragrade cache info|clear`` and ``ragrade llm probe``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from ragrade.cli.flags import with_flags
from ragrade.cli.llm_flags import LLM_PANEL, DeviceOption, DtypeOption, LlmBaseUrlOption, llm_layer
from ragrade.llm.options import MAX_RETRIES

cache_app = typer.Typer(help="Inspect or clear the LLM response cache ($RAGRADE_CACHE_DIR).", no_args_is_help=True)
llm_app = typer.Typer(help="Check an LLM backend.", no_args_is_help=True)


@dataclass(frozen=True, kw_only=True)
class CacheInfoFlags:
    """The options of ``ragrade cache info``."""

    cache_dir: Annotated[
        str | None,
        typer.Option("--cache-dir", help="Cache directory (default $RAGRADE_CACHE_DIR or ~/.cache/ragrade)."),
    ] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False


@cache_app.command("info")
@with_flags(CacheInfoFlags)
def cache_info(flags: CacheInfoFlags) -> None:
    """Show where the cache is, how many responses it holds, per provider/model."""
    from ragrade import api
    from ragrade.cli.common import echo_json

    info = api.cache_info(flags.cache_dir)
    if flags.as_json:
        echo_json(info.to_dict())
        return
    typer.echo(f"cache: {info.path}{'' if info.exists else ' (not created yet)'}")
    typer.echo(f"entries: {info.entries}  size: {info.bytes / 1e6:.2f} MB")
    for row in info.by_model:
        typer.echo(f"  {row['provider']}/{row['model']} {row['kind']}: {row['entries']}")


@dataclass(frozen=True, kw_only=True)
class CacheClearFlags:
    """The options of ``ragrade cache clear``."""

    cache_dir: Annotated[str | None, typer.Option("--cache-dir", help="Cache directory.")] = None
    llm: Annotated[str | None, typer.Option("--llm", help="Only the entries of this PROVIDER/MODEL.")] = None


@cache_app.command("clear")
@with_flags(CacheClearFlags)
def cache_clear(flags: CacheClearFlags) -> None:
    """Delete cached responses (all, or those of one model)."""
    from ragrade import api

    cleared = api.clear_cache(flags.cache_dir, llm=flags.llm)
    if not cleared.exists:
        typer.echo(f"cache: {cleared.path} does not exist; nothing to clear")
        return
    typer.echo(f"deleted {cleared.deleted} cached responses from {cleared.path}")


#: the defaults of :func:`ragrade.api.probe_llm` the help quotes (:data:`ragrade.api.llm.PROBE_OPTIONS`; a test
#: keeps them equal; not imported from there so that ``ragrade --help`` does not load the API)
PROBE_OPTIONS = {"timeout": 30.0, "max_retries": 1, "cache": False}


@dataclass(frozen=True, kw_only=True)
class ProbeFlags:
    """The options of ``ragrade llm probe``: the model, how it is reached, what it must serve."""

    llm: Annotated[str, typer.Option("--llm", help="PROVIDER/MODEL, e.g. openai/llama3.1")]
    llm_base_url: LlmBaseUrlOption = None
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=0.1,
            help=f"Seconds per request (default {PROBE_OPTIONS['timeout']:g}).",
            rich_help_panel=LLM_PANEL,
        ),
    ] = None
    max_retries: Annotated[
        int | None,
        typer.Option(
            "--max-retries",
            min=0,
            max=MAX_RETRIES,
            help=f"Retries of a failed request (default {PROBE_OPTIONS['max_retries']}).",
            rich_help_panel=LLM_PANEL,
        ),
    ] = None
    need: Annotated[
        str,
        typer.Option(
            "--need",
            help=(
                "What the model must serve, a comma list of generate, loglikelihood, json; exit 2 when one is missing."
            ),
        ),
    ] = "generate"
    device: DeviceOption = None
    dtype: DtypeOption = None


@llm_app.command("probe")
@with_flags(ProbeFlags)
def llm_probe(flags: ProbeFlags) -> None:
    """Send a few requests; report each capability of the backend as JSON.

    For an OpenAI-compatible server: chat, completions, prompt log-probabilities and by which method
    (echo-batched, echo, forced-token or none), JSON output by schema and by object, logit_bias and the
    server's slots. ``generate`` is usable when the request succeeds with a reply that shows no
    chat-template token (``<|im_end|>``, ``<end_of_turn>``, or the start of one where the text ends); an
    empty reply is the model's answer, not a missing capability: a second prompt is sent and ``note``
    says what it got. Each verdict that fails gives its reason. Exits 2, after printing the report, exactly
    when something ``--need`` names is not usable: ``missing`` names those, and the error line says why.
    """
    from ragrade import api
    from ragrade.cli.common import echo_json, split_list

    needs = split_list(flags.need, "--need") or []
    layer = llm_layer(
        llm_base_url=flags.llm_base_url,
        timeout=flags.timeout,
        max_retries=flags.max_retries,
        device=flags.device,
        dtype=flags.dtype,
    )
    probe = api.probe_llm(flags.llm, llm_options=layer, need=needs, check=False)  # the flags over the probe's defaults
    echo_json(probe.report)
    probe.check()  # after the report is printed


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to ``app``."""
    app.add_typer(cache_app, name="cache")
    app.add_typer(llm_app, name="llm")
