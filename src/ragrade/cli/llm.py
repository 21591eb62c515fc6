"""CLI verbs of the llm stage: ``ragrade cache info|clear`` and ``ragrade llm probe``."""

from __future__ import annotations

from typing import Any

import typer

cache_app = typer.Typer(help="Inspect or clear the LLM response cache ($RAGRADE_CACHE_DIR).", no_args_is_help=True)
llm_app = typer.Typer(help="Check an LLM backend.", no_args_is_help=True)


@cache_app.command("info")
def cache_info(
    cache_dir: str | None = typer.Option(
        None, "--cache-dir", help="Cache directory (default $RAGRADE_CACHE_DIR or ~/.cache/ragrade)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show where the cache is, how many responses it holds, per provider/model."""
    from ragrade.cli.common import echo_json
    from ragrade.llm.cache import ResponseCache, default_cache_path

    path = default_cache_path(cache_dir)
    info: dict[str, Any]
    if not path.exists():
        info = {"path": str(path), "entries": 0, "bytes": 0, "by_model": [], "exists": False}
    else:
        store = ResponseCache(path)
        info = {**store.info(), "exists": True}
        store.close()
    if as_json:
        echo_json(info)
        return
    typer.echo(f"cache: {info['path']}{'' if info['exists'] else ' (not created yet)'}")
    typer.echo(f"entries: {info['entries']}  size: {info['bytes'] / 1e6:.2f} MB")
    for row in info["by_model"]:
        typer.echo(f"  {row['provider']}/{row['model']} {row['kind']}: {row['entries']}")


@cache_app.command("clear")
def cache_clear(
    cache_dir: str | None = typer.Option(None, "--cache-dir", help="Cache directory."),
    llm: str | None = typer.Option(None, "--llm", help="Only the entries of this PROVIDER/MODEL."),
) -> None:
    """Delete cached responses (all, or those of one model)."""
    from ragrade.llm import parse_spec
    from ragrade.llm.cache import ResponseCache, default_cache_path

    path = default_cache_path(cache_dir)
    if not path.exists():
        typer.echo(f"cache: {path} does not exist; nothing to clear")
        return
    provider, model = parse_spec(llm) if llm else (None, None)
    store = ResponseCache(path)
    deleted = store.clear(provider=provider, model=model)
    store.close()
    typer.echo(f"deleted {deleted} cached responses from {path}")


@llm_app.command("probe")
def llm_probe(
    llm: str = typer.Option(..., "--llm", help="PROVIDER/MODEL, e.g. openai/llama3.1"),
    base_url: str | None = typer.Option(
        None, "--llm-base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible server URL."
    ),
    timeout: float = typer.Option(30.0, "--timeout", min=0.1, help="Seconds per request."),
    max_retries: int = typer.Option(1, "--max-retries", min=0, help="Retries of a failed request."),
) -> None:
    """Send one generation and one log-likelihood request; report what the backend supports.

    Exits 2 when the generation request fails (server down, key rejected, ...), after printing the report.
    """
    from ragrade.cli.common import echo_json
    from ragrade.errors import BackendError
    from ragrade.llm import GenerationRequest, LoglikelihoodRequest, Message, create_llm, generate, loglikelihood

    model = create_llm(llm, base_url=base_url, cache=False, timeout=timeout, max_retries=max_retries)
    [gen] = generate(
        model,
        [
            GenerationRequest(
                messages=(Message("user", "Reply with the word ready."),),
                max_tokens=8,
                question="Reply with the word ready.",
                passages=("ready",),
            )
        ],
    )
    [ll] = loglikelihood(
        model,
        [
            LoglikelihoodRequest(
                "The sky on a clear day is", (" blue", " green"), question="The sky on a clear day is ____."
            )
        ],
    )
    echo_json(
        {
            "llm": model.describe(),
            "generate": {"ok": gen.ok, "text": gen.text, "error": gen.error, "latency_s": round(gen.latency_s, 3)},
            "loglikelihood": {"ok": ll.ok, "method": ll.method, "logprobs": ll.logprobs, "error": ll.error},
        }
    )
    if not gen.ok:
        raise BackendError(f"{model.name}: the generation request failed: {gen.error}")


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to ``app``."""
    app.add_typer(cache_app, name="cache")
    app.add_typer(llm_app, name="llm")
