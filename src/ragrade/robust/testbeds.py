"""The four testbeds, registered under kind ``testbed`` (names equal the CLI strings)."""

from __future__ import annotations

from dataclasses import dataclass

from ragrade.registry import register


@dataclass(frozen=True)
class Testbed:
    """What a testbed needs and reports.

    ``data_kinds``: record shapes it accepts; ``default_ratios``: noise ratios
    run when none are given (None: the ratio is fixed by the testbed);
    ``metrics``: the metrics.json keys it fills (the others are null).
    """

    name: str
    data_kinds: tuple[str, ...]
    default_ratios: tuple[float, ...]
    ratios_fixed: bool
    metrics: tuple[str, ...]
    description: str


@register("testbed", "noise")
def noise() -> Testbed:
    """Noise robustness: answer from documents mixed with noise at several ratios."""
    return Testbed("noise", ("base",), (0.0, 0.2, 0.4, 0.6, 0.8), False,
                   ("accuracy", "rejection_rate"),
                   "accuracy when a share of the documents is noise")


@register("testbed", "negative")
def negative() -> Testbed:
    """Negative rejection: only noise documents; the model should decline."""
    return Testbed("negative", ("base", "integration", "counterfactual"), (1.0,), True,
                   ("rejection_rate", "accuracy"),
                   "rejection rate when no document holds the answer")


@register("testbed", "integration")
def integration() -> Testbed:
    """Information integration: answers whose parts sit in different documents."""
    return Testbed("integration", ("integration",), (0.0, 0.2, 0.4), False,
                   ("accuracy", "partial_accuracy", "rejection_rate"),
                   "accuracy on questions needing several documents")


@register("testbed", "counterfactual")
def counterfactual() -> Testbed:
    """Counterfactual robustness: documents state a wrong answer; detect and correct it."""
    return Testbed("counterfactual", ("counterfactual",), (0.0,), False,
                   ("accuracy", "accuracy_without_docs", "error_detection_rate", "error_correction_rate",
                    "counterfactual_answer_rate", "rejection_rate"),
                   "error detection and correction when documents contain factual errors")


TESTBEDS = ("noise", "negative", "integration", "counterfactual")


def get_testbed(name: str) -> Testbed:
    """The testbed called ``name`` (ConfigError with the choices otherwise)."""
    from ragrade.registry import create

    tb: Testbed = create("testbed", name)
    return tb


__all__ = ["TESTBEDS", "Testbed", "counterfactual", "get_testbed", "integration", "negative", "noise"]
