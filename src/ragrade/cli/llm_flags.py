"""The LLM flags every verb that talks to an LLM offers, declared once, and the config layer they make.

``--llm-base-url``, ``--concurrency``, ``--timeout``, ``--max-retries``, ``--no-cache``, ``--device``,
``--dtype`` and the root
``--dry-run`` fill a :class:`~ragrade.llm.options.LLMOptions` layer (:meth:`LLMFlags.llm_layer`; ``None``
means not given), merged over the config file's options by :func:`ragrade.config.build_config`. The help
texts quote the model's defaults, so they cannot drift from it.

A verb offers all seven by deriving its flags dataclass (:mod:`ragrade.cli.flags`) from :class:`LLMFlags`;
a verb that offers only some of them (``ask``, ``llm probe``) names their ``...Option`` types and builds its
layer with :func:`llm_layer`.

Only typer and pydantic are imported here (``ragrade --help`` must stay light).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from ragrade.cli.common import dry_run_requested
from ragrade.llm.options import MAX_RETRIES, option_default

if TYPE_CHECKING:
    from ragrade.llm.options import LLMOptions

#: where ``--help`` lists the LLM flags: in a panel of their own, after the command's other options
LLM_PANEL = "LLM options"

LlmBaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--llm-base-url",
        "--base-url",
        rich_help_panel=LLM_PANEL,
        help="Base URL of an OpenAI-compatible server (default: $OPENAI_BASE_URL, else the OpenAI API).",
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency",
        rich_help_panel=LLM_PANEL,
        min=1,
        help=f"LLM requests in flight to a server (default {option_default('concurrency')}); in-process hf/ "
        "batches what every shard sends instead.",
    ),
]
DeviceOption = Annotated[
    str | None,
    typer.Option(
        "--device",
        rich_help_panel=LLM_PANEL,
        help="Where hf/ models run: auto (default: CUDA, else Apple MPS, else the CPU), cpu, cuda, cuda:N, mps.",
    ),
]
DtypeOption = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        rich_help_panel=LLM_PANEL,
        help="hf/ weights: auto (default: bfloat16 on a GPU, float32 on the CPU), float32, bfloat16, float16.",
    ),
]
NoCacheOption = Annotated[
    bool, typer.Option("--no-cache", help="Do not use the LLM response cache.", rich_help_panel=LLM_PANEL)
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        rich_help_panel=LLM_PANEL,
        min=0.1,
        help=f"Seconds per LLM request attempt (default {option_default('timeout'):g}); when not given, learned "
        "from the server's replies, up to 4 times that.",
    ),
]
MaxRetriesOption = Annotated[
    int | None,
    typer.Option(
        "--max-retries",
        rich_help_panel=LLM_PANEL,
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


@dataclass(frozen=True, kw_only=True)
class LLMFlags:
    """The seven LLM flags as typed values: a verb's flags dataclass derives from it to offer them all."""

    llm_base_url: LlmBaseUrlOption = None
    concurrency: ConcurrencyOption = None
    no_cache: NoCacheOption = False
    timeout: TimeoutOption = None
    max_retries: MaxRetriesOption = None
    device: DeviceOption = None
    dtype: DtypeOption = None

    def llm_layer(self) -> dict[str, object]:
        """The :class:`~ragrade.llm.options.LLMOptions` layer of these flags (only what was given) and of the
        root ``--dry-run``: merged over a config file's options, never replacing what the flags left out."""
        return llm_layer(
            llm_base_url=self.llm_base_url, concurrency=self.concurrency, timeout=self.timeout,
            max_retries=self.max_retries, no_cache=self.no_cache, device=self.device, dtype=self.dtype,
        )  # fmt: skip

    def llm_options(self) -> LLMOptions:
        """The LLM options of these flags over the defaults (for a verb that reads no config file)."""
        from ragrade.config import build_config
        from ragrade.llm.options import LLMOptions

        return build_config(LLMOptions, self.llm_layer(), source="LLM options")


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
    "LLM_PANEL",
    "ConcurrencyOption",
    "DeviceOption",
    "DtypeOption",
    "LLMFlags",
    "LlmBaseUrlOption",
    "MaxRetriesOption",
    "NoCacheOption",
    "TimeoutOption",
    "llm_flag_layer",
    "llm_layer",
]
