"""The LLM layer: one protocol, backends chosen by a ``provider/model`` string and built with one LLMOptions.

    from ragrade.llm import LLMOptions, create_llm, generate, GenerationRequest, Message
    llm = create_llm("openai/llama3.1", LLMOptions(base_url="http://localhost:11434/v1"))
    [c] = generate(llm, [GenerationRequest(messages=(Message("user", "Hi"),))])

Providers (registry kind ``llm``): ``openai`` (any OpenAI-compatible server),
``hf`` (a local Hugging Face model path or GGUF file), ``llamacpp`` (a GGUF model run in process,
e.g. the embedded ``llamacpp/gemma-3-270m``), ``offline`` (``offline/student`` and
``offline/extractive`` baselines, no model download), ``replay`` (answers from a finished run,
see :mod:`ragrade.llm.replay`). Every backend caches
responses in SQLite (``$RAGRADE_CACHE_DIR``), limits requests in flight and per
minute, retries transient failures and records the final error per request.

A provider registers with :func:`register_llm`, declaring which options it reads; :func:`create_llm` refuses a
set option the backend cannot use, and :func:`check_llm` checks a spec (provider, model file, options) in a
moment, loading nothing, so that verbs can refuse a wrong ``--llm`` before they load indexes and embedders.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

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
from ragrade.llm.options import BACKEND_OPTIONS, LIMIT_FIELDS, LLMCaps, LLMOptions, provider_caps, unused_options
from ragrade.llm.phrases import ERROR_SENTENCE, REJECTION_SENTENCE
from ragrade.registry import did_you_mean, lookup, names, register

F = TypeVar("F", bound=Callable[..., object])
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
    """Split ``provider/model`` (the model may contain further slashes); ConfigError when malformed or longer
    than :data:`~ragrade.schemas.MAX_SPEC_CHARS` (quoted cut to a readable length)."""
    from ragrade.schemas import MAX_SPEC_CHARS, quoted, size_error

    too_long = size_error("the LLM spec", spec, MAX_SPEC_CHARS) if isinstance(spec, str) else None
    if too_long is not None:
        raise ConfigError(too_long)
    if not isinstance(spec, str) or "/" not in spec.strip("/"):
        providers = names("llm")
        hint = did_you_mean(str(spec), [f"{p}/" for p in providers])
        raise ConfigError(
            f"LLM spec {quoted(str(spec))} must look like PROVIDER/MODEL (providers: {', '.join(providers)}; "
            f"e.g. openai/gpt-4o-mini, hf/./my-model, offline/student).{hint}"
        )
    provider, model = spec.split("/", 1)
    if not model:
        raise ConfigError(f"LLM spec {quoted(spec)} has no model after '{provider}/'")
    return provider, model


def register_llm(
    name: str,
    *,
    options: Iterable[str] = (),
    server: bool = False,
    limits: bool = True,
    cache: bool = True,
    check: Callable[[str, LLMOptions], None] | None = None,
) -> Callable[[F], F]:
    """Register an LLM factory as provider ``name``, declaring which :class:`LLMOptions` it reads (:class:`LLMCaps`).

    The factory is called as ``factory(model, options=LLMOptions, **backend_args)`` (plus ``api_key=`` when one
    was given) and builds its backend from ``options`` (:meth:`LLMOptions.limits`, :func:`options_cache`,
    :meth:`LLMOptions.backend_kwargs`). :func:`create_llm` refuses an option the declaration leaves out when it
    is set; a factory registered with plain ``@register("llm", NAME)`` declares nothing and is handed every option.
    """
    unknown = sorted(set(options) - set(BACKEND_OPTIONS))
    if unknown:
        raise ValueError(f"llm '{name}': {', '.join(unknown)} are not backend options of LLMOptions")
    caps = LLMCaps(frozenset(options), server, limits, cache, check)

    def deco(factory: F) -> F:
        factory.llm_caps = caps  # type: ignore[attr-defined]
        return register("llm", name)(factory)

    return deco


def check_llm(spec: str, options: LLMOptions | None = None, *, api_key: str | None = None) -> None:
    """Check model spec ``spec`` with ``options`` in a moment, loading no model: its shape, a known
    provider (did-you-mean), the options its backend can use, and what the provider checks of the model (a local
    model folder or GGUF file exists and its header reads whole; an offline baseline's name; a replay's run).

    Verbs call it before they load indexes or embedders, so that a wrong ``--llm`` fails at once (ConfigError).
    """
    opts = options or LLMOptions()
    parse_spec(spec)
    _refuse_unused(spec, opts, api_key)
    _check_model(spec, opts)


def _check_model(spec: str, opts: LLMOptions) -> None:
    """What the provider of ``spec`` checks of its model before loading it (ConfigError starting with ``spec``)."""
    provider, model = parse_spec(spec)
    caps = provider_caps(provider)
    if caps is not None and caps.check is not None:
        try:
            caps.check(model, opts)
        except ConfigError as exc:
            message = str(exc)  # named by the spec once: "llamacpp/./m.gguf: no such GGUF file ..."
            if message.startswith(f"{model}: "):
                message = message[len(model) + 2 :]
            raise ConfigError(message if message.startswith(spec) else f"{spec}: {message}") from exc


def options_for_llms(specs: Iterable[str], options: LLMOptions | None = None) -> dict[str, LLMOptions]:
    """The options of each LLM of a set that one command's flags configure (``ask``: the answering and the rewriting
    model), every spec checked (:func:`check_llm`). An option goes to the LLMs that can use it
    (:meth:`LLMOptions.for_llm`); one that none of them can use is a ConfigError, as it is for a single model. (A job
    shares its options with every stage, so a grid of one stage gives each LLM :meth:`LLMOptions.for_llm` only.)"""
    opts = options or LLMOptions()
    distinct = list(dict.fromkeys(specs))
    if len(distinct) == 1:
        check_llm(distinct[0], opts)
        return {distinct[0]: opts}
    unused = [set(unused_options(spec, opts)) for spec in distinct]
    nowhere = set.intersection(*unused) if unused else set()
    out: dict[str, LLMOptions] = {}
    for spec in distinct:
        if nowhere:  # the options no LLM here can use: refused, naming the providers they are for
            _refuse_unused(spec, opts.for_llm(spec).model_copy(update={k: getattr(opts, k) for k in nowhere}), None)
        out[spec] = opts.for_llm(spec)
        check_llm(spec, out[spec])
    return out


def _refuse_unused(spec: str, options: LLMOptions, api_key: str | None) -> None:
    """One line naming the set options that ``spec``'s backend cannot use (never a silently dropped setting)."""
    unused = unused_options(spec, options, api_key=api_key)
    if not unused:
        return
    provider = spec.split("/", 1)[0]
    where = []
    for name in unused:
        users = [p for p in names("llm") if name in _reads(p)] if name not in (*LIMIT_FIELDS, "cache_dir") else []
        where.append(f"{name} (for {', '.join(users)})" if users else name)
    raise ConfigError(
        f"{spec}: the {provider} provider cannot use the LLM option(s) {', '.join(where)}; leave them out"
    )


def _reads(provider: str) -> set[str]:
    """The backend and server options provider ``provider`` declares it reads (none for one that declared nothing)."""
    caps = provider_caps(provider)
    if caps is None:
        return set()
    return set(caps.options) | ({"base_url", "api_key"} if caps.server else set())


#: the options create_llm took as keywords of its own before it took one LLMOptions
_OLD_KEYWORDS = ("base_url", "cache", "cache_dir", *LIMIT_FIELDS, "dry_run")


def _legacy_options(options: LLMOptions, args: dict[str, object]) -> LLMOptions:
    """``create_llm(spec, timeout=..., n_ctx=...)``, the old spelling: the options named as keywords, taken out of
    ``args`` and put over ``options``, with one DeprecationWarning. The old connection keywords are validated as
    options; backend options go to the backend as they are, which checks them itself (as it did)."""
    given = {k: args.pop(k) for k in list(args) if k in LLMOptions.model_fields}
    if not given:
        return options
    warnings.warn(
        f"create_llm(spec, {', '.join(f'{k}=' for k in given)}...) is deprecated; pass create_llm(spec, "
        "LLMOptions(...)) (the keywords are read until the next release)",
        DeprecationWarning,
        stacklevel=3,
    )
    old = {k: str(v) if k == "cache_dir" and v is not None else v for k, v in given.items() if k in _OLD_KEYWORDS}
    merged = build_config(LLMOptions, options.model_dump(), old, source="LLM options") if old else options
    return merged.model_copy(update={k: v for k, v in given.items() if k not in _OLD_KEYWORDS})


def options_cache(options: LLMOptions) -> ResponseCache | None:
    """The response cache ``options`` asks for: the process-wide one of ``cache_dir``, or None (``cache=false``)."""
    return shared_cache(options.cache_dir) if options.cache else None


def create_llm(
    spec: str, options: LLMOptions | None = None, *, api_key: str | None = None, **backend_args: object
) -> LLM:
    """Build the backend named by ``spec`` (``provider/model``) with the run's :class:`LLMOptions`.

    ``options``: the connection, limit and backend settings (default ``LLMOptions()``, the one set of defaults);
    an option the backend cannot use, when set, is a ConfigError naming it (a grid shares one object among its
    LLMs: give each :meth:`LLMOptions.for_llm`). ``dry_run`` returns a :class:`~ragrade.llm.dryrun.DryRunLLM`
    that counts what would be sent without sending it (its counts go to :data:`ragrade.llm.dryrun.LEDGER`).
    ``api_key``: default ``$OPENAI_API_KEY`` (servers only). ``backend_args``: constructor arguments of the
    backend that are no option (``semantic=False`` for an offline baseline); an option's name there (``timeout=``,
    ``cache=``, ...) is the deprecated spelling of ``options``, read until the next release.
    """
    opts = _legacy_options(options or LLMOptions(), backend_args)
    provider, model = parse_spec(spec)
    factory = lookup("llm", provider)
    _refuse_unused(spec, opts, api_key)
    _check_model(spec, opts)  # a missing or cut-off model file fails here, before a runtime or weights load
    if opts.dry_run:  # a setting of the run, carried in the LLM options to every worker (never process state)
        from ragrade.llm.dryrun import DryRunLLM

        return DryRunLLM(spec, base_url=opts.base_url)
    key = {"api_key": api_key} if api_key is not None else {}
    llm: LLM = factory(model, options=opts, **key, **backend_args)
    return llm


_OPENAI = ("seed", "letter_fallback", "loglikelihood_mode", "fallback_prompt", "transport", "extra_body")
_HF = ("seed", "device", "dtype", "loglikelihood_method", "max_batch", "batch_tokens", "trust_remote_code")
_LLAMACPP = ("seed", "n_threads", "n_ctx", "flash_attn", "parallel_sequences")


def _check_gguf(model: str, _options: LLMOptions) -> None:
    from ragrade.llm.gguf import check_gguf

    check_gguf(model)


def _check_hf(model: str, _options: LLMOptions) -> None:
    from ragrade.llm.gguf import EMBEDDED_MODELS, check_gguf

    if model in EMBEDDED_MODELS or model.lower().endswith(".gguf"):
        check_gguf(model)
    elif not Path(model).expanduser().is_dir():
        raise ConfigError(
            f"no model folder at {Path(model).expanduser()} (the hf provider loads local folders and .gguf files only)"
        )


def _check_offline(model: str, _options: LLMOptions) -> None:
    from ragrade.llm.offline import OFFLINE_MODELS

    if model not in OFFLINE_MODELS:
        raise ConfigError(
            f"unknown offline baseline '{model}'; valid: {', '.join(OFFLINE_MODELS)}."
            + did_you_mean(model, list(OFFLINE_MODELS))
        )


def _check_replay(model: str, options: LLMOptions) -> None:
    if not options.replay_from:
        raise ConfigError("needs the finished run to replay: set llm_options replay_from = 'RUN_DIR'")
    if not Path(options.replay_from).exists():
        raise ConfigError(f"replay_from: no run at {options.replay_from}")


@register_llm("openai", options=_OPENAI, server=True)
def _openai(model: str, *, options: LLMOptions, api_key: str | None = None, **kw: Any) -> LLM:
    from ragrade.llm.openai import OpenAILLM

    return OpenAILLM(
        model, base_url=options.base_url, api_key=api_key, cache=options_cache(options), limits=options.limits(),
        **options.backend_kwargs(_OPENAI), **kw,
    )  # fmt: skip


@register_llm("hf", options=_HF, check=_check_hf)
def _hf(model: str, *, options: LLMOptions, **kw: Any) -> LLM:
    from ragrade.llm.hf import HFLLM

    backend = options.backend_kwargs(_HF)
    return HFLLM(model, cache=options_cache(options), limits=options.limits(), **backend, **kw)


@register_llm("llamacpp", options=_LLAMACPP, check=_check_gguf)
def _llamacpp(model: str, *, options: LLMOptions, **kw: Any) -> LLM:
    from ragrade.llm.llamacpp import LlamaCppLLM

    backend = options.backend_kwargs(_LLAMACPP)
    return LlamaCppLLM(model, cache=options_cache(options), limits=options.limits(), **backend, **kw)


@register_llm("offline", check=_check_offline)
def _offline(model: str, *, options: LLMOptions, **kw: Any) -> LLM:
    from ragrade.llm.offline import create_offline

    return create_offline(model, cache=options_cache(options), limits=options.limits(), **kw)


# a replay sends no request and reads its answers from a finished run: limits and the cache do not apply
@register_llm("replay", options=("replay_from",), limits=False, cache=False, check=_check_replay)
def _replay(model: str, *, options: LLMOptions, **kw: Any) -> LLM:
    from ragrade.llm.replay import ReplayLLM

    if kw:
        raise ConfigError(f"replay/{model}: unknown argument(s) {', '.join(sorted(kw))} (it takes replay_from)")
    return ReplayLLM(model, replay_from=options.replay_from)


__all__ = [
    "ERROR_SENTENCE",
    "LLM",
    "REJECTION_SENTENCE",
    "Completion",
    "GenerationRequest",
    "LLMCaps",
    "LLMOptions",
    "LimitConfig",
    "LoglikelihoodRequest",
    "LoglikelihoodResult",
    "Message",
    "ResponseCache",
    "Usage",
    "check_llm",
    "create_llm",
    "generate",
    "loglikelihood",
    "options_cache",
    "options_for_llms",
    "parse_spec",
    "register_llm",
    "run_sync",
    "shared_cache",
    "unused_options",
]
