"""The settings every LLM user shares: one typed model, one set of defaults.

:class:`LLMOptions` is how a run reaches its LLMs: the server, the limits of a request (timeout,
retries, requests in flight and per minute), the response cache, the dry run and the backend options
(``seed``, ``device``, ``n_ctx``, ...). Where each setting lives, from a flag to the backend:

- defined here, once, with its default and its help text (the CLI flags of :mod:`ragrade.cli.llm_flags`
  quote these defaults);
- read from a config file's ``[llm_options]`` table (a job config, a ``sweep.toml``, and ``[judge]``,
  ``[robust]``, ``[exam]`` files; the old names, a job's ``[llm]`` and top-level keys such as
  ``[judge] timeout``, are read with one deprecation line) and from the flags, merged once:
  defaults < config file < flags (:func:`ragrade.config.build_config`);
- handed as this object to :func:`ragrade.llm.create_llm` (``create_llm(spec, options)``), which refuses an
  option the backend cannot use and passes the object to the backend's factory; the factory gives the limiter
  :meth:`LLMOptions.limits` and the backend its :meth:`LLMOptions.backend_kwargs`;
- serialised only where it crosses a process boundary: worker processes (Ray actors included) receive the
  JSON of :meth:`LLMOptions.worker_dict` in their context and read it back with ``model_validate``.

The API key is not an option: it is read from ``OPENAI_API_KEY`` (keys never belong in config files
or run manifests). Sampling settings (temperature, reply length) belong to each task, not here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from ragrade.config import deprecated
from ragrade.llm.defaults import BACKOFF_S, CONCURRENCY, MAX_RETRIES, RETRIES, TIMEOUT

if TYPE_CHECKING:
    from ragrade.llm.limits import LimitConfig

#: options that change how fast answers come, never what they are (left out of resume fingerprints)
THROUGHPUT_OPTIONS = ("concurrency", "cache", "cache_dir", "timeout", "max_retries", "rpm", "backoff_s")
#: the fields of ``ragrade run``'s ``[llm]`` table before it became an :class:`LLMOptions`; stage keys always hold
#: them, later fields only when set (so that earlier job runs keep their stage keys)
_JOB_KEY_FIELDS = ("base_url", "concurrency", "timeout", "max_retries", "cache")
#: the keys the configs of judge and robust run held at their top level before they held an LLMOptions
_FLAT_KEYS = ("base_url", "concurrency", "timeout", "max_retries", "cache", "dry_run")
#: the options that reach a backend's own constructor (each backend reads some; None: its own default)
BACKEND_OPTIONS = (
    "seed",
    "letter_fallback",
    "loglikelihood_mode",
    "fallback_prompt",
    "transport",
    "extra_body",
    "n_threads",
    "n_ctx",
    "flash_attn",
    "parallel_sequences",
    "device",
    "dtype",
    "loglikelihood_method",
    "max_batch",
    "batch_tokens",
    "trust_remote_code",
    "replay_from",
)


class LLMOptions(BaseModel):
    """How a run talks to its LLMs (every field has its one default here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible server (default: $OPENAI_BASE_URL, else the OpenAI API).",
    )
    concurrency: int = Field(
        default=CONCURRENCY, ge=1, description="LLM requests in flight (the ceiling of the adaptive cap)."
    )
    timeout: float = Field(
        default=TIMEOUT,
        gt=0,
        description="Seconds per LLM request attempt (left at the default: learned from the replies, up to 4x).",
    )
    max_retries: int = Field(
        default=RETRIES,
        ge=0,
        le=MAX_RETRIES,  # an integer: 2.5 is refused, not cut to 2
        description=f"Retries of a failed LLM request (0 to {MAX_RETRIES}); then it is missing.",
    )
    rpm: float | None = Field(default=None, gt=0, description="Requests per minute (default: no limit).")
    backoff_s: float = Field(
        default=BACKOFF_S, gt=0, description="First backoff delay before a retry (doubling, jittered)."
    )
    cache: bool = Field(default=True, description="Use the SQLite response cache (--no-cache: false).")
    cache_dir: str | None = Field(default=None, description="Folder of the response cache ($RAGRADE_CACHE_DIR).")
    dry_run: bool = Field(default=False, description="Count the requests, send none (ragrade --dry-run).")
    # -- backend options: passed to the backend only when set (None: the backend's own default) -----------------------
    seed: int | None = Field(default=None, description="Sampling seed sent with every request (openai, hf, llamacpp).")
    letter_fallback: bool | None = Field(
        default=None, description="openai: without log-likelihoods, let the chat endpoint pick a letter (default no)."
    )
    loglikelihood_mode: str | None = Field(
        default=None, description="openai: auto (default), echo, forced-token, chat-logprobs or letter-choice."
    )
    fallback_prompt: str | None = Field(
        default=None, description="openai: the letter_fallback prompt (text or a .txt file)."
    )
    transport: str | None = Field(default=None, description="openai: auto (default), aiohttp or httpx.")
    extra_body: dict[str, JsonValue] | None = Field(
        default=None, description="openai: extra JSON fields sent with every request."
    )
    n_threads: int | None = Field(
        default=None,
        ge=1,
        description="llamacpp: threads (default $RAGRADE_LLAMACPP_THREADS, else the cores of the CPU affinity).",
    )
    n_ctx: int | None = Field(default=None, ge=16, description="llamacpp: context window in tokens (default 4096).")
    flash_attn: bool | None = Field(default=None, description="llamacpp: flash attention (default off).")
    parallel_sequences: int | None = Field(
        default=None,
        ge=1,
        description="llamacpp: questions decoded at once as parallel sequences (default 1 below 16 threads, else "
        "4; checked once against one at a time).",
    )
    device: str | None = Field(
        default=None,
        description="hf: auto (default: CUDA, else Apple MPS, else the CPU), cpu, cuda[:N], mps.",
    )
    dtype: str | None = Field(
        default=None,
        description="hf: auto (default: bfloat16 on a GPU, float32 on the CPU), float32, bfloat16, float16.",
    )
    loglikelihood_method: str | None = Field(
        default=None, description="hf: prefix-tree (default, batched), shared-prefix or per-choice (one at a time)."
    )
    max_batch: int | None = Field(
        default=None,
        ge=1,
        description="hf: requests per padded group of batched greedy generation, and continuations per forward of "
        "the one-at-a-time shared-prefix method (default 32).",
    )
    batch_tokens: int | None = Field(
        default=None,
        ge=1,
        description="hf: token positions per batched forward pass (default: from free GPU memory; 8192 on the CPU).",
    )
    trust_remote_code: bool | None = Field(default=None, description="hf: run the model folder's own code.")
    replay_from: str | None = Field(
        default=None, description="replay: the finished run whose responses replay/... LLMs answer with."
    )

    @field_validator("device", "dtype")
    @classmethod
    def _known_placement(cls, value: str | None, info: object) -> str | None:
        """A device or dtype name that exists somewhere (whether it runs here is checked when a model loads)."""
        from ragrade.errors import ConfigError
        from ragrade.llm.device import check_names

        name = getattr(info, "field_name", "")
        try:
            check_names(value if name == "device" else None, value if name == "dtype" else None)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value

    def backend_kwargs(self, names: Iterable[str] = BACKEND_OPTIONS) -> dict[str, Any]:
        """The backend options among ``names`` that are set (keyword arguments of a backend's constructor, each
        typed by its field here)."""
        return {k: v for k in names if (v := getattr(self, k)) is not None}

    def limits(self) -> LimitConfig:
        """The limiter's settings: requests in flight and per minute, the timeout of an attempt, the retries and
        their first backoff. A timeout at its default is learned from the replies, up to 4 times the default
        (:mod:`ragrade.llm.pacing`); any other is used as it is."""
        from ragrade.llm.limits import LimitConfig

        return LimitConfig(
            concurrency=self.concurrency,
            rpm=self.rpm,
            timeout=self.timeout,
            max_retries=self.max_retries,
            backoff_base_s=self.backoff_s,
            learn_timeout=self.timeout == LLMOptions.model_fields["timeout"].default,
        )

    def for_llm(self, spec: str) -> LLMOptions:
        """These options as one LLM of a grid takes them: the ones its backend cannot use (``device`` for an
        ``openai/`` model, ``base_url`` for an ``hf/`` one) back at their defaults. A grid's options are shared
        by all its LLMs; :func:`ragrade.llm.create_llm` refuses an option the backend cannot use, so that a
        single model is never run without a setting its user asked for."""
        unused = unused_options(spec, self)
        if not unused:
            return self
        return self.model_copy(update={k: LLMOptions.model_fields[k].default for k in unused})

    def worker_dict(self) -> dict[str, object]:
        """The options that differ from the defaults, as JSON: what travels to worker processes (Ray actors
        included; ``LLMOptions.model_validate`` reads it back) and, without the throughput knobs, what a
        resume fingerprint holds (:meth:`answer_options`)."""
        return self.model_dump(mode="json", exclude_defaults=True)

    def answer_options(self) -> dict[str, object]:
        """The options that can change answers (not :data:`THROUGHPUT_OPTIONS`): what a grid run's resume
        fingerprint holds (:func:`ragrade.run.setup.resume_fingerprint`), so that a rerun changing only them resumes."""
        return {k: v for k, v in self.worker_dict().items() if k not in THROUGHPUT_OPTIONS}

    def stage_key(self) -> dict[str, object]:
        """The options as ``ragrade run`` stage keys hold them: what can change an answer, as a grid run's
        provenance holds it (the base URL always; never the :data:`THROUGHPUT_OPTIONS` nor ``dry_run``), so that a
        rerun changing only concurrency, timeouts, retries or the cache reuses every finished stage."""
        skip = {"dry_run", *THROUGHPUT_OPTIONS}
        full = self.model_dump(mode="json", exclude=skip)
        extra = self.model_dump(mode="json", exclude_defaults=True, exclude={*skip, *_JOB_KEY_FIELDS})
        return {**{k: full[k] for k in _JOB_KEY_FIELDS if k in full}, **extra}


@dataclass(frozen=True)
class LLMCaps:
    """What a registered LLM provider reads of the :class:`LLMOptions` (see :func:`ragrade.llm.register_llm`).

    ``options``: the backend options its factory passes on (``seed``, ``device``, ...); ``server``: it talks to a
    server (``base_url`` and an API key apply); ``limits``: the request limits apply (concurrency, rpm, timeout,
    retries, backoff); ``cache``: its answers go through the response cache (``cache_dir`` applies); ``check``:
    a quick look at the model, loading nothing (does the file exist, is it whole), run by :func:`ragrade.llm.check_llm`.
    """

    options: frozenset[str] = frozenset()
    server: bool = False
    limits: bool = True
    cache: bool = True
    check: Callable[[str, LLMOptions], None] | None = None


#: the options of the limiter (LLMOptions.limits)
LIMIT_FIELDS = ("concurrency", "rpm", "timeout", "max_retries", "backoff_s")


def unused_options(spec: str, options: LLMOptions, *, api_key: str | None = None) -> list[str]:
    """The options set in ``options`` (and ``api_key`` when given) that the backend of ``spec`` cannot use."""
    caps = provider_caps(spec.split("/", 1)[0])
    if caps is None:  # a plugin that declared nothing reads what it wants
        return []
    out = [k for k in BACKEND_OPTIONS if k not in caps.options and getattr(options, k) is not None]
    if not caps.server:
        out += [k for k, v in (("base_url", options.base_url), ("api_key", api_key)) if v is not None]
    if not caps.limits:
        out += [k for k in LIMIT_FIELDS if getattr(options, k) != LLMOptions.model_fields[k].default]
    if not caps.cache and options.cache_dir is not None:
        out.append("cache_dir")
    return out


def provider_caps(provider: str) -> LLMCaps | None:
    """What LLM provider ``provider`` declared it reads (None: a plugin registered without a declaration);
    a ConfigError with the valid names when there is no such provider."""
    from ragrade.registry import lookup

    caps = getattr(lookup("llm", provider), "llm_caps", None)
    return caps if isinstance(caps, LLMCaps) else None


def lift_flat_options(data: object, where: str) -> object:
    """Read the old spelling of a config table whose LLM options sat at its top level (``[judge] timeout = 30``):
    move those keys into its ``llm_options`` table, with one deprecation line on stderr per process.

    Used as a ``mode="before"`` validator of the configs that hold an ``llm_options`` field (the keys lifted are
    the ones those configs had: base_url, concurrency, timeout, max_retries, cache, dry_run). Read for one release.
    """
    if not isinstance(data, Mapping):
        return data
    old = [k for k in _FLAT_KEYS if k in data]
    if not old:
        return data
    out = dict(data)
    nested = out.get("llm_options")
    lifted: dict[object, object] = dict(nested) if isinstance(nested, Mapping) else {}
    if isinstance(nested, LLMOptions):
        lifted.update(nested.model_dump(exclude_unset=True))
    for key in old:  # the top-level key wins over the same key under llm_options
        lifted[key] = out.pop(key)
    out["llm_options"] = lifted
    deprecated(
        f"{where}: {', '.join(old)} at the top level is the old spelling; write "
        f"llm_options.{old[0]} (a [...llm_options] table; the old spelling is read until the next release)"
    )
    return out


def rename_options_table(data: object, old: str, where: str) -> object:
    """Read the old name ``old`` of a config's LLM options table (``[llm]`` of a job config): its keys move under
    ``llm_options``, the one name of the table everywhere, with one deprecation line on stderr per process
    (``llm_options`` wins where both set a key: a flag over a file). Used as a ``mode="before"`` validator."""
    if not isinstance(data, Mapping) or not isinstance(data.get(old), Mapping):
        return data
    out = dict(data)
    moved = dict(out.pop(old))
    nested = out.get("llm_options")
    current = nested.model_dump(exclude_unset=True) if isinstance(nested, LLMOptions) else nested
    out["llm_options"] = {**moved, **(dict(current) if isinstance(current, Mapping) else {})}
    deprecated(
        f"{where}: the [{old}] table is the old name of [llm_options]; rename it "
        "(the old name is read until the next release)"
    )
    return out


def option_default(name: str) -> object:
    """The default of option ``name`` (for help texts: ``(default 60.0)``)."""
    return LLMOptions.model_fields[name].default


__all__ = [
    "BACKEND_OPTIONS",
    "LIMIT_FIELDS",
    "MAX_RETRIES",
    "THROUGHPUT_OPTIONS",
    "LLMCaps",
    "LLMOptions",
    "lift_flat_options",
    "option_default",
    "provider_caps",
    "rename_options_table",
    "unused_options",
]
