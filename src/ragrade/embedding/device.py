"""Where a local model runs: ``device`` and ``dtype`` resolved and checked before any weights are loaded.

``auto`` (the default) picks CUDA when torch sees a GPU, else Apple's MPS, else the CPU; ``auto`` for the
dtype picks bfloat16 on a GPU that supports it (float16 on one that does not), float32 on the CPU and MPS.
A device or dtype that cannot run here is a :class:`~ragrade.errors.ConfigError` naming what is
available (one line, exit 2). The hf backend and the local embedding models use it: it lives here, in the
lower of the two model-access layers (embedding below llm), and :mod:`ragrade.llm.device` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragrade.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "float32", "bfloat16", "float16")
_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32"}


@dataclass(frozen=True)
class Placement:
    """A resolved device (``cpu``, ``cuda``, ``cuda:1``, ``mps``) and dtype name, with what was asked."""

    device: str
    dtype: str
    asked_device: str
    asked_dtype: str

    @property
    def kind(self) -> str:
        """The device type without an index (``cuda:1`` -> ``cuda``)."""
        return self.device.split(":", 1)[0]

    def describe(self) -> dict[str, str]:
        """For manifests: what was asked and what it resolved to."""
        return {"device": self.device, "dtype": self.dtype, "asked_device": self.asked_device,
                "asked_dtype": self.asked_dtype}  # fmt: skip


def available_devices(torch: Any) -> list[str]:
    """The device types torch can use in this process (``cpu`` always)."""
    out = []
    if torch.cuda.is_available():
        out.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return [*out, "cpu"]


def _check_name(value: str, choices: tuple[str, ...], what: str) -> str:
    name = _ALIASES.get(value.strip().lower(), value.strip().lower())
    base = name.split(":", 1)[0] if what == "device" else name
    if base not in choices:
        raise ConfigError(f"unknown {what} '{value}'; valid choices: {', '.join(choices)}")
    return name


def check_names(device: str | None, dtype: str | None) -> None:
    """Fail on a device or dtype name that does not exist anywhere (no torch import)."""
    if device is not None:
        _check_name(device, DEVICES, "device")
    if dtype is not None:
        _check_name(dtype, DTYPES, "dtype")


def resolve(device: str | None, dtype: str | None, torch: Any, what: str = "hf") -> Placement:
    """The placement of a model asked to run on ``device`` in ``dtype`` (None: ``auto``), checked here."""
    asked_device = device or "auto"
    asked_dtype = dtype or "auto"
    dev = _check_name(asked_device, DEVICES, "device")
    dt = _check_name(asked_dtype, DTYPES, "dtype")
    here = available_devices(torch)
    if dev == "auto":
        dev = here[0]
    kind = dev.split(":", 1)[0]
    if kind not in here:
        raise ConfigError(
            f"{what}: device '{asked_device}' is not available here (available: {', '.join(here)}); "
            "use $device auto or one of those"
        )
    if kind == "cuda" and ":" in dev:
        index = dev.split(":", 1)[1]
        if not index.isdigit() or int(index) >= torch.cuda.device_count():
            raise ConfigError(f"{what}: no GPU '{dev}' (this machine has {torch.cuda.device_count()} GPU(s))")
    bf16 = kind == "cuda" and bool(torch.cuda.is_bf16_supported())
    if dt == "auto":
        dt = ("bfloat16" if bf16 else "float16") if kind == "cuda" else "float32"
    if dt == "bfloat16" and kind == "cuda" and not bf16:
        raise ConfigError(f"{what}: this GPU cannot run bfloat16; use $dtype float16 or float32")
    return Placement(dev, dt, asked_device, asked_dtype)


__all__ = ["DEVICES", "DTYPES", "Placement", "available_devices", "check_names", "resolve"]
