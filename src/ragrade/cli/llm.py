"""CLI verbs of the llm stage: ``ragrade cache info|clear`` and ``ragrade llm probe``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import typer

from ragrade.cli.llm_flags import DeviceOption, DtypeOption, LlmBaseUrlOption, llm_flag_layer
from ragrade.llm.options import MAX_RETRIES

if TYPE_CHECKING:
    from ragrade.llm.base import LLM, LoglikelihoodResult

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


NEEDS = ("generate", "loglikelihood", "json")
#: a probe answers quickly: the run defaults of LLMOptions with a shorter timeout, one retry and no cache
PROBE_OPTIONS = {"timeout": 30.0, "max_retries": 1, "cache": False}


@llm_app.command("probe")
def llm_probe(
    llm: str = typer.Option(..., "--llm", help="PROVIDER/MODEL, e.g. openai/llama3.1"),
    llm_base_url: LlmBaseUrlOption = None,
    timeout: float | None = typer.Option(
        None, "--timeout", min=0.1, help=f"Seconds per request (default {PROBE_OPTIONS['timeout']:g})."
    ),
    max_retries: int | None = typer.Option(
        None,
        "--max-retries",
        min=0,
        max=MAX_RETRIES,
        help=f"Retries of a failed request (default {PROBE_OPTIONS['max_retries']}).",
    ),
    need: str = typer.Option(
        "generate",
        "--need",
        help="What the model must serve, a comma list of generate, loglikelihood, json; exit 2 when one is missing.",
    ),
    device: DeviceOption = None,
    dtype: DtypeOption = None,
) -> None:
    """Send a few requests; report each capability of the backend as JSON.

    For an OpenAI-compatible server: chat, completions, prompt log-probabilities and by which method
    (echo-batched, echo, forced-token or none), JSON output by schema and by object, logit_bias and the
    server's slots. ``generate`` is usable only when the request succeeds with a reply that is not empty
    and shows no chat-template token (``<|im_end|>``, ``<end_of_turn>``, or the start of one where the
    text ends); each verdict that fails gives its reason. Exits 2, after printing the report, exactly
    when something ``--need`` names is not usable: ``missing`` names those, and the error line says why.
    """
    from ragrade.cli.common import echo_json, split_list
    from ragrade.config import build_config
    from ragrade.errors import BackendError, ConfigError
    from ragrade.llm import (
        GenerationRequest,
        LLMOptions,
        LoglikelihoodRequest,
        Message,
        create_llm,
        generate,
        loglikelihood,
    )
    from ragrade.llm.capabilities import text_verdict

    needs = split_list(need, "--need") or []
    unknown = [n for n in needs if n not in NEEDS]
    if unknown:
        raise ConfigError(f"--need takes a comma list of {', '.join(NEEDS)}; got '{unknown[0]}'")
    flags = llm_flag_layer(
        {"llm_base_url": llm_base_url, "timeout": timeout, "max_retries": max_retries, "device": device, "dtype": dtype}
    )
    options = build_config(LLMOptions, PROBE_OPTIONS, flags, source="probe options")
    model = create_llm(llm, options)  # the spec, its options and the model file are checked before it loads
    ask = "Reply with the word ready."
    [gen] = generate(
        model, [GenerationRequest(messages=(Message("user", ask),), max_tokens=8, question=ask, passages=("ready",))]
    )
    [ll] = loglikelihood(
        model,
        [
            LoglikelihoodRequest(
                "The sky on a clear day is", (" blue", " green"), question="The sky on a clear day is ____."
            )
        ],
    )
    gen_ok, gen_why = text_verdict(gen.text, gen.error)
    caps = _capabilities(model, gen_ok, ll, "json" in needs)
    missing = _missing(needs, gen_why, ll, caps)
    echo_json(
        {
            "llm": model.describe(),
            "generate": {
                "ok": gen_ok,
                "reason": gen_why,
                "text": gen.text,
                "error": gen.error,
                "latency_s": round(gen.latency_s, 3),
            },
            "loglikelihood": {
                "ok": ll.ok,
                "reason": None if ll.ok else ll.error,
                "method": ll.method,
                "logprobs": ll.logprobs,
                "error": ll.error,
            },
            "capabilities": caps,
            "need": needs,
            "missing": sorted(missing),
        }
    )
    if missing:
        why = "; ".join(f"{k}: {v}" for k, v in sorted(missing.items()))
        raise BackendError(f"{model.name} cannot serve what --need asks ({why})")


def _capabilities(model: LLM, gen_ok: bool, ll: LoglikelihoodResult, check_json: bool) -> dict[str, object]:
    """Each capability of ``model``: the full probe for an OpenAI-compatible server, else what the
    generation (``gen_ok``: its verdict) and log-likelihood requests showed (and JSON output, when asked)."""
    from ragrade.llm import GenerationRequest, Message, generate, run_sync
    from ragrade.llm.openai import OpenAILLM

    if isinstance(model, OpenAILLM):
        from ragrade.llm.capabilities import probe_capabilities

        return run_sync(probe_capabilities(model))
    caps: dict[str, object] = {"generate": gen_ok}
    caps["prompt_logprobs"] = ll.method if ll.ok else "none"
    if check_json:
        from ragrade.llm.capabilities import PROBE_SCHEMA

        ask = GenerationRequest(messages=(Message("user", "Name a colour. Reply in JSON."),), json_schema=PROBE_SCHEMA)
        [reply] = generate(model, [ask])
        caps["json_schema"] = _is_json_object(reply.text)
    return caps


def _is_json_object(text: str | None) -> bool:
    import json

    try:
        return isinstance(json.loads(text or ""), dict)
    except ValueError:
        return False


def _missing(
    needs: list[str], gen_why: str | None, ll: LoglikelihoodResult, caps: Mapping[str, object]
) -> dict[str, str]:
    """What ``--need`` names that the probe did not find usable, with the reason (``gen_why``: generation's)."""
    notes = caps.get("notes")
    if not isinstance(notes, dict):  # the full probe's reasons; none from the short one
        notes = {}
    missing: dict[str, str] = {}
    if "generate" in needs and gen_why is not None:
        missing["generate"] = gen_why
    if "loglikelihood" in needs and not ll.ok:
        missing["loglikelihood"] = str(ll.error)
    if "json" in needs and not (caps.get("json_schema") or caps.get("json_object")):
        missing["json"] = notes.get("json_object") or notes.get("json_schema") or "the replies are not JSON"
    return missing


def register(app: typer.Typer) -> None:
    """Add this stage's verbs to ``app``."""
    app.add_typer(cache_app, name="cache")
    app.add_typer(llm_app, name="llm")
