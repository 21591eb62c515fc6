"""Information integration: answers whose parts sit in different documents (one group of positives per part)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragrade.registry import register
from ragrade.robust.build import BuildOptions, Doc, Instance, first_noise
from ragrade.robust.metrics import ratio_metric
from ragrade.robust.testbeds.base import BaseTestbed, Metrics

if TYPE_CHECKING:
    from ragrade.robust.data import RGBItem


def round_robin(groups: tuple[tuple[str, ...], ...], count: int) -> list[Doc]:
    """One document per group in turn, depth by depth, until ``count`` documents."""
    docs: list[Doc] = []
    depth = 0
    while len(docs) < count and any(depth < len(g) for g in groups):
        for gi, g in enumerate(groups):
            if depth < len(g) and len(docs) < count:
                docs.append(Doc("positive", depth, g[depth], group=gi))
        depth += 1
    return docs


def rgb_integration_docs(item: RGBItem, rng: random.Random, n_docs: int, pos_num: int) -> list[Doc]:
    """Original integration selection: first of each shuffled group, round-robin to ``pos_num``, then noise."""
    orders = []
    for g in item.positive_groups:
        order = list(range(len(g)))
        rng.shuffle(order)
        orders.append(order)
    groups = item.positive_groups
    docs = [Doc("positive", o[0], g[o[0]], group=gi) for gi, (g, o) in enumerate(zip(groups, orders, strict=True))]
    if len(docs) < pos_num:
        maxnum = max(len(g) for g in groups)
        for i in range(1, maxnum):
            for gi, g in enumerate(groups):
                if len(g) > i:
                    docs.append(Doc("positive", orders[gi][i], g[orders[gi][i]], group=gi))
                    if len(docs) == pos_num:
                        break
            if len(docs) == pos_num:
                break
    neg_num = n_docs - len(docs)
    return docs + first_noise(item, neg_num)


@register("testbed", "integration")
class IntegrationTestbed(BaseTestbed):
    """Accuracy (all parts found) and partial accuracy (parts found / parts) per noise ratio."""

    name = "integration"
    description = "accuracy on questions needing several documents"
    data_kinds = ("integration",)
    data_file = "integration"
    default_ratios = (0.0, 0.2, 0.4)
    ratio_cap = 0.4  # the paper's integration table stops at 0.4
    metrics = ("accuracy", "partial_accuracy", "rejection_rate")

    def supporting_passages(self, item: RGBItem) -> int:
        """The smallest group: every part needs a document."""
        return min((len(g) for g in item.positive_groups), default=0)

    def pool_size(self, item: RGBItem) -> int:
        """All groups together."""
        return sum(len(g) for g in item.positive_groups)

    def plan(self, inst: Instance, want_noise: int, want_pos: int, opts: BuildOptions) -> tuple[int, int] | None:
        """Skip items with an empty group; raise the positives to one per group (or skip under ``skip``)."""
        groups = inst.item.positive_groups
        empty = [i + 1 for i, g in enumerate(groups) if not g]
        if empty:
            inst.skipped = f"answer part(s) {empty} have no positive documents"
            return None
        if want_pos < len(groups):
            msg = f"needs one document per answer part ({len(groups)}) but the ratio leaves {want_pos}"
            if opts.shortfall == "skip":
                inst.skipped = msg
                return None
            inst.flags.append(msg + "; raised the positives")
            want_noise -= len(groups) - want_pos
            want_pos = len(groups)
        return want_noise, want_pos

    def positives(self, item: RGBItem, count: int, n_correct: int) -> list[Doc]:
        """One document per group first (round-robin)."""
        return round_robin(item.positive_groups, count)

    def rgb_docs(
        self, item: RGBItem, rng: random.Random, n_docs: int, ratio: float, neg_num: int, correct_ratio: float
    ) -> list[Doc]:
        """See :func:`rgb_integration_docs`."""
        return rgb_integration_docs(item, rng, n_docs, n_docs - neg_num)

    def aggregate_default(
        self, out: Metrics, docs: Sequence[Mapping[str, Any]], closed: Sequence[Mapping[str, Any]], seed: int
    ) -> None:
        """Accuracy, rejection rate and partial accuracy (bootstrap interval over items)."""
        super().aggregate_default(out, docs, closed, seed)
        matched = [sum(bool(p) for p in r["labels"]["matched_parts"]) for r in docs]
        totals = [len(r["labels"]["matched_parts"]) for r in docs]
        out["partial_accuracy"] = ratio_metric(matched, totals, seed=seed)


__all__ = ["IntegrationTestbed", "rgb_integration_docs", "round_robin"]
