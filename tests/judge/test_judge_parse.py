from __future__ import annotations

import pytest

from ragrade.judge.parse import parse_score, parse_verdict


@pytest.mark.parametrize(
    ("text", "value", "method"),
    [
        ('{"score": 4, "reason": "close"}', 4.0, "json"),
        ('```json\n{"score": 5, "reason": "exact"}\n```', 5.0, "json"),
        ('Here you go: {"rating": "3", "explanation": "partly"} thanks', 3.0, "json"),
        ('{"score": "4/5"}', 4.0, "json"),
        ("Score: 4/5", 4.0, "fraction"),
        ("I would rate this 4 out of 5 because it misses a date.", 4.0, "fraction"),
        ("**Score: 2**\nThe answer names the wrong author.", 2.0, "label"),
        ("Rating - 3", 3.0, "label"),
        ("4.0\n\nThe generated answer matches the reference but is verbose.", 4.0, "leading"),
        ("5", 5.0, "leading"),
        ("Correctness score of 1 since it is off-topic.", 1.0, "label"),
    ],
)
def test_scores_parsed(text: str, value: float, method: str) -> None:
    got = parse_score(text)
    assert got.status == "ok", got
    assert got.value == value
    assert got.method == method


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("", "empty output"),
        (None, "empty output"),
        ("The answer seems fine to me.", "no score found"),
        ("Score: 8/10", "another scale"),
        ('{"score": 9}', "outside"),
        ('{"score": "great"}', "JSON field"),
        ("Score: 4. On reflection, score: 2.", "conflicting"),
        ("Score: 0", "outside"),
        ("Score: -1", "no score found"),
        ("lorem ipsum }{ ][ 42 out of", "no score found"),
    ],
)
def test_scores_unparsed_never_become_numbers(text: str, note: str) -> None:
    got = parse_score(text)
    assert got.status == "unparsed"
    assert got.value is None
    assert note in (got.note or "")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"verdict": "yes", "reason": "stated in [1]"}', 1.0),
        ('{"verdict": "NO"}', 0.0),
        ('{"supported": true}', 1.0),
        ('{"score": 0}', 0.0),
        ('```json\n{"verdict": "no", "reason": "adds a date"}\n```', 0.0),
        ("**Verdict: YES**", 1.0),
        ("Answer: NO\nThe passages never mention the year.", 0.0),
        ("YES. Everything is in passage 2.", 1.0),
        ("no", 0.0),
        ("The claim is backed by passage [1], there is no contradiction.\nYes", 1.0),
        ("Final answer - not supported", 0.0),
    ],
)
def test_verdicts_parsed(text: str, value: float) -> None:
    got = parse_verdict(text)
    assert got.status == "ok", got
    assert got.value == value


@pytest.mark.parametrize(
    "text",
    [
        "I am not sure what to say here.",
        '{"verdict": "maybe"}',
        "Verdict: yes. Hmm, actually verdict: no.",
        "%%% <<>> 0x1F",
        '{"score": 0.7}',
    ],
)
def test_verdicts_unparsed(text: str) -> None:
    got = parse_verdict(text)
    assert got.status == "unparsed"
    assert got.value is None


def test_reason_is_kept() -> None:
    assert parse_score('{"score": 3, "reason": "misses the year"}').reason == "misses the year"
    assert parse_verdict("NO\nadds an unsupported figure").reason == "adds an unsupported figure"
