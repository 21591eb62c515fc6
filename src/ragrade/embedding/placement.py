"""Where a local embedding model runs: ``device`` resolved by the rule the ``hf`` LLM backend uses.

``auto`` (the default, ``None``) means CUDA when torch sees a GPU, else Apple's MPS, else the CPU
(:func:`ragrade.embedding.device.resolve`, the one definition, which ``hf/`` uses). A device that is not there is a
:class:`~ragrade.errors.ConfigError` naming the devices that are (one line, exit 2 from the CLI),
raised before any model is loaded. The device used is printed once per model and device, and
recorded in the embedder's ``describe()`` (so in the index manifest).

Importing torch only to learn that there is no GPU costs seconds on a small machine, and the ONNX path
never needs torch: ``auto`` skips the import (and picks the CPU) where no accelerator can be present --
torch not imported yet, no NVIDIA or AMD GPU driver visible, not macOS.
"""

from __future__ import annotations

import os
import sys
import threading

from ragrade.deps import require
from ragrade.embedding.device import check_names, resolve

_shown: set[tuple[str, str]] = set()
_shown_lock = threading.Lock()


def _no_accelerator_possible() -> bool:
    """True when no GPU can be visible to torch here (checked without importing torch)."""
    if "torch" in sys.modules or sys.platform == "darwin":
        return False
    return not any(os.path.exists(p) for p in ("/proc/driver/nvidia", "/dev/nvidia0", "/dev/kfd"))


def embedding_device(device: str | None, what: str) -> str:
    """The device ``what`` (an embedder's name, for messages) runs on: ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

    ``device`` is spelt as the LLM option (``auto``/None, ``cpu``, ``cuda``, ``cuda:N``, ``mps``).
    """
    check_names(device, None)  # an unknown name fails without importing torch
    asked = (device or "auto").strip().lower()
    if asked == "cpu" or (asked == "auto" and _no_accelerator_possible()):
        return "cpu"
    torch = require("torch", purpose="local embedding models")
    return resolve(device, None, torch, what).device


def show_device(name: str, device: str) -> None:
    """Print once per process (per embedder and device) where an embedding model runs."""
    with _shown_lock:
        if (name, device) in _shown:
            return
        _shown.add((name, device))
    print(f"ragrade: embedder {name} runs on {device}", file=sys.stderr)


__all__ = ["embedding_device", "show_device"]
