"""Counterfactual robustness: documents state a wrong answer; the model should detect and correct it."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ragrade.registry import register
from ragrade.robust.build import BuildOptions, Doc, first_noise, noise_count
from ragrade.robust.metrics import count_label, judge_yes, judged_records, metric
from ragrade.robust.rgb_scoring import rgb_judged
from ragrade.robust.testbeds.base import BaseTestbed, Metrics

if TYPE_CHECKING:
    from ragrade.robust.data import RGBItem


def rgb_counterfactual_docs(
    item: RGBItem, rng: random.Random, n_docs: int, neg_num: int, correct_ratio: float
) -> list[Doc]:
    """Original counterfactual selection: sampled corrupted positives, optional correct ones, first noise."""
    correct_num = math.ceil(n_docs * correct_ratio)
    pos_num = n_docs - neg_num - correct_num
    indexes = list(range(len(item.positive)))
    selected = rng.sample(indexes, min(len(indexes), pos_num))
    docs = [Doc("positive_wrong", i, item.positive_wrong[i]) for i in selected]
    remain = [i for i in indexes if i not in selected]
    if correct_num > 0 and remain:
        docs += [Doc("positive", i, item.positive[i]) for i in rng.sample(remain, min(len(remain), correct_num))]
    return docs + first_noise(item, neg_num)


@register("testbed", "counterfactual")
class CounterfactualTestbed(BaseTestbed):
    """Acc (closed book), Acc_doc, ED, CR (and ED*, CR* with a judge) on corrupted positives."""

    name = "counterfactual"
    description = "error detection and correction when documents contain factual errors"
    data_kinds = ("counterfactual",)
    data_file = "counterfactual"
    default_ratios = (0.0,)
    metrics = (
        "accuracy",
        "accuracy_without_docs",
        "error_detection_rate",
        "error_correction_rate",
        "counterfactual_answer_rate",
        "rejection_rate",
    )
    judge_task = "error"
    table_columns = (
        ("Acc", "accuracy_without_docs"),
        ("Acc_doc", "accuracy"),
        ("ED", "error_detection_rate"),
        ("ED*", "error_detection_rate_judged"),
        ("CR", "error_correction_rate"),
    )
    pad_with_noise = False  # too few corrupted passages: fewer documents, so ratio 0 stays noise-free
    short_note = "fewer documents (counterfactual passages are not replaced by noise)"
    asks_closed_book = True
    strict_ratio_notes = True

    def pool_size(self, item: RGBItem) -> int:
        """The corrupted positives."""
        return len(item.positive_wrong)

    def correct_count(self, opts: BuildOptions) -> int:
        """``--correct-ratio`` of the documents are uncorrupted positives."""
        return noise_count(opts.n_docs, opts.correct_ratio)

    def positives(self, item: RGBItem, count: int, n_correct: int) -> list[Doc]:
        """The first ``count`` corrupted positives, then ``n_correct`` uncorrupted ones not already used."""
        wrong = [Doc("positive_wrong", i, t) for i, t in enumerate(item.positive_wrong[:count])]
        used = {d.index for d in wrong}
        spare = [i for i in range(len(item.positive)) if i not in used]
        return wrong + [Doc("positive", i, item.positive[i]) for i in spare[:n_correct]]

    def rgb_docs(
        self, item: RGBItem, rng: random.Random, n_docs: int, ratio: float, neg_num: int, correct_ratio: float
    ) -> list[Doc]:
        """See :func:`rgb_counterfactual_docs`."""
        return rgb_counterfactual_docs(item, rng, n_docs, neg_num, correct_ratio)

    def aggregate_default(
        self, out: Metrics, docs: Sequence[Mapping[str, object]], closed: Sequence[Mapping[str, object]], seed: int
    ) -> None:
        """ED, CR (undefined when nothing was reported), the fake-answer rate, closed-book Acc; ED*, CR*."""
        super().aggregate_default(out, docs, closed, seed)
        n = len(docs)
        detected = count_label(docs, "error_detected")
        out["error_detection_rate"] = metric(detected, n)
        out["error_correction_rate"] = metric(count_label(docs, "error_corrected"), detected)
        out["counterfactual_answer_rate"] = metric(count_label(docs, "counterfactual_answer"), n)
        if closed:
            out["accuracy_without_docs"] = metric(count_label(closed, "correct"), len(closed))
        if not any(r.get("judge") for r in docs):
            return
        usable, failures = judged_records(docs, "error")
        yes = [r for r in usable if judge_yes(r)]
        out["error_detection_rate_judged"] = metric(len(yes), len(usable))
        out["error_correction_rate_judged"] = metric(sum(bool(r["labels"].get("correct")) for r in yes), len(yes))
        out["judge_failed"] = failures

    def aggregate_rgb(
        self, out: Metrics, docs: Sequence[Mapping[str, Any]], closed: Sequence[Mapping[str, Any]]
    ) -> None:
        """Original rules 6, 7 and 9: a refusal counts as a correction; CR is 0 when nothing was reported."""
        super().aggregate_rgb(out, docs, closed)
        n = len(docs)
        fact_tt = sum(bool(r["labels"]["error_detected"]) for r in docs)
        correct_tt = sum(bool(r["labels"]["error_corrected"]) for r in docs)
        out["error_detection_rate"] = metric(fact_tt, n)
        cr = metric(correct_tt, fact_tt)
        if fact_tt == 0:  # rule 7: reported as 0 rather than undefined
            cr["value"] = 0.0
        out["error_correction_rate"] = cr
        if closed:
            out["accuracy_without_docs"] = metric(sum(bool(r["labels"]["correct"]) for r in closed), len(closed))
        judged = rgb_judged(docs, "error")
        if not judged:
            return
        yes = [r for r in judged if r["judge"].get("verdict") is True]
        out["error_detection_rate_judged"] = metric(len(yes), len(judged))
        ok = sum(1 for r in yes if 0 not in r["labels"]["rgb_labels"] and 1 in r["labels"]["rgb_labels"])
        cr = metric(ok, len(yes))
        if not yes:
            cr["value"] = 0.0
        out["error_correction_rate_judged"] = cr


__all__ = ["CounterfactualTestbed", "rgb_counterfactual_docs"]
