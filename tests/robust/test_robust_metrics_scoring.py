"""Hand-worked metric values, default scoring and the original (--scoring rgb) rules on the same cases."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support.typed import narrow

from ragrade.llm.phrases import ERROR_SENTENCE, REJECTION_SENTENCE
from ragrade.robust.detect import build_detectors
from ragrade.robust.metrics import metric, ratio_metric
from ragrade.robust.rgb_scoring import rgb_label_response
from ragrade.robust.run import label_records, summarise

RGB_REFUSAL = "I can not answer the question because of the insufficient information in documents."
RGB_ERROR = "There are factual errors in the provided documents."


def rec(
    response: str | None,
    answer: list[list[str]],
    *,
    condition: str = "documents",
    ratio: float = 0.0,
    fake: list[list[str]] | None = None,
    judge: Any = None,
    key: str = "",
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "key": key or f"{response}|{condition}|{ratio}",
        "condition": condition,
        "noise_ratio": ratio,
        "noise_ratio_actual": ratio,
        "answer": answer,
        "response": response,
        "failed": response is None,
        "error": "HTTP 500" if response is None else None,
        "flags": [],
        "skipped": None,
    }
    if fake:
        r["fakeanswer"] = fake
    if judge is not None:
        r["judge"] = judge
    return r


def score(
    records: list[dict[str, Any]], testbed: str, scoring: str, lang: str = "en", ratios: tuple[float, ...] = (0.0,)
) -> dict[str, Any]:
    label_records(records, scoring, build_detectors(), lang)
    return summarise(records, testbed, scoring, list(ratios))


def value(m: dict[str, Any], key: str) -> float | None:
    return m[key]["value"] if m[key] is not None else None


def test_metric_is_a_wilson_interval() -> None:
    m = metric(1, 5)
    assert (m["k"], m["n"], m["value"]) == (1, 5, 0.2)
    # by hand: centre (0.2 + 1.96^2/10) / (1 + 1.96^2/5) = 0.3303, half 1.96*sqrt(.032+.0384)/1.7683 = 0.2941
    assert m["low"] == pytest.approx(0.0362, abs=2e-4)
    assert m["high"] == pytest.approx(0.6245, abs=2e-4)
    assert metric(0, 0)["value"] is None


def test_ratio_metric_pools_parts_with_a_bootstrap_interval() -> None:
    m = ratio_metric([2, 1, 1, 0], [2, 2, 2, 2])
    assert m["value"] == 0.5 and (m["k"], m["n"]) == (4, 8) and m["method"] == "bootstrap"
    assert 0.0 <= narrow(m["low"], float) <= 0.5 <= narrow(m["high"], float) <= 1.0


NOISE = [
    ("There were 170 journalists.", [["70"]]),  # substring false positive
    ("See chapter 17 of the manual.", [["7"]]),  # one-digit answer inside another number
    ("PORT ALDER hosted the games.", [["Port Alder"]]),
    (REJECTION_SENTENCE, [["March"]]),
    (None, [["Norway"]]),  # the call failed
]


def test_noise_accuracy_default_vs_rgb() -> None:
    default = score([rec(r, a) for r, a in NOISE], "noise", "default")
    # only "PORT ALDER" is right; the failed item is missing (in no denominator), and counted
    assert (default["n"], default["failed"]) == (4, 1)
    assert (default["accuracy"]["k"], default["accuracy"]["n"]) == (1, 4)
    assert value(default, "rejection_rate") == pytest.approx(1 / 4)
    assert default["by_noise_ratio"][0]["accuracy"]["k"] == 1
    rgb = score([rec(r, a) for r, a in NOISE], "noise", "rgb")
    # original rules: "70" in "170" and "7" in "17" count; the failed item is dropped
    assert (rgb["n"], rgb["failed"]) == (4, 1)
    assert (rgb["accuracy"]["k"], rgb["accuracy"]["n"]) == (3, 4)
    assert rgb["rejection_rate"] is None


def test_refusal_and_answer_together_is_not_correct_by_default() -> None:
    both = f"{REJECTION_SENTENCE} But it might be Port Alder."
    m = score([rec(both, [["Port Alder"]])], "noise", "default")
    assert value(m, "accuracy") == 0.0 and value(m, "rejection_rate") == 1.0


NEGATIVE = [
    (REJECTION_SENTENCE, {"task": "rejection", "verdict": True}),  # our sentence
    (RGB_REFUSAL, {"task": "rejection", "verdict": True}),  # the original wording
    ("Norway won the most medals.", {"task": "rejection", "verdict": False}),  # right from memory
    ("Norway, probably.", {"task": "rejection", "verdict": None, "raw": "maybe"}),  # judge unreadable
    ("Germany won.", {"task": "rejection", "verdict": False}),
]


def test_negative_rejection_rate_default_vs_rgb() -> None:
    answer = [["Norway"]]
    default = score([rec(r, answer, ratio=1.0, judge=j) for r, j in NEGATIVE], "negative", "default", ratios=(1.0,))
    assert (default["rejection_rate"]["k"], default["rejection_rate"]["n"]) == (2, 5)
    assert (default["accuracy"]["k"], default["accuracy"]["n"]) == (2, 5)  # counted separately
    # judged: the unreadable verdict is in no denominator and is counted
    assert (default["rejection_rate_judged"]["k"], default["rejection_rate_judged"]["n"]) == (2, 4)
    assert default["judge_failed"] == 1
    rgb = score([rec(r, answer, ratio=1.0, judge=j) for r, j in NEGATIVE], "negative", "rgb", ratios=(1.0,))
    # original: our sentence holds its phrase too, and correct answers are added to refusals: items 0 to 3
    assert (rgb["rejection_rate"]["k"], rgb["rejection_rate"]["n"]) == (4, 5)
    assert value(rgb, "rejection_rate") == pytest.approx(0.8)
    # original judged rate: anything but a clear yes is a no
    assert (rgb["rejection_rate_judged"]["k"], rgb["rejection_rate_judged"]["n"]) == (2, 5)


COUNTERFACTUAL = [
    (f"{ERROR_SENTENCE} The correct answer is Port Alder.", {"task": "error", "verdict": True}),
    (f"{RGB_ERROR} {RGB_REFUSAL}", {"task": "error", "verdict": True}),  # detects, then refuses
    ("Lindmouth hosted the games.", {"task": "error", "verdict": False}),  # misled by the documents
    (ERROR_SENTENCE, {"task": "error", "verdict": True}),  # detects, gives no answer
    ("Port Alder.", {"task": "error", "verdict": None, "raw": "?"}),
]


def _cf_records() -> list[dict[str, Any]]:
    answer, fake = [["Port Alder"]], [["Lindmouth"]]
    out = [rec(r, answer, fake=fake, judge=j, key=f"d{i}") for i, (r, j) in enumerate(COUNTERFACTUAL)]
    out += [
        rec("Port Alder", answer, fake=fake, condition="no_documents", key="c0"),
        rec("Lindmouth", answer, fake=fake, condition="no_documents", key="c1"),
    ]
    return out


def test_counterfactual_default() -> None:
    m = score(_cf_records(), "counterfactual", "default")
    assert (m["accuracy"]["k"], m["accuracy"]["n"]) == (2, 5)  # Acc_doc: items 1 and 5
    assert (m["accuracy_without_docs"]["k"], m["accuracy_without_docs"]["n"]) == (1, 2)  # Acc
    assert (m["error_detection_rate"]["k"], m["error_detection_rate"]["n"]) == (3, 5)  # ED: 1, 2, 4
    # CR: of the three detections only item 1 also gives the true answer; the refusal is not a correction
    assert (m["error_correction_rate"]["k"], m["error_correction_rate"]["n"]) == (1, 3)
    assert value(m, "counterfactual_answer_rate") == pytest.approx(1 / 5)
    assert (m["error_detection_rate_judged"]["k"], m["error_detection_rate_judged"]["n"]) == (3, 4)
    assert (m["error_correction_rate_judged"]["k"], m["error_correction_rate_judged"]["n"]) == (1, 3)
    assert m["judge_failed"] == 1
    assert m["by_noise_ratio"][0]["accuracy_without_docs"]["k"] == 1


def test_counterfactual_rgb() -> None:
    m = score(_cf_records(), "counterfactual", "rgb")
    assert (m["accuracy"]["k"], m["accuracy"]["n"]) == (2, 5)
    assert (m["error_detection_rate"]["k"], m["error_detection_rate"]["n"]) == (3, 5)
    # original CR: the refusal (label -1 has no 0) counts as a correction: items 1 and 2
    assert (m["error_correction_rate"]["k"], m["error_correction_rate"]["n"]) == (2, 3)
    assert value(m, "error_correction_rate") == pytest.approx(2 / 3)
    assert (m["accuracy_without_docs"]["k"], m["accuracy_without_docs"]["n"]) == (1, 2)


def test_correction_rate_without_detections_is_undefined_by_default_and_zero_in_rgb() -> None:
    records = [rec("Lindmouth.", [["Port Alder"]], fake=[["Lindmouth"]])]
    assert score([dict(r) for r in records], "counterfactual", "default")["error_correction_rate"]["value"] is None
    assert score([dict(r) for r in records], "counterfactual", "rgb")["error_correction_rate"]["value"] == 0.0


def test_integration_partial_credit() -> None:
    answer = [["Port Alder"], ["Grey Cove"]]
    rows = ["Port Alder and Grey Cove.", "Port Alder in 2031.", "Grey Cove.", None]
    m = score([rec(r, answer, key=str(i)) for i, r in enumerate(rows)], "integration", "default")
    assert (m["accuracy"]["k"], m["accuracy"]["n"]) == (1, 3)  # the failed call (None) is missing
    assert (m["partial_accuracy"]["k"], m["partial_accuracy"]["n"]) == (4, 6)
    assert value(m, "partial_accuracy") == pytest.approx(4 / 6)
    rgb = score([rec(r, answer, key=str(i)) for i, r in enumerate(rows)], "integration", "rgb")
    assert (rgb["accuracy"]["k"], rgb["accuracy"]["n"]) == (1, 3) and rgb["partial_accuracy"] is None


def test_rgb_rules_on_single_responses() -> None:
    # Chinese runs delete spaces from the response only: an answer with a space can never match
    assert rgb_label_response("Adam McKay", [["Adam McKay"]], "zh")["correct"] is False
    assert rgb_label_response("Adam McKay", [["Adam McKay"]], "en")["correct"] is True
    # refusal and error phrases are case-sensitive in the original
    assert rgb_label_response("INSUFFICIENT INFORMATION", [["x"]], "en")["rejected"] is False
    assert rgb_label_response("FACTUAL ERRORS", [["x"]], "en")["error_detected"] is False
    assert rgb_label_response("文档信息 不足", [["x"]], "zh")["rejected"] is True  # after space removal
    lab = rgb_label_response("insufficient information; Port Alder", [["Port Alder"]], "en")
    assert lab["rgb_labels"] == [-1] and lab["correct"] is False
    # a part that is a list of aliases needs any one; separate parts need all
    assert rgb_label_response("port alder", [["Port Alder", "PA"], ["Grey Cove"]], "en")["rgb_labels"] == [1, 0]


def test_default_scoring_fixes_the_same_cases() -> None:
    det = build_detectors()
    from ragrade.robust.metrics import label_response

    assert label_response("Adam McKay", [["Adam McKay"]], det)["correct"] is True
    assert label_response("INSUFFICIENT INFORMATION", [["x"]], det)["rejected"] is True
    assert label_response("FACTUAL ERRORS", [["x"]], det)["error_detected"] is True
    assert label_response(None, [["x"]], det, error="boom")["failed"] is True


def test_skipped_records_are_counted_but_not_items() -> None:
    records = [rec("Port Alder", [["Port Alder"]], key="a"), {**rec(None, [["x"]], key="b"), "skipped": "short"}]
    m = score(records, "noise", "default")
    assert (m["n"], m["skipped"], m["failed"], m["accuracy"]["k"]) == (1, 1, 0, 1)
