"""The LLM layer: one protocol, backends chosen by a ``provider/model`` string.

    from ragrade.llm import create_llm, generate, GenerationRequest, Message
    llm = create_llm("openai/llama3.1", base_url="http://localhost:11434/v1")
    [c] = generate(llm, [GenerationRequest(messages=(Message("user", "Hi"),))])

Providers (registry kind ``llm``): ``openai`` (any OpenAI-compatible server),
``hf`` (a local Hugging Face model path or GGUF file), ``llamacpp`` (a GGUF model run in process,
e.g. the embedded ``llamacpp/gemma-3-270m``), ``offline`` (``offline/student`` and
``offline/extractive`` baselines, no model download), ``replay`` (answers from a finished run,
see :mod:`ragrade.llm.replay`). Every backend caches
responses in SQLite (``$RAGRADE_CACHE_DIR``), limits requests in flight and per
minute, retries transient failures and records the final error per request.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ragrade.config import build_config
from ragrade.errors import ConfigError
from ragrade.llm.base import (
    LLM,
    Completion,
    GenerationRequest,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Message,
    Usage,
    generate,
    loglikelihood,
    run_sync,
)
from ragrade.llm.cache import ResponseCache, default_cache_path
from ragrade.llm.limits import LimitConfig
from ragrade.llm.options import LLMOptions
from ragrade.llm.phrases import ERROR_SENTENCE, REJECTION_SENTENCE
from ragrade.registry import did_you_mean, lookup, names, register

_caches: dict[str, ResponseCache] = {}
_caches_lock = threading.Lock()


def shared_cache(cache_dir: str | Path | None = None) -> ResponseCache:
    """The process-wide :class:`ResponseCache` for ``cache_dir`` (default ``$RAGRADE_CACHE_DIR``)."""
    path = str(default_cache_path(cache_dir).resolve())
    with _caches_lock:
        if path not in _caches:
            _caches[path] = ResponseCache(path)
        return _caches[path]


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``provider/model`` (the model may contain further slashes); ConfigError when malformed."""
    if not isinstance(spec, str) or "/" not in spec.strip("/"):
        providers = names("llm")
        hint = did_you_mean(str(spec), [f"{p}/" for p in providers])
        raise ConfigError(
            f"LLM spec '{spec}' must look like PROVIDER/MODEL (providers: {', '.join(providers)}; "
            f"e.g. openai/gpt-4o-mini, hf/./my-model, offline/student).{hint}"
        )
    provider, model = spec.split("/", 1)
    if not model:
        raise ConfigError(f"LLM spec '{spec}' has no model after '{provider}/'")
    return provider, model


def create_llm(
    spec: str,
    *,
    options: LLMOptions | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    cache: bool | None = None,
    cache_dir: str | Path | None = None,
    concurrency: int | None = None,
    rpm: float | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    backoff_s: float | None = None,
    dry_run: bool | None = None,
    **backend_kwargs: object,
) -> LLM:
    """Build the backend named by ``spec`` (``provider/model``) with the run's :class:`LLMOptions`.

    ``options``: the connection and limit settings (default ``LLMOptions()``, the one set of defaults);
    a keyword named like one of its fields (``timeout=``, ``concurrency=``, ...) overrides it, ``None``
    meaning not given. ``dry_run`` returns a :class:`~ragrade.llm.dryrun.DryRunLLM` that counts what would
    be sent without sending it (its counts go to :data:`ragrade.llm.dryrun.LEDGER`). ``api_key``: default
    ``$OPENAI_API_KEY``. Extra keyword arguments go to the backend. A timeout left at its default is
    learned from the server's replies, up to 4 times the default (:mod:`ragrade.llm.pacing`); one given
    (here, or different from the default in ``options``) is used as it is.
    """
    given = {
        "base_url": base_url,
        "cache": cache,
        "cache_dir": str(cache_dir) if cache_dir is not None else None,
        "concurrency": concurrency,
        "rpm": rpm,
        "timeout": timeout,
        "max_retries": max_retries,
        "backoff_s": backoff_s,
        "dry_run": dry_run,
    }
    opts = build_config(LLMOptions, (options or LLMOptions()).model_dump(), given, source="LLM options")
    provider, model = parse_spec(spec)
    factory = lookup("llm", provider)
    limits = LimitConfig(
        concurrency=opts.concurrency,
        rpm=opts.rpm,
        timeout=opts.timeout,
        max_retries=opts.max_retries,
        backoff_base_s=opts.backoff_s,
        # a timeout left at its default is learned from the replies (ragrade.llm.pacing); a given one is kept
        learn_timeout=timeout is None and opts.timeout == LLMOptions.model_fields["timeout"].default,
    )
    if opts.dry_run:  # a setting of the run, carried in the LLM options to every worker (never process state)
        from ragrade.llm.dryrun import DryRunLLM

        return DryRunLLM(spec, base_url=opts.base_url)
    backend_kwargs = {**opts.backend_kwargs(), **backend_kwargs}  # seed, n_threads, replay_from, ... when set
    store = shared_cache(opts.cache_dir) if opts.cache else None
    llm: LLM = factory(model, base_url=opts.base_url, api_key=api_key, cache=store, limits=limits, **backend_kwargs)
    return llm


@register("llm", "openai")
def _openai(model: str, **kw: Any) -> LLM:
    from ragrade.llm.openai import OpenAILLM

    return OpenAILLM(model, **kw)


@register("llm", "hf")
def _hf(model: str, *, base_url: str | None = None, api_key: str | None = None, **kw: Any) -> LLM:
    from ragrade.llm.hf import HFLLM

    if base_url:
        raise ConfigError("the hf provider runs a local model; --llm-base-url does not apply (use openai/...)")
    return HFLLM(model, **kw)


@register("llm", "llamacpp")
def _llamacpp(model: str, *, base_url: str | None = None, api_key: str | None = None, **kw: Any) -> LLM:
    from ragrade.llm.llamacpp import LlamaCppLLM

    if base_url:
        raise ConfigError("the llamacpp provider runs a GGUF model in process; --llm-base-url does not apply")
    return LlamaCppLLM(model, **kw)


@register("llm", "offline")
def _offline(model: str, *, base_url: str | None = None, api_key: str | None = None, **kw: object) -> LLM:
    from ragrade.llm.offline import create_offline

    return create_offline(model, **kw)


@register("llm", "replay")
def _replay(model: str, *, replay_from: str | None = None, **_kw: object) -> LLM:
    from ragrade.llm.replay import ReplayLLM

    return ReplayLLM(model, replay_from=replay_from)


__all__ = [
    "ERROR_SENTENCE",
    "LLM",
    "REJECTION_SENTENCE",
    "Completion",
    "GenerationRequest",
    "LLMOptions",
    "LimitConfig",
    "LoglikelihoodRequest",
    "LoglikelihoodResult",
    "Message",
    "ResponseCache",
    "Usage",
    "create_llm",
    "generate",
    "loglikelihood",
    "parse_spec",
    "run_sync",
    "shared_cache",
]
