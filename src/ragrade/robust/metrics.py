"""Labels and metrics of the robustness testbeds (default scoring), with Wilson 95% intervals.

Default rules (each fixes a defect of the original scorer; ``--scoring rgb``
keeps the original ones, see :mod:`ragrade.robust.rgb_scoring`):

- **correct**: every answer part has an alias in the response (normalised,
  boundary-aware: "70" is not found in "170", a one-digit answer is not found
  inside other numbers) and the response is not a refusal.
- **partial accuracy** (integration): matched parts / all parts, with a
  bootstrap interval over items (parts of one item are not independent).
- **rejection rate**: refusals / items; correct answers are never counted as
  refusals (they are reported as accuracy).
- **error detection rate**: responses reporting factual errors / items.
- **error correction rate**: responses that report the error *and* give the
  true answer (a refusal is not a correction) / responses that report it;
  undefined (null), not 0, when nothing was reported.
- every item whose generation failed stays in the denominators as a failure
  and is counted under ``failed``; skipped items (pool too small under
  ``--shortfall skip`` or ``--min-positives``) are counted under ``skipped``
  and are not items.
- counterfactual items whose fake answer equals the answer cannot test
  anything: they are left out of every metric and counted under
  ``untestable`` (``--scoring rgb`` keeps them, as the original did).
- ``flagged`` counts the records answered with documents whose documents are
  not what was asked (see :data:`FLAGGED_MEANING`); ``noise_ratio_actual_mean``
  is the noise share actually shown and ``noise_ratio_differs`` the records
  where it is not the requested ratio.
- judged metrics (Rej*, ED*) count the judge's yes verdicts among the
  responses it could read; replies it could not read are counted under
  ``judge_failed`` and are in no denominator. Failed generations stay in the
  judged denominators as non-refusals / non-detections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragrade.io import JSONObject
from ragrade.robust.detect import Detectors
from ragrade.robust.match import match_parts

FLAGGED_MEANING = (
    "flagged: answered-with-documents records whose documents are not what was asked "
    "(a pool too small, so padded or fewer documents, or an actual noise ratio other than the "
    "requested one)"
)
METRIC_KEYS = (
    "accuracy",
    "rejection_rate",
    "error_detection_rate",
    "error_correction_rate",
    "partial_accuracy",
    "accuracy_without_docs",
    "counterfactual_answer_rate",
    "rejection_rate_judged",
    "error_detection_rate_judged",
    "error_correction_rate_judged",
)


def metric(k: int, n: int) -> JSONObject:
    """A proportion with its Wilson 95% interval: ``{value, low, high, k, n, method}``; value None when n is 0."""
    from ragrade.stats import wilson_interval

    if n <= 0:
        return {"value": None, "low": None, "high": None, "k": int(k), "n": 0, "method": "wilson"}
    low, high = wilson_interval(int(k), int(n))
    return {"value": k / n, "low": low, "high": high, "k": int(k), "n": int(n), "method": "wilson"}


def ratio_metric(matched: Sequence[int], totals: Sequence[int], seed: int = 0) -> JSONObject:
    """Sum(matched) / sum(totals) with a percentile-bootstrap interval resampling items."""
    from ragrade.stats import bootstrap_ci

    k, n = int(sum(matched)), int(sum(totals))
    if n <= 0:
        return {"value": None, "low": None, "high": None, "k": k, "n": 0, "method": "bootstrap"}
    m = np.asarray(matched, dtype=np.float64)
    t = np.asarray(totals, dtype=np.float64)

    def stat(idx: np.ndarray) -> float:
        rows = idx.astype(np.int64)
        denom = float(t[rows].sum())
        return float(m[rows].sum()) / denom if denom else 0.0

    low, high = bootstrap_ci(np.arange(len(m), dtype=np.float64), stat, n_boot=2000, seed=seed)
    return {"value": k / n, "low": low, "high": high, "k": k, "n": n, "method": "bootstrap"}


def label_response(
    response: str | None,
    answer: Sequence[Sequence[str]],
    detectors: Detectors,
    fakeanswer: Sequence[Sequence[str]] = (),
    error: str | None = None,
) -> JSONObject:
    """The default labels of one response (see the module docstring); a failed call gets ``failed``."""
    if response is None:
        return {
            "failed": True,
            "error": error or "no response",
            "correct": False,
            "matched_parts": [False] * len(answer),
            "rejected": False,
            "error_detected": False,
            "error_corrected": False,
            "counterfactual_answer": False,
            "rejection_phrase": None,
            "error_phrase": None,
        }
    parts = match_parts(response, answer)
    rejection_phrase = detectors.rejection.matched(response)
    error_phrase = detectors.error.matched(response)
    rejected = rejection_phrase is not None
    correct = bool(parts) and all(parts) and not rejected
    fake = bool(fakeanswer) and all(match_parts(response, fakeanswer)) and not all(parts)
    return {
        "failed": False,
        "error": None,
        "correct": correct,
        "matched_parts": parts,
        "rejected": rejected,
        "error_detected": error_phrase is not None,
        "error_corrected": error_phrase is not None and correct,
        "counterfactual_answer": fake and not rejected,
        "rejection_phrase": rejection_phrase,
        "error_phrase": error_phrase,
    }


def count_label(records: Sequence[Mapping[str, Any]], label: str) -> int:
    """Records whose ``label`` is true."""
    return sum(bool(r["labels"].get(label)) for r in records)


def judged_records(records: Sequence[Mapping[str, Any]], task: str) -> tuple[list[Mapping[str, Any]], int]:
    """Records with a usable judge verdict for ``task`` (failed generations included); and judge failures."""
    usable: list[Mapping[str, object]] = []
    failures = 0
    for r in records:
        if r["labels"].get("failed"):
            usable.append(r)
            continue
        j = r.get("judge") or {}
        if j.get("task") != task:
            continue
        if j.get("verdict") is None:
            failures += 1
        else:
            usable.append(r)
    return usable, failures


def judge_yes(r: Mapping[str, Any]) -> bool:
    """The judge said yes to an answered record."""
    return bool((r.get("judge") or {}).get("verdict")) and not r["labels"].get("failed")


def default_common(
    records: Sequence[Mapping[str, Any]],
) -> tuple[JSONObject, list[Mapping[str, object]], list[Mapping[str, object]]]:
    """The counts every testbed reports, every metric key (None), and the answered records with and
    without documents that the testbed's metrics are computed over (default rules)."""
    active = [r for r in records if not r.get("skipped") and not r.get("untestable")]
    docs_all = [r for r in active if r["condition"] == "documents"]
    closed_all = [r for r in active if r["condition"] == "no_documents"]
    out: JSONObject = _counts(records, docs_all, closed_all)
    out["untestable"] = sum(
        1 for r in records if r.get("untestable") and not r.get("skipped") and r["condition"] == "documents"
    )
    # a failed request is missing, never wrong: every metric is over the answered records (n), failures counted
    docs = [r for r in docs_all if not r["labels"].get("failed")]
    closed = [r for r in closed_all if not r["labels"].get("failed")]
    out["n"], out["n_without_docs"] = len(docs), len(closed)
    out.update(dict.fromkeys(METRIC_KEYS))
    return out, docs, closed


def _counts(
    records: Sequence[Mapping[str, object]], docs: Sequence[Mapping[str, Any]], closed: Sequence[Mapping[str, Any]]
) -> JSONObject:
    actual = [r["noise_ratio_actual"] for r in docs if r.get("noise_ratio_actual") is not None]
    return {
        "n": len(docs),
        "failed": sum(bool(r["labels"].get("failed")) for r in docs),
        "skipped": sum(1 for r in records if r.get("skipped") and r["condition"] == "documents"),
        "flagged": sum(1 for r in docs if r.get("flags")),
        "n_without_docs": len(closed),
        "failed_without_docs": sum(bool(r["labels"].get("failed")) for r in closed),
        "noise_ratio_actual_mean": float(np.mean(actual)) if actual else None,
        "noise_ratio_differs": ratio_differs(docs),
        "judge_failed": 0,
    }


def ratio_differs(docs: Sequence[Mapping[str, Any]]) -> int:
    """Records whose actual noise ratio is not the requested one."""
    return sum(
        1
        for r in docs
        if r.get("noise_ratio_actual") is not None
        and abs(float(r["noise_ratio_actual"]) - float(r["noise_ratio"])) > 1e-9
    )


__all__ = [
    "FLAGGED_MEANING",
    "METRIC_KEYS",
    "count_label",
    "default_common",
    "judge_yes",
    "judged_records",
    "label_response",
    "metric",
    "ratio_differs",
    "ratio_metric",
]
