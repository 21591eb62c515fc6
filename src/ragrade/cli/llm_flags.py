"""The LLM flags every verb that talks to an LLM offers, declared once, and the config layer they make.

``--llm-base-url``, ``--concurrency``, ``--timeout``, ``--max-retries``, ``--no-cache``, ``--device``,
``--dtype`` and the root
``--dry-run`` fill a :class:`~ragrade.llm.options.LLMOptions` layer (:func:`llm_flag_layer`; ``None``
means not given), merged over the config file's options by :func:`ragrade.config.build_config`. The help
texts quote the model's defaults, so they cannot drift from it.

Only typer and pydantic are imported here (``ragrade --help`` must stay light).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import typer

from ragrade.cli.common import dry_run_requested
from ragrade.llm.options import MAX_RETRIES, option_default

LlmBaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--llm-base-url",
        "--base-url",
        help="Base URL of an OpenAI-compatible server (default: $OPENAI_BASE_URL, else the OpenAI API).",
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        min=1,
        help=f"LLM requests in flight to a server (default {option_default('concurrency')}); in-process hf/ "
        "batches what every shard sends instead.",
    ),
]
DeviceOption = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="Where hf/ models run: auto (default: CUDA, else Apple MPS, else the CPU), cpu, cuda, cuda:N, mps.",
    ),
]
DtypeOption = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        help="hf/ weights: auto (default: bfloat16 on a GPU, float32 on the CPU), float32, bfloat16, float16.",
    ),
]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Do not use the LLM response cache.")]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=0.1,
        help=f"Seconds per LLM request attempt (default {option_default('timeout'):g}); when not given, learned "
        "from the server's replies, up to 4 times that.",
    ),
]
MaxRetriesOption = Annotated[
    int | None,
    typer.Option(
        "--max-retries",
        min=0,
        max=MAX_RETRIES,
        help=f"Retries of a failed LLM request (default {option_default('max_retries')}); then it is missing.",
    ),
]


def llm_layer(
    *,
    llm_base_url: str | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    no_cache: bool = False,
    device: str | None = None,
    dtype: str | None = None,
) -> dict[str, object]:
    """The :class:`~ragrade.llm.options.LLMOptions` layer of the LLM flags (a command's typed values) and the
    root ``--dry-run``; only what was given (an absent flag never overrides a config file)."""
    layer = {
        "base_url": llm_base_url,
        "concurrency": concurrency,
        "timeout": timeout,
        "max_retries": max_retries,
        "cache": False if no_cache else None,
        "device": device,
        "dtype": dtype,
        "dry_run": dry_run_requested() or None,  # `ragrade --dry-run`: shipped to every worker with the options
    }
    return {k: v for k, v in layer.items() if v is not None}


def llm_flag_layer(params: Mapping[str, object]) -> dict[str, object]:
    """:func:`llm_layer` of a command's parsed parameters by name (``llm_base_url``, ``concurrency``,
    ``timeout``, ``max_retries``, ``no_cache``, ``device``, ``dtype``); prefer :func:`llm_layer`, which takes
    them typed."""

    def text(name: str) -> str | None:
        value = params.get(name)
        return value if isinstance(value, str) else None

    def number(name: str) -> float | None:
        value = params.get(name)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    base_url, concurrency, retries = params.get("llm_base_url"), number("concurrency"), number("max_retries")
    return llm_layer(
        llm_base_url=base_url if isinstance(base_url, str) else None,
        concurrency=None if concurrency is None else int(concurrency),
        timeout=number("timeout"),
        max_retries=None if retries is None else int(retries),
        no_cache=bool(params.get("no_cache")),
        device=text("device"),
        dtype=text("dtype"),
    )


__all__ = [
    "ConcurrencyOption",
    "DeviceOption",
    "DtypeOption",
    "LlmBaseUrlOption",
    "MaxRetriesOption",
    "NoCacheOption",
    "TimeoutOption",
    "llm_flag_layer",
    "llm_layer",
]
