"""Negative rejection: only noise documents; the model should decline (Rej, and Rej* with a judge)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragrade.registry import register
from ragrade.robust.metrics import judge_yes, judged_records, metric
from ragrade.robust.rgb_scoring import rgb_judged
from ragrade.robust.testbeds.base import BaseTestbed, Metrics


@register("testbed", "negative")
class NegativeTestbed(BaseTestbed):
    """Every document is noise (ratio fixed at 1); refusals are what counts."""

    name = "negative"
    description = "rejection rate when no document holds the answer"
    data_kinds = ("base", "integration", "counterfactual")
    data_file = "base"
    default_ratios = (1.0,)
    ratios_fixed = True
    metrics = ("rejection_rate", "accuracy")
    judge_task = "rejection"
    table_columns = (("Rej", "rejection_rate"), ("Rej*", "rejection_rate_judged"))
    noise_only = True
    pad_with_noise = False

    def aggregate_default(
        self, out: Metrics, docs: Sequence[Mapping[str, object]], closed: Sequence[Mapping[str, object]], seed: int
    ) -> None:
        """Accuracy and rejection rate; Rej*: the judge's yes verdicts among the replies it could read."""
        super().aggregate_default(out, docs, closed, seed)
        if not any(r.get("judge") for r in docs):
            return
        usable, failures = judged_records(docs, "rejection")
        out["rejection_rate_judged"] = metric(sum(judge_yes(r) for r in usable), len(usable))
        out["judge_failed"] = failures

    def aggregate_rgb(
        self, out: Metrics, docs: Sequence[Mapping[str, Any]], closed: Sequence[Mapping[str, object]]
    ) -> None:
        """Original rule 6: refusals and correct answers share one counter; rule 9 for Rej*."""
        tt = sum(bool(r["labels"]["rejected"]) or bool(r["labels"]["correct"]) for r in docs)
        out["rejection_rate"] = metric(tt, len(docs))
        judged = rgb_judged(docs, "rejection")
        if judged:
            yes = [r for r in judged if r["judge"].get("verdict") is True]
            out["rejection_rate_judged"] = metric(len(yes), len(judged))


__all__ = ["NegativeTestbed"]
