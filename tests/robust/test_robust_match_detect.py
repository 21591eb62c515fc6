from __future__ import annotations

import pytest

from ragrade.llm.phrases import ERROR_SENTENCE, REJECTION_SENTENCE
from ragrade.robust.detect import (
    ERROR_SENTENCE_ZH,
    REJECTION_SENTENCE_ZH,
    build_detectors,
    parse_verdict,
)
from ragrade.robust.match import contains, match_parts, normalise, replace_all


@pytest.mark.parametrize(
    ("text", "alias", "expected"),
    [
        ("There were 170 journalists.", "70", False),  # the classic false positive
        ("About 70% of the delegates came.", "70", True),
        ("Some 70 delegates.", "70", True),
        ("It grew by 70.5 percent.", "70", False),
        ("See chapter 17.", "7", False),  # one-digit answers
        ("In 2017 the manual changed.", "7", False),
        ("Chapter 7.", "7", True),
        ("Growth was 6.4% in 2021.", "6", False),
        ("Growth was 6.4% in 2021.", "6.4", True),
        ("Growth was 16.4% in 2021.", "6.4", False),
        ("It sold 1,600 units.", "600", False),
        ("PORT ALDER hosted the games", "Port Alder", True),
        ("Port Alderney hosted the games", "Port Alder", False),
        ("the U.S. won", "U.S.", True),
        ("Ｐｏｒｔ  Ａｌｄｅｒ", "port alder", True),  # NFKC full-width + whitespace
        ("会议在11月3日举行", "1月3日", False),  # digits still need a boundary in Chinese
        ("会议在 1 月 3 日举行", "1月3日", True),  # spaces next to CJK are ignored
        ("北湾市举办了运动会", "北湾市", True),  # no boundary needed between CJK characters
        ("Kolm – Sons", "Kolm - Sons", True),  # dash variants unified
    ],
)
def test_contains_is_boundary_and_cjk_aware(text: str, alias: str, expected: bool) -> None:
    assert contains(text, alias) is expected


def test_match_parts_requires_each_part_and_accepts_any_alias() -> None:
    answer = [["Port Alder", "Port-Alder"], ["Grey Cove"]]
    assert match_parts("Port-Alder, then Grey Cove", answer) == [True, True]
    assert match_parts("Only Port Alder", answer) == [True, False]
    assert match_parts("nothing", answer) == [False, False]


def test_normalise() -> None:
    assert normalise("  Hello\n\tWORLD ") == "hello world"
    assert normalise("第 七 届 立法会") == "第七届立法会"


def test_replace_all_respects_boundaries() -> None:
    text, n = replace_all("70 delegates, not 170; 70!", "70", "45")
    assert (text, n) == ("45 delegates, not 170; 45!", 2)


def test_default_detectors_recognise_ours_and_the_original_wording_case_insensitively() -> None:
    det = build_detectors()
    for refusal in (
        REJECTION_SENTENCE,
        REJECTION_SENTENCE.upper(),
        REJECTION_SENTENCE_ZH,
        "I can not answer the question because of the Insufficient Information in documents.",
        "文档信息 不足，因此我无法回答。",
    ):
        assert det.rejection(refusal), refusal
    for report in (
        ERROR_SENTENCE,
        ERROR_SENTENCE.lower(),
        ERROR_SENTENCE_ZH,
        "There are FACTUAL ERRORS in the provided documents.",
        "提供文档的文档存在事实性错误。",
    ):
        assert det.error(report), report
    assert not det.rejection("Port Alder hosted the games.")
    assert not det.error("Port Alder hosted the games.")
    assert det.rejection.matched(REJECTION_SENTENCE) == REJECTION_SENTENCE


def test_configured_lists_replace_the_defaults_but_keep_the_instructed_sentence() -> None:
    det = build_detectors(["no idea"], ["is wrong"], always=["Cannot say."], always_error=["Bad docs."])
    assert det.rejection("I have NO IDEA.")
    assert det.rejection("cannot say.")
    assert not det.rejection("insufficient information")  # default phrase replaced
    assert det.error("This source is wrong")
    assert det.error("bad docs.")
    assert det.describe()["rejection_phrases"] == ["no idea", "Cannot say."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"verdict": "yes"}', True),
        ('{"verdict": "No", "reason": "it answers"}', False),
        ('```json\n{"verdict": "yes"}\n```', True),
        ("Sure. {'verdict': 'no'} Done.", False),
        ('{"refused": true}', True),
        ("true", True),
        ("No", False),
        ("maybe", None),
        ('{"verdict": "perhaps"}', None),
        ("", None),
        (None, None),
    ],
)
def test_parse_verdict_is_tolerant_but_never_guesses(text: str | None, expected: bool | None) -> None:
    assert parse_verdict(text) is expected
