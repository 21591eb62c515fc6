"""Where a local model runs: the one definition is :mod:`ragrade.embedding.device` (the embedding models use it
too, and ``embedding`` sits below ``llm`` in the import layers); re-exported here for the hf backend."""

from __future__ import annotations

from ragrade.embedding.device import DEVICES, DTYPES, Placement, available_devices, check_names, resolve

__all__ = ["DEVICES", "DTYPES", "Placement", "available_devices", "check_names", "resolve"]
