"""The settings every LLM user shares: one typed model, one set of defaults.

:class:`LLMOptions` is how a run reaches its LLMs: the server, the limits of a request (timeout,
retries, requests in flight and per minute), the response cache and the dry run. Every verb that
talks to an LLM holds one (``ragrade run``'s ``[llm]`` table, a sweep file's ``[llm_options]``
table, the ``[judge]`` and ``[robust]`` tables and the CLI flags of
:mod:`ragrade.cli.llm_flags`), merged once: defaults < config file < flags
(:func:`ragrade.config.build_config`). :func:`ragrade.llm.create_llm` takes it as ``options=``;
worker processes (Ray actors included) receive it as the plain dict of :meth:`LLMOptions.worker_dict`.

The API key is not an option: it is read from ``OPENAI_API_KEY`` (keys never belong in config files
or run manifests). Sampling settings (temperature, reply length) belong to each task, not here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TypedDict

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

#: options that change how fast answers come, never what they are (left out of resume fingerprints)
THROUGHPUT_OPTIONS = ("concurrency", "cache", "cache_dir", "timeout", "max_retries", "rpm", "backoff_s")
#: the most retries of one request (``max_retries``, ``--max-retries``); every retry is one more attempt of up to
#: ``timeout`` seconds after a backoff of up to 30 s, so a larger number is a typo (``1e9`` would wait for ever)
MAX_RETRIES = 100
#: the fields of ``ragrade run``'s ``[llm]`` table before it became an :class:`LLMOptions`; stage keys always hold
#: them, later fields only when set (so that earlier job runs keep their stage keys)
_JOB_KEY_FIELDS = ("base_url", "concurrency", "timeout", "max_retries", "cache")
#: the keys the configs of judge and robust run held at their top level before they held an LLMOptions
_FLAT_KEYS = ("base_url", "concurrency", "timeout", "max_retries", "cache", "dry_run")
_BACKEND_OPTIONS = (
    "seed",
    "letter_fallback",
    "loglikelihood_mode",
    "fallback_prompt",
    "transport",
    "extra_body",
    "n_threads",
    "n_ctx",
    "flash_attn",
    "device",
    "dtype",
    "loglikelihood_method",
    "max_batch",
    "batch_tokens",
    "trust_remote_code",
    "replay_from",
)


class CreateKwargs(TypedDict):
    """Keyword arguments of :func:`ragrade.llm.create_llm` (see :meth:`LLMOptions.create_kwargs`)."""

    base_url: str | None
    cache: bool
    cache_dir: str | None
    concurrency: int
    rpm: float | None
    timeout: float
    max_retries: int
    backoff_s: float
    dry_run: bool


class LLMOptions(BaseModel):
    """How a run talks to its LLMs (every field has its one default here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible server (default: $OPENAI_BASE_URL, else the OpenAI API).",
    )
    concurrency: int = Field(default=16, ge=1, description="LLM requests in flight (the ceiling of the adaptive cap).")
    timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds per LLM request attempt (left at the default: learned from the replies, up to 4x).",
    )
    max_retries: int = Field(
        default=5,
        ge=0,
        le=MAX_RETRIES,  # an integer: 2.5 is refused, not cut to 2
        description=f"Retries of a failed LLM request (0 to {MAX_RETRIES}); then it is missing.",
    )
    rpm: float | None = Field(default=None, gt=0, description="Requests per minute (default: no limit).")
    backoff_s: float = Field(default=0.5, gt=0, description="First backoff delay before a retry (doubling, jittered).")
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
        default=None, ge=1, description="hf: continuations per forward of the one-at-a-time shared-prefix method."
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

    def backend_kwargs(self) -> dict[str, object]:
        """The backend options that are set (keyword arguments of the backend's factory)."""
        return {k: v for k in _BACKEND_OPTIONS if (v := getattr(self, k)) is not None}

    def create_kwargs(self) -> CreateKwargs:
        """The keyword arguments of :func:`ragrade.llm.create_llm` (``replay_from`` goes to the backend)."""
        return CreateKwargs(
            base_url=self.base_url,
            cache=self.cache,
            cache_dir=self.cache_dir,
            concurrency=self.concurrency,
            rpm=self.rpm,
            timeout=self.timeout,
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            dry_run=self.dry_run,
        )

    def worker_dict(self) -> dict[str, object]:
        """The options that differ from the defaults, as JSON: what travels to worker processes (Ray actors
        included; ``LLMOptions.model_validate`` reads it back) and, without the throughput knobs, what a
        resume fingerprint holds (:meth:`answer_options`)."""
        return self.model_dump(mode="json", exclude_defaults=True)

    def answer_options(self) -> dict[str, object]:
        """The options that can change answers (not :data:`THROUGHPUT_OPTIONS`), as in resume fingerprints."""
        return {k: v for k, v in self.worker_dict().items() if k not in THROUGHPUT_OPTIONS}

    def stage_key(self) -> dict[str, object]:
        """The options as ``ragrade run`` stage keys hold them: the fields of the old ``[llm]`` table always,
        later fields only when set, never ``dry_run`` (a dry run must not invalidate finished stages)."""
        full = self.model_dump(mode="json", exclude={"dry_run"})
        extra = self.model_dump(mode="json", exclude_defaults=True, exclude={"dry_run", *_JOB_KEY_FIELDS})
        return {**{k: full[k] for k in _JOB_KEY_FIELDS}, **extra}


_WARNED: set[str] = set()


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
    message = (
        f"ragrade: warning: {where}: {', '.join(old)} at the top level is the old spelling; write "
        f"llm_options.{old[0]} (a [...llm_options] table; the old spelling is read until the next release)"
    )
    if message not in _WARNED:
        _WARNED.add(message)
        print(message, file=sys.stderr)
    return out


def option_default(name: str) -> object:
    """The default of option ``name`` (for help texts: ``(default 60.0)``)."""
    return LLMOptions.model_fields[name].default


__all__ = ["MAX_RETRIES", "THROUGHPUT_OPTIONS", "CreateKwargs", "LLMOptions", "lift_flat_options", "option_default"]
