"""The per-item Outcome: a failed request is missing (no value, a reason), never a wrong answer."""

from __future__ import annotations

import pytest

from ragrade.llm.base import Completion
from ragrade.outcome import NO_TEXT, Outcome, count_failed


def test_a_completion_becomes_an_answer_or_a_failure_with_its_reason() -> None:
    assert Outcome.of(Completion(text="Paris")) == Outcome("answer", "Paris")
    failed = Outcome.of(Completion(text=None, error="HTTP 500"))
    assert (failed.status, failed.value, failed.reason, failed.error) == ("failed", None, "HTTP 500", "HTTP 500")
    assert Outcome.of(Completion(text="half", error="cut off")).value is None  # an error wins over any text
    assert Outcome.of(Completion(text=None)).reason == NO_TEXT
    assert Outcome.answer("x").error is None and Outcome.skip("no answer").error is None


@pytest.mark.parametrize(
    ("status", "value", "reason"),
    [("failed", "a wrong answer", "HTTP 500"), ("failed", None, None), ("skipped", "x", "why"),
     ("skipped", None, ""), ("answer", "x", "why"), ("maybe", None, None)],
)  # fmt: skip
def test_impossible_outcomes_are_refused(status: str, value: str | None, reason: str | None) -> None:
    with pytest.raises(ValueError):
        Outcome(status, value, reason)  # type: ignore[arg-type]


def test_count_failed_counts_failures_only() -> None:
    outcomes = [Outcome.answer(None), Outcome.failure("timeout"), Outcome.skip("no answer"), Outcome.failure(None)]
    assert count_failed(outcomes) == 2 and [o.ok for o in outcomes] == [True, False, False, False]
    assert outcomes[3].reason == "failed"
