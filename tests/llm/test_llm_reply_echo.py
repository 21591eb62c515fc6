"""A reply that repeats its prompt (a base model continuing the text): :func:`ragrade.llm.replies.cut_echo`
cuts the repeated spans out and keeps what the model said itself, quotes of the passages included."""

from __future__ import annotations

import pytest

from ragrade.llm.replies import cut_echo

PASSAGES = [
    "The Varnholm lighthouse was painted crimson in 1923. Its keeper, Ada Lund, lit the lamp every night.",
    "The survey drone flies for 41 minutes on one battery charge. It carries a thermal camera.",
    "The Orrin glacier retreated 120 metres between 2001 and 2020. Researchers measure it each August.",
]
QUESTION = "How long does the survey drone fly?"
INSTRUCTIONS = (
    "You answer questions using only the numbered passages below.\n"
    "- After each statement, cite the passage numbers that support it in square brackets, e.g. [1] or [2][3].\n"
)
BLOCK = "\n\n".join(f"[{n}] (source: docs/f{n}.txt)\n{p}" for n, p in enumerate(PASSAGES, start=1))
PROMPT = f"{INSTRUCTIONS}\nPassages:\n{BLOCK}\n\nQuestion: {QUESTION}\nAnswer:"
FIELDS = [*PASSAGES, QUESTION]


def _cut(reply: str) -> tuple[str, bool]:
    cut = cut_echo(reply, PROMPT, FIELDS)
    return cut.text, cut.echoed


@pytest.mark.parametrize(
    ("reply", "own"),
    [
        (f"{INSTRUCTIONS}The drone flies for 41 minutes [2].", "The drone flies for 41 minutes [2]."),
        (f"Answer: {INSTRUCTIONS}\n41 minutes [2]", "41 minutes [2]"),  # its own words after it, less a label
        # the passages and the question again, with a passage header renumbered, then its answer
        (
            "[2] (source: docs/f1.txt)\nThe Varnholm lighthouse was painted crimson in 1923. Its keeper\n\n"
            f"Question: {QUESTION}\nAnswer: 41 [2]",
            "41 [2]",
        ),
        # a loop: prompt, answer, prompt, answer, cut off inside the next repeat
        (f"{BLOCK}\n\nQuestion: {QUESTION}\nAnswer: 41\n{PROMPT} 41\nYou answer questions using", "41"),
        (f"{INSTRUCTIONS}\nPassages:\nQuestion: {QUESTION}\nIt flies 41 minutes [2]", "It flies 41 minutes [2]"),
        (f"{INSTRUCTIONS}\n{PASSAGES[1]}", PASSAGES[1]),  # a whole passage line after the echo: a quote, kept
    ],
)
def test_the_repeated_prompt_is_cut_and_the_models_words_kept(reply: str, own: str) -> None:
    assert _cut(reply) == (own, True)


@pytest.mark.parametrize(
    "reply",
    [
        "It flies for 41 minutes [2].",
        "The survey drone flies for 41 minutes on one battery charge [2].",  # a quote of one passage
        "Ada Lund lit the lamp every night [2].",  # a quote, then a marker the next header also has
        "The documents do not cover it.",
        "",
    ],
)
def test_answers_and_quotes_are_no_echo(reply: str) -> None:
    assert _cut(reply) == (reply, False)


def test_a_reply_that_only_repeats_the_prompt_says_nothing() -> None:
    cut = cut_echo(f"{PROMPT}\n{PROMPT[:150]}", PROMPT, FIELDS)
    assert cut.echoed and cut.only_echo and cut.text == ""
    assert cut.echoed_words > 80
    first, end = cut.spans[0]
    assert first == 0 and end >= len(PROMPT)


def test_short_overlaps_are_the_models_own() -> None:
    # seven words of the instructions in a row are not yet an echo
    assert _cut("I answer questions using only the numbered passages.") == (
        "I answer questions using only the numbered passages.",
        False,
    )
