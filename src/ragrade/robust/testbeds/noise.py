"""Noise robustness: answer from documents mixed with noise at several ratios (all shared behaviour)."""

from __future__ import annotations

from ragrade.registry import register
from ragrade.robust.testbeds.base import BaseTestbed


@register("testbed", "noise")
class NoiseTestbed(BaseTestbed):
    """Accuracy when a share of the documents is noise; one table column per noise ratio."""

    name = "noise"
    description = "accuracy when a share of the documents is noise"
    data_kinds = ("base",)
    data_file = "base"
    default_ratios = (0.0, 0.2, 0.4, 0.6, 0.8)
    metrics = ("accuracy", "rejection_rate")


__all__ = ["NoiseTestbed"]
