"""``--scoring rgb``: the original benchmark scorer's rules, reproduced on purpose, defects included.

Use it only to compare with published numbers. Each rule below is stated in
our words; the default scoring (:mod:`ragrade.robust.metrics`) fixes them.

1. Chinese runs delete every ASCII space from the response before any check
   (the answers keep theirs, so an answer with a space can never match).
2. Refusal: the response contains "insufficient information" or "信息不足",
   case-sensitively, on the raw (not lower-cased) response. A refusal replaces
   the per-part labels with the single label -1.
3. Otherwise each answer part is labelled 1 when one of its aliases, lower-cased,
   is a raw substring of the lower-cased response ("70" is found in "170";
   a one-digit answer is found in almost anything), else 0.
4. Error report: the raw response contains "factual errors" or "事实性错误"
   (case-sensitive).
5. Correct: no part labelled 0 and at least one labelled 1.
6. Accuracy: correct items / items. At noise ratio 1 (negative rejection)
   the same counter also counts refused items, so the published rejection
   rate adds correct answers to refusals.
7. Error detection rate: error reports / items. Error correction rate: error
   reports with no part labelled 0 / error reports; a refusal (label -1) has
   no 0, so a refusal counts as a correction; 0 (not undefined) when nothing
   was reported.
8. Items whose generation raised an error are dropped from every denominator.
9. Judged metrics: judged refusals (or detections) / judged items; any judge
   reply that is not a clear yes counts as a no (the original checked for a
   phrase in free text); judge errors drop the item. The judged correction
   rate needs rule 5 (a refusal is not a correction there).

Intervals are still Wilson intervals on the same k and n.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragrade.io import JSONObject
from ragrade.robust.metrics import METRIC_KEYS, ratio_differs

RGB_REFUSAL = ("信息不足", "insufficient information")
RGB_ERROR = ("事实性错误", "factual errors")


def rgb_part_labels(prediction: str, answer: Sequence[Sequence[str]]) -> list[int]:
    """Rule 3: one 0/1 label per part, lower-cased raw substring matching."""
    pred = prediction.lower()
    return [int(any(alias.lower() in pred for alias in aliases)) for aliases in answer]


def rgb_label_response(
    response: str | None, answer: Sequence[Sequence[str]], lang: str, error: str | None = None
) -> JSONObject:
    """Labels of one response under the original rules (1-5)."""
    if response is None:
        return {
            "failed": True,
            "error": error or "no response",
            "rgb_labels": [],
            "factlabel": 0,
            "correct": False,
            "rejected": False,
            "error_detected": False,
            "error_corrected": False,
        }
    prediction = response.replace(" ", "") if lang == "zh" else response
    if any(p in prediction for p in RGB_REFUSAL):
        labels = [-1]
    else:
        labels = rgb_part_labels(prediction, answer)
    factlabel = int(any(p in prediction for p in RGB_ERROR))
    correct = 0 not in labels and 1 in labels
    return {
        "failed": False,
        "error": None,
        "rgb_labels": labels,
        "factlabel": factlabel,
        "correct": correct,
        "rejected": labels == [-1],
        "error_detected": factlabel == 1,
        "error_corrected": factlabel == 1 and 0 not in labels,
    }


def rgb_common(
    records: Sequence[Mapping[str, Any]],
) -> tuple[JSONObject, list[Mapping[str, object]], list[Mapping[str, object]]]:
    """The counts every testbed reports under the original rules (rule 8: failed items dropped), every
    metric key (None), and the records with and without documents the metrics are computed over."""
    kept_all = [r for r in records if not r.get("skipped")]
    docs_all = [r for r in kept_all if r["condition"] == "documents"]
    closed_all = [r for r in kept_all if r["condition"] == "no_documents"]
    docs = [r for r in docs_all if not r["labels"].get("failed")]  # rule 8
    closed = [r for r in closed_all if not r["labels"].get("failed")]
    actual = [r["noise_ratio_actual"] for r in docs if r.get("noise_ratio_actual") is not None]
    out: JSONObject = {
        "n": len(docs),
        "failed": len(docs_all) - len(docs),
        "skipped": sum(1 for r in records if r.get("skipped") and r["condition"] == "documents"),
        "flagged": sum(1 for r in docs if r.get("flags")),
        "n_without_docs": len(closed),
        "failed_without_docs": len(closed_all) - len(closed),
        "noise_ratio_actual_mean": float(np.mean(actual)) if actual else None,
        "noise_ratio_differs": ratio_differs(docs),
        "untestable": sum(1 for r in docs if r.get("untestable")),  # counted, kept (the original kept them)
        "judge_failed": 0,
        "dropped_failed_items": True,
    }
    out.update(dict.fromkeys(METRIC_KEYS))
    return out, docs, closed


def rgb_judged(docs: Sequence[Mapping[str, Any]], task: str) -> list[Mapping[str, Any]]:
    """Rule 9: the records the judge answered for ``task`` (judge errors drop the item)."""
    return [r for r in docs if (r.get("judge") or {}).get("task") == task and not r["judge"].get("error")]


__all__ = [
    "RGB_ERROR",
    "RGB_REFUSAL",
    "rgb_common",
    "rgb_judged",
    "rgb_label_response",
    "rgb_part_labels",
]
